"""``disco.serve``: an agent that stops on an error stops the others and says why in one line."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest

from disco import Agent, serve


class _Broken(Agent):
    async def run(self) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("the registry refused the registration:\n  name taken")


class _Patient(Agent):
    """Runs until cancelled (never started: the stop cancels a run still starting)."""

    cancelled = False

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            type(self).cancelled = True
            raise


def test_a_failing_agent_stops_the_others_and_is_reported_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISCO_DEBUG", raising=False)

    with pytest.raises(SystemExit) as exited:
        serve(_Patient("patient", register=False), _Broken("broken", register=False))

    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert _Patient.cancelled
    assert err.splitlines() == [
        "error: agent 'broken' stopped: RuntimeError: the registry refused the registration: "
        "name taken (--debug or DISCO_DEBUG=1 shows the traceback)"
    ]


def test_with_disco_debug_the_error_is_raised_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISCO_DEBUG", "1")

    with pytest.raises(RuntimeError, match="refused the registration"):
        serve(_Broken("broken", register=False))


def test_serve_needs_an_agent() -> None:
    with pytest.raises(ValueError, match="at least one agent"):
        serve()


_SERVES_UNTIL_A_SIGNAL = """
import asyncio, sys, time
from disco import Agent, serve

class Patient(Agent):
    async def run(self) -> None:
        print("running", flush=True)
        await asyncio.Event().wait()

serve(Patient("patient", register=False))
print("served", flush=True)
time.sleep(2)  # the process on its way out, as an interpreter's shutdown may take
print("exited", flush=True)
"""


def test_a_signal_after_the_stop_changes_nothing_either() -> None:
    # A terminal's Ctrl-C comes twice through `uv run`; the second one may land after
    # the agents stopped, once the event loop is closed: it was a KeyboardInterrupt
    # and exit status 130 there.
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVES_UNTIL_A_SIGNAL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        assert process.stdout.readline().strip() == "running"
        process.send_signal(signal.SIGINT)
        assert process.stdout.readline().strip() == "served"
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, out.strip(), err) == (0, "exited", "")
