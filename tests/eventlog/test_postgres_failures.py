"""The PostgreSQL log under failure: many writers and a tailer, a writer killed or gone silent
while holding the head lock, a connection cut around COMMIT, a server restarted."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from urllib.parse import urlsplit

import pytest

psycopg = pytest.importorskip("psycopg")

from eventlog import LogBusyError, RecordedEvent, StorageError, verify_chain  # noqa: E402
from eventlog.contract import memory  # noqa: E402
from eventlog.postgres import PostgresEventLog  # noqa: E402
from tests.postgres import PgLog, PgServer  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


def contents(log: PostgresEventLog) -> list[str]:
    return [r.payload.content for r in log.read()]  # type: ignore[union-attr]


# -- many writers -----------------------------------------------------------------------------


def append_as(dsn: str, name: str, count: int) -> None:
    """A writer process: single appends, and a batch of three every tenth time."""
    log = PostgresEventLog(dsn)
    for i in range(count):
        if i % 10 == 0:
            log.append_many([memory(f"{name}:{i}:{j}", producer_task_id=name) for j in range(3)])
        else:
            log.append(memory(f"{name}:{i}", producer_task_id=name))
    log.close()


def test_four_writer_processes_and_a_tailer_see_no_gap(pg: PgLog) -> None:
    """Four processes append at once while a tailer reads `position > last` with no upper
    bound: every row it sees follows the last one, it ends at the head, and the chain
    verifies."""
    tailer = PostgresEventLog(pg.dsn)
    writers = [SPAWN.Process(target=append_as, args=(pg.dsn, f"w{n}", 40)) for n in range(4)]
    for writer in writers:
        writer.start()
    last, gaps, reads = 0, [], 0
    while any(w.is_alive() for w in writers) or last < tailer.head().position:
        for record in tailer.read(after=last, until=2**62):
            if record.position != last + 1:
                gaps.append((last, record.position))
            last = record.position
        reads += 1
    assert [0, 0, 0, 0] == [w.exitcode for w in writers]
    assert [] == gaps
    assert 4 * (36 + 4 * 3) == last == tailer.head().position
    assert 1 < reads
    assert verify_chain(tailer).ok
    tailer.close()


# -- a writer killed, a writer gone silent ---------------------------------------------------


def hold_the_head_lock(dsn: str, locked: Event) -> None:
    """A writer that takes the head lock, sends a row, and then hangs until it is killed."""
    log = PostgresEventLog(dsn)
    with log.transaction() as tx:
        tx.append(memory("never committed"))
        list(tx.read())
        locked.set()
        time.sleep(600)


def test_a_writer_killed_holding_the_lock_frees_it_at_once(pg: PgLog) -> None:
    """kill -9 of the lock holder: the next append proceeds at once, and the killed
    writer's uncommitted row is not in the log."""
    log = PostgresEventLog(pg.dsn, busy_timeout_s=10)
    log.append(memory("first"))
    locked = SPAWN.Event()
    holder = SPAWN.Process(target=hold_the_head_lock, args=(pg.dsn, locked))
    holder.start()
    assert locked.wait(30)
    holder.kill()
    holder.join()
    started = time.monotonic()
    record = log.append(memory("next"))
    assert time.monotonic() - started < 1.0
    assert 2 == record.position
    assert ["first", "next"] == contents(log)
    log.close()


def test_a_silent_holder_is_bounded_by_both_timeouts(pg: PgLog) -> None:
    """A holder idle inside its transaction makes writers wait at most `lock_timeout`, then
    LogBusyError says why and who; the server ends the holder's session after its idle
    timeout, the next append proceeds, and the holder learns nothing of it was written."""
    log = PostgresEventLog(pg.dsn, busy_timeout_s=0.3)
    log.append(memory("first"))
    holder = PostgresEventLog(pg.dsn, idle_timeout_s=1.0)
    scope = holder.transaction()
    scope.__enter__().append(memory("silent"))
    started = time.monotonic()
    with pytest.raises(LogBusyError, match=r"lock_timeout\) \(server process \d+, idle in tr"):
        log.append(memory("blocked"))
    assert 0.3 <= time.monotonic() - started < 1.0
    assert 1 == log.head().position
    time.sleep(1.2)
    assert 2 == log.append(memory("after")).position
    with pytest.raises(StorageError, match="nothing was written"):
        scope.__exit__(None, None, None)
    assert ["first", "after"] == contents(log)
    holder.close()
    log.close()


# -- a connection cut around COMMIT ---------------------------------------------------------


class CuttingProxy:
    """A TCP proxy to the server that cuts a connection when a marker passes: a client
    message is dropped (the server never sees it), or a server reply is (the client never
    does)."""

    def __init__(self, target: PgServer) -> None:
        parts = urlsplit(target.dsn)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._marker: tuple[str, bytes] | None = None
        self._guard = threading.Lock()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, direction: str, marker: bytes) -> None:
        """Cut the next connection whose `direction` ('request' or 'reply') carries `marker`."""
        self._marker = (direction, marker)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            for source, sink, direction in ((client, server, "request"), (server, client, "reply")):
                threading.Thread(
                    target=self._pump, args=(source, sink, direction, (client, server)), daemon=True
                ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        direction: str,
        pair: tuple[socket.socket, ...],
    ) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if data and self._marker and self._marker[0] == direction:
                with self._guard:
                    marker = self._marker
                    if marker is not None and marker[1] in data:
                        self._marker = None
                        self.cuts += 1
                        if direction == "reply":
                            time.sleep(0.2)
                        data = b""
            if not data:
                for end in pair:
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                    end.close()
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    def url(self, place: PgLog) -> str:
        parts = urlsplit(place.dsn)
        return place.dsn.replace(parts.netloc, f"{parts.username}@127.0.0.1:{self.port}", 1)

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def proxy(pg_server: PgServer) -> Iterator[CuttingProxy]:
    cutting = CuttingProxy(pg_server)
    yield cutting
    cutting.close()


