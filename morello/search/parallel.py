"""Helper walks: the synthesis of one Spec on several cores.

Each helper is a forked process that walks the same Spec from the top, but starts each
Spec's action list at another place (helper ``i`` of ``n`` at ``i/n`` of the way through,
then round), so that the walks reach different parts of the graph first. After every few
hundred Specs it solves, each walk sends the answers it found since the last time to every
other walk and takes in theirs (``_Walk.take_in``): a Spec one walk solved is not solved
again by another once the answer has arrived. The first walk (the caller's, in this
process) keeps the memo table, into which it also puts what it takes in, and builds the
Impl; the helpers are stopped as soon as it has the answer. Where the process cannot fork
safely (``can_fork``), the walk runs alone.

Which walk found an answer does not change it: a Spec's best action is chosen by cost, then
peaks, then its position in the Spec's own action list, whatever order the list was walked
in, and a Spec's answer holds from its peaks up to its ceiling in any walk. So the program
is the one a walk alone finds (tests/search/test_helper_walks.py checks that).

Each pair of walks has a pipe each way. A thread in each process receives without pause,
so a send never waits for the other walk to reach its next trade; the batches are
unpickled by the walk itself when it trades.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from morello.context import SynthesisContext
    from morello.search.solve import _Walk
    from morello.spec import Spec


def default_jobs() -> int:
    """Walks to run by default: one per core this process may use, at most 4 (each walk
    holds its own copy of the answers, and walks beyond the cores only take turns)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


# Libraries that run threads of their own once imported: a fork copies the process with
# those threads stopped wherever they were, and the child may then wait forever on a lock
# one of them held (JAX warns so at every fork). Where one is loaded, the walk runs alone.
_THREADED_LIBRARIES = ("jax", "torch", "tensorflow")


def can_fork() -> bool:
    """Whether helper walks can run here: they are forked processes, so the platform must
    fork, no library that runs threads of its own may be loaded, and this process may not
    be a daemon (a worker of a ``multiprocessing.Pool``), which may have no children."""
    return (
        "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
        and not any(name in sys.modules for name in _THREADED_LIBRARIES)
    )


class _Link:
    """One walk's pipes to the other walks: sends go straight out, and a thread keeps
    receiving into ``arrived`` until every other walk has closed its end."""

    def __init__(self, inbound: list[Connection], outbound: list[Connection]) -> None:
        self.outbound = outbound
        self.arrived: collections.deque[bytes] = collections.deque()
        self.taken_in = 0
        self._thread = threading.Thread(
            target=self._receive, args=(list(inbound),), name="morello-walk-receiver", daemon=True
        )
        self._thread.start()

    def _receive(self, conns: list[Connection]) -> None:
        while conns:
            for conn in wait(conns):
                try:
                    self.arrived.append(conn.recv_bytes())  # type: ignore[union-attr]
                except (EOFError, OSError):
                    conns.remove(conn)  # type: ignore[arg-type]
                    conn.close()  # type: ignore[union-attr]

    def trade(self, walk: _Walk) -> None:
        """Send what ``walk`` solved since the last trade; take in what has arrived."""
        batch = walk.outbox
        if batch:
            walk.outbox = []
            data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            for conn in list(self.outbound):
                try:
                    conn.send_bytes(data)
                except OSError:  # that walk has ended
                    self.outbound.remove(conn)
                    conn.close()
        while self.arrived:
            self.taken_in += walk.take_in(pickle.loads(self.arrived.popleft()))

    def close(self) -> None:
        for conn in self.outbound:
            conn.close()
        self.outbound = []
        self._thread.join(timeout=5)


def _help(
    spec: Spec,
    ctx: SynthesisContext,
    index: int,
    jobs: int,
    mine: tuple[list[Connection], list[Connection]],
    others: list[Connection],
    parent: int,
    db: Path | None,
) -> None:
    """Helper ``index``'s walk, in the forked process. It reads the memo table file
    ``db`` (if any) through a connection of its own, and ends when its walk does, or when
    the first walk's process is gone."""
    from morello.db.sqlite import open_table
    from morello.search.solve import _Walk, walking

    # Ctrl-C reaches the whole process group: the first walk stops this one (terminate).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for conn in others:  # only this walk's ends stay open here, so each pipe's EOF is seen
        conn.close()
    link = _Link(*mine)
    memo = None
    if db is not None:
        # Not the first walk's connection, which this process inherited: SQLite's file
        # locks belong to a process, and a connection must not cross a fork.
        # A file it cannot read leaves the helper walking without it (the first walk
        # reports what is wrong with the file).
        with contextlib.suppress(Exception):
            memo = open_table(db, ctx, read_only=True)
    walk = _Walk(ctx, memo)
    walk.keeps = False
    walk.first_action = lambda count: index * count // jobs

    def trade() -> None:
        if os.getppid() != parent:
            os._exit(0)
        link.trade(walk)

    walk.outbox = []
    walk.trade = trade
    with contextlib.suppress(Exception), walking():
        walk.answer(spec)
        link.trade(walk)
    link.close()
    if memo is not None:
        with contextlib.suppress(Exception):
            memo.close()


@contextlib.contextmanager
def helpers(walk: _Walk, spec: Spec, ctx: SynthesisContext, jobs: int) -> Iterator[_Link | None]:
    """``jobs - 1`` helper walks of ``spec`` trading answers with ``walk`` while the block
    runs (it yields the link, whose ``taken_in`` counts the answers taken from them, or
    None without helpers); they are stopped when it ends, however it ends."""
    if jobs <= 1 or not can_fork():
        yield None
        return
    mp = multiprocessing.get_context("fork")
    # pipes[s][r]: (reader, writer) carrying walk s's answers to walk r
    pipes = {(s, r): mp.Pipe(duplex=False) for s in range(jobs) for r in range(jobs) if s != r}

    def ends(i: int) -> tuple[tuple[list[Connection], list[Connection]], list[Connection]]:
        """Walk ``i``'s (inbound, outbound) ends, and every other end, which it closes."""
        inbound = [pipes[s, r][0] for (s, r) in pipes if r == i]
        outbound = [pipes[s, r][1] for (s, r) in pipes if s == i]
        others = [
            pipe[end]
            for (s, r), pipe in pipes.items()
            for end in (0, 1)
            if (r, s)[end] != i  # a reader is walk r's, a writer walk s's
        ]
        return (inbound, outbound), others

    db = getattr(getattr(walk.memo, "store", None), "path", None)  # a file the helpers read
    every = [conn for pair in pipes.values() for conn in pair]
    procs = []
    link = None
    try:
        for i in range(1, jobs):
            mine, others = ends(i)
            proc = mp.Process(
                target=_help,
                args=(spec, ctx, i, jobs, mine, others, os.getpid(), db),
                name=f"morello-walk-{i}",
                daemon=True,
            )
            proc.start()
            procs.append(proc)
        mine, others = ends(0)
        for conn in others:
            conn.close()
        link = _Link(*mine)
        walk.outbox = []
        walk.trade = lambda: link.trade(walk)
        yield link
    finally:
        walk.trade = None
        walk.outbox = None
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join()
        if link is not None:
            link.close()
        else:
            for conn in every:
                conn.close()
