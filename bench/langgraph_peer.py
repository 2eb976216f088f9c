"""The LangGraph side of ``loop_overhead.py``: the same workload through a checkpointed graph.

A ``StateGraph`` over ``MessagesState`` with two nodes: ``model`` (a
zero-latency function that asks for k calls of the trivial tool in each of 5
rounds, then answers with text) and LangGraph's prebuilt ``ToolNode`` (which
runs one response's calls concurrently in threads), routed by
``tools_condition``. It is compiled with ``PostgresSaver`` or ``SqliteSaver``
and invoked with ``durability="sync"``: each step's checkpoint is written
before the next step starts, the mode closest to ours (ADR 0003), on a fresh
thread per turn.

Connections are made as LangGraph's own ``from_conn_string`` makes them
(PostgreSQL: autocommit, ``prepare_threshold=0``, ``dict_row``; SQLite:
``check_same_thread=False``), in the bench's throwaway database (PostgreSQL:
the same database as ours, its own tables; SQLite: a file beside ours, with
the same ``journal_mode=WAL`` and ``synchronous=NORMAL`` as the project's
settings give ours).

Statements and commits are counted by the drivers' hooks, one extra turn,
never timed: PostgreSQL through a psycopg cursor class that counts each
statement sent (each row of an ``executemany`` is one), with a commit per
``_cursor(pipeline=True)`` block that wrote (autocommit: a pipeline's
statements up to its sync are one implicit transaction) and per write sent
outside one; SQLite through ``sqlite3``'s trace callback, which sees every
statement the library runs, ``COMMIT`` included.

Without the ``bench`` extra's LangGraph packages :func:`available` says why,
and the bench goes on without this peer.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed
from pathlib import Path
from typing import Any

PACKAGES = ("langgraph", "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite")
WRITE_VERBS = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})


def available() -> str | None:
    """``None`` when LangGraph and both checkpointers import, else why not (one line)."""
    try:
        for module in ("langgraph.checkpoint.postgres", "langgraph.checkpoint.sqlite"):
            importlib.import_module(module)
        importlib.import_module("langgraph.prebuilt")
    except ImportError as exc:
        return (
            f"LangGraph comparison skipped ({exc}): install the bench extra, "
            "`.venv/bin/pip install -e '.[bench]'`"
        )
    return None


def versions() -> str:
    parts = []
    for name in PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            parts.append(f"{name} {installed(name)}")
    return ", ".join(parts)


@dataclass
class Tally:
    """Statements and commits of one LangGraph turn, read at each model call."""

    statements: int = 0
    commits: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)

    def mark(self) -> None:
        self.marks.append((self.statements, self.commits))


def _verb(sql: Any) -> str:
    text = sql.as_string(None) if hasattr(sql, "as_string") else str(sql)
    words = text.split(None, 1)
    return words[0].upper() if words else ""


class LangGraphLoop:
    """A compiled graph with its checkpointer; ``turn`` runs one 5-round turn on a new thread."""

    def __init__(
        self,
        vendor: str,
        rounds: int,
        arguments: Callable[[int, int], dict[str, str]],
        tool: Callable[[str], str],
        *,
        postgres_url: str = "",
        sqlite_path: Path | None = None,
    ) -> None:
        self.vendor = vendor
        self.rounds = rounds
        self.arguments = arguments
        self.tool = tool
        self.tally: Tally | None = None
        self._in_block = False
        self._block_wrote = False
        self._sqlite_wrote = False
        self._stack = contextlib.ExitStack()
        self.saver = self._saver(postgres_url, sqlite_path)
        self.graphs: dict[int, Any] = {}

    def close(self) -> None:
        self._stack.close()

    def backend_pid(self) -> int | None:
        """The PostgreSQL backend's process id (``None`` on SQLite)."""
        return self.saver.conn.info.backend_pid if self.vendor == "postgresql" else None

    # The checkpointer, as LangGraph's from_conn_string makes it, with counting hooks.

    def _saver(self, postgres_url: str, sqlite_path: Path | None) -> Any:
        if self.vendor == "postgresql":
            import psycopg
            from psycopg.rows import dict_row

            connection = self._stack.enter_context(
                psycopg.Connection.connect(
                    postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
                )
            )
            loop = self

            class CountingCursor(psycopg.Cursor):  # type: ignore[type-arg]
                """Counts each statement sent, and a commit for a write outside a block."""

                def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                    loop._count(query, 1)
                    return super().execute(query, params, **kwargs)

                def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
                    params_seq = list(params_seq)
                    loop._count(query, len(params_seq))
                    return super().executemany(query, params_seq, **kwargs)

            self._counting_cursor = CountingCursor
            self._plain_cursor = connection.cursor_factory
            saver = _counting_postgres_saver(connection)
            saver.loop = self
            saver.setup()
            return saver
        from langgraph.checkpoint.sqlite import SqliteSaver

        assert sqlite_path is not None
        connection = self._stack.enter_context(
            contextlib.closing(sqlite3.connect(sqlite_path, check_same_thread=False))
        )
        saver = SqliteSaver(connection)
        saver.setup()  # journal_mode=WAL
        # The synchronous setting the project's settings give our SQLite connections.
        connection.execute("PRAGMA synchronous = NORMAL")
        self._connection = connection
        return saver

    def _count(self, query: Any, statements: int) -> None:
        tally = self.tally
        if tally is None:
            return
        tally.statements += statements
        if _verb(query) in WRITE_VERBS:
            if self._in_block:
                self._block_wrote = True
            else:
                tally.commits += statements

    def _sqlite_trace(self, statement: str) -> None:
        tally = self.tally
        if tally is None:
            return
        verb = _verb(statement)
        if verb == "COMMIT":
            if self._sqlite_wrote:
                tally.commits += 1
            self._sqlite_wrote = False
        elif verb in ("BEGIN", "ROLLBACK"):
            if verb == "ROLLBACK":
                self._sqlite_wrote = False
        else:
            tally.statements += 1
            if verb in WRITE_VERBS:
                self._sqlite_wrote = True

    @contextlib.contextmanager
    def counting(self, tally: Tally) -> Iterator[None]:
        self.tally = tally
        self._in_block = False
        self._block_wrote = False
        self._sqlite_wrote = False
        if self.vendor == "postgresql":
            self.saver.conn.cursor_factory = self._counting_cursor
        else:
            self._connection.set_trace_callback(self._sqlite_trace)
        try:
            yield
            tally.mark()
        finally:
            if self.vendor == "postgresql":
                self.saver.conn.cursor_factory = self._plain_cursor
            else:
                self._connection.set_trace_callback(None)
            self.tally = None

    # The graph.

    def graph(self, k: int) -> Any:
        if k not in self.graphs:
            self.graphs[k] = self._compile(k)
        return self.graphs[k]

    def _compile(self, k: int) -> Any:
        from langchain_core.messages import AIMessage
        from langchain_core.tools import StructuredTool
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition

        name = self.tool.__name__

        def model(state: MessagesState) -> dict[str, Any]:
            if self.tally is not None:
                self.tally.mark()
            done = sum(1 for message in state["messages"] if isinstance(message, AIMessage))
            if done < self.rounds:
                calls = [
                    {
                        "name": name,
                        "args": self.arguments(done, i),
                        "id": f"call_{uuid.uuid4().hex}",
                        "type": "tool_call",
                    }
                    for i in range(k)
                ]
                return {"messages": [AIMessage(content="", tool_calls=calls)]}
            return {"messages": [AIMessage(content="done")]}

        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", ToolNode([StructuredTool.from_function(self.tool)]))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        return builder.compile(checkpointer=self.saver)

    def turn(self, k: int) -> float:
        """One 5-round turn on a new thread; its duration in seconds."""
        graph = self.graph(k)
        config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 50}
        gc.collect()
        started = time.perf_counter()
        result = graph.invoke({"messages": [("user", "Go.")]}, config, durability="sync")
        elapsed = time.perf_counter() - started
        last = result["messages"][-1]
        if last.content != "done":
            raise RuntimeError(f"LangGraph's turn ended with {last.content!r}")
        return elapsed

    def counted_turn(self, k: int) -> Tally:
        tally = Tally()
        with self.counting(tally):
            self.turn(k)
        return tally


def _counting_postgres_saver_class() -> Any:
    from langgraph.checkpoint.postgres import PostgresSaver

    class CountingPostgresSaver(PostgresSaver):
        """PostgresSaver whose ``pipeline=True`` blocks (one transaction each) count a commit
        when they wrote."""

        loop: LangGraphLoop

        @contextlib.contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            loop = getattr(self, "loop", None)
            if loop is None or not pipeline:
                with super()._cursor(pipeline=pipeline) as cursor:
                    yield cursor
                return
            loop._in_block, loop._block_wrote = True, False
            try:
                with super()._cursor(pipeline=pipeline) as cursor:
                    yield cursor
            finally:
                loop._in_block = False
            if loop.tally is not None and loop._block_wrote:
                loop.tally.commits += 1

    return CountingPostgresSaver


def _counting_postgres_saver(connection: Any) -> Any:
    return _counting_postgres_saver_class()(connection)
