"""Fixtures of the fault tests: echo Tool processes (``_echo_tool``) a test starts and kills."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.processes import ROOT

ToolProcess = Callable[..., subprocess.Popen[bytes]]
"""``start(bootstrap, prefix, **env)``: an echo Tool process (more ``DISCO_*`` in ``env``)."""


@pytest.fixture
def tool_process(tmp_path: Path) -> Iterator[ToolProcess]:
    """Start echo Tool processes; any still running at the end is killed."""
    started: list[subprocess.Popen[bytes]] = []

    def start(bootstrap: str, prefix: str, **env: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"tool-{len(started)}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.faults._echo_tool", bootstrap, prefix],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)
