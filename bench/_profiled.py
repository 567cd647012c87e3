"""Run ``python -m module`` under cProfile and write the profile even when stopped by a signal.

    python bench/_profiled.py OUTPUT.prof module [args...]

``python -m cProfile`` writes its output only when the program returns, but uvicorn
raises the captured SIGTERM/SIGINT again once it has shut down, and the default
handler then ends the process before cProfile writes. Here those signals end the
process with ``SystemExit`` instead, so the profile is written.

The profile counts the process's CPU time, not wall time: a service spends most of
its wall time waiting in the event loop's poll, which is not what it costs.

With ``BENCH_PROFILE_WINDOW=1`` in the environment the profile records only between
a ``SIGUSR1`` (start) and a ``SIGUSR2`` (stop) the bench sends, e.g. around its
concurrent run, so that start-up and the other phases do not blur what it measures.
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys
import time
from types import FrameType


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    output, module, *rest = sys.argv[1:]
    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)
    sys.argv = [module, *rest]
    profiler = cProfile.Profile(time.process_time)
    if os.environ.get("BENCH_PROFILE_WINDOW") == "1":
        signal.signal(signal.SIGUSR1, lambda signum, frame: profiler.enable())
        signal.signal(signal.SIGUSR2, lambda signum, frame: profiler.disable())
    else:
        profiler.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        profiler.disable()
        profiler.dump_stats(output)


if __name__ == "__main__":
    main()
