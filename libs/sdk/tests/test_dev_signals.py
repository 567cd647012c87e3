"""Ctrl-C while a local stack is in hand: the first stops it, later ones cannot break the stop."""

from __future__ import annotations

import os
import signal

import pytest

from disco._dev.signals import StopSignals


def _interrupt() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs before kill() returns to Python code


def test_while_running_the_first_signal_asks_for_the_stop_and_later_ones_only_say_so(
    capfd: pytest.CaptureFixture[str],
) -> None:
    before = signal.getsignal(signal.SIGINT)
    signals = StopSignals()
    with signals.caught():
        _interrupt()
        assert signals.requested
        assert signals.by_signal
        _interrupt()
        _interrupt()
        os.kill(os.getpid(), signal.SIGTERM)
    # Given back: the handler before (another test's event loop may have left its own).
    assert signal.getsignal(signal.SIGINT) is before

    err = capfd.readouterr().err
    assert err.count("stopping the stack") == 2  # the stop, then one note for the rest
    assert err.count("still stopping the stack") == 1


def test_while_starting_the_first_signal_interrupts_and_the_cleanup_is_not_interrupted() -> None:
    signals = StopSignals()
    cleaned = []

    def start() -> None:
        with signals.interrupting():
            try:
                _interrupt()
                pytest.fail("the interrupt did not break off the start")
            except KeyboardInterrupt:
                signals.stopping()
                _interrupt()  # a second Ctrl-C during the cleanup
                _interrupt()
                cleaned.append(True)
                raise

    with signals.caught(), pytest.raises(KeyboardInterrupt):
        start()
    assert cleaned == [True]


def test_a_stop_asked_for_before_the_start_interrupts_it_at_once() -> None:
    signals = StopSignals()
    with signals.caught():
        _interrupt()
        with pytest.raises(KeyboardInterrupt), signals.interrupting():
            pytest.fail("the start began though a stop was asked for")


def test_caught_is_reentrant_and_restores_the_handlers_once() -> None:
    before = signal.getsignal(signal.SIGINT)
    signals = StopSignals()
    with signals.caught():
        inner = signal.getsignal(signal.SIGINT)
        with signals.caught():
            pass
        assert signal.getsignal(signal.SIGINT) is inner
    assert signal.getsignal(signal.SIGINT) is before
