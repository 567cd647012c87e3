"""``disco.serve``: an agent that stops on an error stops the others and says why in one line."""

from __future__ import annotations

import asyncio

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
