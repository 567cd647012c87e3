"""The embedded servers fail at start with an error that says what went wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from disco._dev.broker import EmbeddedBroker
from disco._dev.errors import EmbeddedStartError
from disco._dev.ports import PortInUseError, free_port
from disco._dev.postgres import EmbeddedPostgres


def test_postgres_says_when_initdb_cannot_create_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    data.mkdir()
    (data / "someone-elses-file").write_text("not a database")
    server = EmbeddedPostgres(data_dir=data, port=free_port(), log_path=tmp_path / "pg.log")

    with pytest.raises(EmbeddedStartError, match="initdb could not create") as raised:
        server.start()

    assert "not empty" in str(raised.value)


def test_the_broker_says_which_port_is_taken(tmp_path: Path) -> None:
    first = EmbeddedBroker(port=free_port(), log_path=tmp_path / "a.log")
    first.start()
    try:
        second = EmbeddedBroker(port=first.port, log_path=tmp_path / "b.log")
        with pytest.raises(PortInUseError, match=rf"{first.port}.*DISCO_KAFKA_PORT"):
            second.start()
    finally:
        first.stop()


def test_postgres_is_running_until_it_stops_or_dies(tmp_path: Path) -> None:
    server = EmbeddedPostgres(
        data_dir=tmp_path / "pg", port=free_port(), log_path=tmp_path / "pg.log", durable=False
    )
    assert not server.is_running()  # no data folder yet
    server.start()
    try:
        assert server.is_running()
        assert server.psql("SELECT 1").strip() == "1"
    finally:
        server.stop()
    assert not server.is_running()

    # A lock file left by a server that died: its pid is no process any more.
    (server.data_dir / "postmaster.pid").write_text(f"{2**22 + 1}\n{server.data_dir}\n")
    assert not server.is_running()
    (server.data_dir / "postmaster.pid").write_text("garbage\n")
    assert not server.is_running()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, Postgres runs as a user of its own")
def test_postgres_stops_even_when_its_user_can_no_longer_reach_its_data(tmp_path: Path) -> None:
    # As root, pg_ctl runs as the server's user. A folder above the data that
    # turns private after the start (pytest does that to its base temp folder
    # whenever a session starts) made `pg_ctl stop` fail, and the stop with it.
    private = tmp_path / "private"
    server = EmbeddedPostgres(
        data_dir=private / "pg", port=free_port(), log_path=private / "pg.log", durable=False
    )
    server.start()
    try:
        private.chmod(0o700)

        server.stop()

        assert not server.is_running()
    finally:
        private.chmod(0o755)
        server.stop()


def _worker_threads(pid: int) -> int:
    tasks = Path(f"/proc/{pid}/task")
    return sum((task / "comm").read_text().strip() == "tokio-rt-worker" for task in tasks.iterdir())


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads threads from /proc")
@pytest.mark.parametrize("threads", [1, 3])
def test_the_broker_runs_the_worker_threads_it_is_given(tmp_path: Path, threads: int) -> None:
    broker = EmbeddedBroker(port=free_port(), log_path=tmp_path / "b.log", threads=threads)
    broker.start()
    try:
        assert broker.pid is not None
        assert _worker_threads(broker.pid) == threads
    finally:
        broker.stop()


def test_the_broker_needs_a_worker_thread(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one worker thread"):
        EmbeddedBroker(port=free_port(), log_path=tmp_path / "b.log", threads=0).start()