@pytest.mark.parametrize(
    ("direction", "marker"),
    [("reply", b"COMMIT\x00"), ("reply", b"BEGIN\x00")],
    ids=["reply-to-commit-lost", "lost-before-commit"],
)
@pytest.mark.parametrize("event_id", [None, "given-1"], ids=["generated-id", "caller-id"])
def test_an_append_cut_off_around_commit_is_written_exactly_once(
    pg: PgLog, proxy: CuttingProxy, direction: str, marker: bytes, event_id: str | None
) -> None:
    """The connection is lost after the server committed (its reply is lost) or before it
    could: either way the append reconnects, settles by event id, and the event is in the
    log once."""
    log = PostgresEventLog(proxy.url(pg))
    log.append(memory("before"))
    proxy.cut(direction, marker)
    record = log.append(memory("cut", event_id=event_id))
    batch = log.append_many([memory("after"), memory("again")])
    assert 1 == proxy.cuts
    assert (2, [3, 4]) == (record.position, [r.position for r in batch])
    assert ["before", "cut", "after", "again"] == contents(log)
    assert [record] == [r for r in log.read() if r.event_id == record.event_id]
    log.close()


def test_a_transaction_cut_off_while_committing_settles_by_event_id(
    pg: PgLog, proxy: CuttingProxy
) -> None:
    """A transaction whose COMMIT reply is lost returns normally (its events are found);
    one whose COMMIT never reached the server raises, saying nothing was written."""
    log = PostgresEventLog(proxy.url(pg))
    proxy.cut("reply", b"COMMIT\x00")
    with log.transaction() as tx:
        tx.append_many([memory("a"), memory("b")])
    proxy.cut("request", b"COMMIT\x00")
    with pytest.raises(StorageError, match="nothing was written"), log.transaction() as tx:
        tx.append(memory("lost"))
    assert 2 == proxy.cuts
    assert ["a", "b"] == contents(log)
    log.close()


# -- a server restarted -------------------------------------------------------------------------


@dataclass
class PrivateServer:
    """A PostgreSQL cluster of this test's own, on a private port."""

    folder: Path
    port: int
    command: list[str]

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        folders = ["-D", str(self.folder / "data"), "-l", str(self.folder / "log")]
        subprocess.run(
            [*self.command, "pg_ctl", *folders, "-w", "-o", options, *args],
            check=True,
            capture_output=True,
            cwd="/",
        )


def tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return str(Path(found).parent)
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1].parent) if candidates else None


@pytest.fixture
def private_server() -> Iterator[PrivateServer]:
    bin_dir = tool("initdb")
    if bin_dir is None:
        if os.environ.get("FACTLEDGER_REQUIRE_PG") == "1":
            pytest.fail("FACTLEDGER_REQUIRE_PG=1 but initdb is not installed", pytrace=False)
        pytest.skip("initdb is not installed (needed to restart a server of the test's own)")
    folder = Path(tempfile.mkdtemp(prefix="factledger-pg-"))
    command = ["env", f"PATH={bin_dir}:{os.environ['PATH']}"]
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        command = ["runuser", "-u", "postgres", "--", *command]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = PrivateServer(folder, port, command)
    settings = ["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]
    subprocess.run(
        [*command, "initdb", "-D", str(folder / "data"), *settings],
        check=True,
        capture_output=True,
        cwd="/",
    )
    server.pg_ctl("start")
    yield server
    server.pg_ctl("stop", "-m", "fast")
    shutil.rmtree(folder, ignore_errors=True)


def test_a_server_restarted_under_a_writer_loses_no_acknowledged_write(
    private_server: PrivateServer,
) -> None:
    """The server crashes and restarts while a handle appends: the handle reconnects, and
    every append it acknowledged is in the log, once, at its position."""
    log = PostgresEventLog(private_server.dsn)
    acknowledged: list[RecordedEvent] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        try:
            while not stop.is_set():
                acknowledged.append(log.append(memory(f"w{len(acknowledged)}")))
        except BaseException as exc:
            failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)
    before = len(acknowledged)
    private_server.pg_ctl("restart", "-m", "immediate")
    time.sleep(0.3)
    stop.set()
    writer.join()
    assert [] == failures
    assert 0 < before < len(acknowledged)
    recorded = list(log.read())
    assert acknowledged == recorded
    assert verify_chain(log).ok
    log.close()


# -- refused, or only busy, at reconnect ------------------------------------------------------

AT = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize(
    ("message", "later"),
    [
        (AT + 'FATAL:  role "agent_codex" is not permitted to log in', False),
        (AT + 'FATAL:  password authentication failed for user "agent_codex"', False),
        (AT + 'FATAL:  role "agent_codex" does not exist', False),
        (AT + "Connection refused\n\tIs the server running on that host?", True),
        (AT + "FATAL:  the database system is starting up", True),
        (AT + "FATAL:  the database system is shutting down", True),
        (AT + "FATAL:  sorry, too many clients already", True),
        ("server closed the connection unexpectedly", True),
    ],
)
def test_only_a_server_away_or_busy_is_tried_again(message: str, later: bool) -> None:
    """libpq gives no SQLSTATE for a refusal at connect: a server that refused this login is
    final (no waiting out busy_timeout_s); one that did not answer, or is starting, stopping
    or full, is tried again."""
    from eventlog.postgres import _may_connect_later

    assert later == _may_connect_later(psycopg.OperationalError(message))
