"""Ctrl-C while a local stack is in hand: the first stops it, later ones cannot break the stop."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from disco._dev.signals import StopSignals, launching


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


def test_an_interrupt_while_a_child_is_launched_is_raised_once_its_handle_is_kept() -> None:
    # Raised inside Popen after the fork, it would lose the child: a service
    # nobody stops (the CI flake of test_dev_interrupt, 1 run in 5).
    signals = StopSignals()
    children: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        with signals.interrupting(), launching():
            _interrupt()  # lands as the launch begins
            children.append(subprocess.Popen(["sleep", "30"], start_new_session=True))
            assert signals.requested
        pytest.fail("the waiting interrupt was not raised at the end of the launch")

    try:
        with signals.caught(), pytest.raises(KeyboardInterrupt):
            start()
        assert len(children) == 1
        assert children[0].poll() is None  # in hand, so the stop can end it
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_a_launch_that_fails_raises_its_own_error_not_the_waiting_interrupt() -> None:
    signals = StopSignals()

    def launch() -> None:
        with launching():
            _interrupt()
            subprocess.Popen(["/nonexistent/disco-broker"])

    with signals.caught(), signals.interrupting():
        with pytest.raises(FileNotFoundError):
            launch()
        # Nothing is left waiting to break off what comes after.
        with launching():
            pass


def test_nested_launches_raise_the_waiting_interrupt_once_at_the_outer_end() -> None:
    signals = StopSignals()
    reached: list[str] = []

    def start() -> None:
        with signals.interrupting(), launching():
            with launching():
                _interrupt()
                reached.append("inner")
            reached.append("outer")

    with signals.caught(), pytest.raises(KeyboardInterrupt):
        start()
    assert reached == ["inner", "outer"]


def test_outside_a_start_a_launch_leaves_signals_to_the_running_stack(
    capfd: pytest.CaptureFixture[str],
) -> None:
    signals = StopSignals()
    with signals.caught(), launching():  # a broker restarted while the stack runs
        _interrupt()
    assert signals.requested
    assert "stopping the stack" in capfd.readouterr().err
