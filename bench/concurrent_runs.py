"""Throughput of runs posted at once through the API and executed by Celery workers.

Usage, from the repository root (PostgreSQL and Redis running)::

    .venv/bin/python bench/concurrent_runs.py [--runs N] [--workers W] [--concurrency C]
                                              [--latency SECONDS] [--executor celery|inline]

What happens:

1. A throwaway PostgreSQL database is created beside the one ``DATABASE_URL``
   (or ``--postgres-url``) names, migrated, and dropped at the end.
2. A demo provider record with ``options={"latency_seconds": L}`` stands in for
   a remote model: every answer waits ``L`` seconds (the demo adapter's
   option, see docs/providers.md). Each run is the demo's weather question:
   one model call asking for ``get_weather``, the tool, one model call
   answering, so a run needs at least ``2 L`` seconds of model time.
3. ``W`` Celery worker processes start (``--pool=solo`` for C = 1, else
   ``--pool=threads -c C``) on a queue of their own in Redis.
4. A web server (Django's threaded WSGI development server, in this process)
   serves the API with ``EXECUTOR = "celery"``. ``N`` conversations are
   posted at once (one thread and HTTP client each, released by a barrier);
   each answer must be 202.
5. It waits until every run has ended, then prints the throughput (runs per
   second from the first POST to the last run's end), the time from POST to
   202, the queue wait (run created -> claimed by a worker), the run
   duration, and the bound ``W * C / (2 L)`` runs/s that model latency alone
   allows; and it checks that every run reached a terminal state (completed)
   and that every history is valid (``get_history`` + the four adapters'
   request validators).

``--executor inline`` runs the same workload with the loop inside the POST, for
comparison: the web process then holds one thread and one database
connection per run in flight for its whole duration.

The web process uses Django's psycopg connection pool as the host project
configures it (``DATABASE_POOL_*``, docs/scaling.md): ``--pool-max-size`` and
``--pool-timeout`` size it for this run, ``--no-pool`` switches it off (a
connection per request). It prints the pool's size, its statistics after the
POSTs, the count of each status, and PASS/MISS for "zero 5xx". With
``--expect-busy`` the pool is deliberately too small: the check is then that
every 5xx is a 503 ``service_unavailable`` with ``Retry-After`` (and that
there is at least one); the runs of the accepted POSTs must still complete.
The workers keep the default pool (or none, with ``--worker-conn-max-age``).

Prints numbers, asserts no time (see bench/README.md). Exit code 1 when a
check is a MISS, a run did not complete or a history is invalid.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from databases import fresh_database  # bench/ is sys.path[0] when run as a script

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/13"
QUESTION = "What's the weather in Paris?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="conversations posted at once")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="runs per worker at a time (1: solo pool)"
    )
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--executor", choices=("celery", "inline"), default="celery")
    parser.add_argument(
        "--worker-conn-max-age",
        type=int,
        default=0,
        help="CONN_MAX_AGE of the workers (0: a new database connection per task)",
    )
    parser.add_argument(
        "--pool-max-size", type=int, default=None, help="the web process's pool (default: 20)"
    )
    parser.add_argument(
        "--pool-timeout", type=float, default=None, help="seconds a request waits for a connection"
    )
    parser.add_argument("--no-pool", action="store_true", help="a connection per request instead")
    parser.add_argument(
        "--expect-busy",
        action="store_true",
        help="the pool is deliberately small: expect 503s with Retry-After, never a 500",
    )
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument(
        "--broker-url", default=os.environ.get("BENCH_BROKER_URL", DEFAULT_BROKER_URL)
    )
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    with fresh_database("postgres", args.postgres_url, label="runs") as description:
        os.environ["CELERY_BROKER_URL"] = args.broker_url
        os.environ["CELERY_TASK_DEFAULT_QUEUE"] = queue
        os.environ["CONVERSATIONS_EXECUTOR"] = args.executor
        worker_env = dict(os.environ)  # before the web process's own pool settings
        configure_pool(args)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print_header(args, description)
        token, conversation_ids = prepare(args.runs, args.latency)
        workers: list[subprocess.Popen[bytes]] = []
        try:
            if args.executor == "celery":
                workers = start_workers(
                    args.workers, args.concurrency, queue, args.worker_conn_max_age, worker_env
                )
            with web_server() as base_url:
                started, answers, stats = post_all(base_url, token, conversation_ids)
            ok = report(args, started, answers, conversation_ids, stats)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
            cleanup_queue(args.broker_url, queue)
    return 0 if ok else 1


# Setup -----------------------------------------------------------------------------------


def configure_pool(args: Any) -> None:
    """The web process's pool, through the host project's environment variables."""
    if args.no_pool:
        os.environ["DATABASE_POOL"] = "off"
        return
    os.environ["DATABASE_POOL"] = "on"
    os.environ.pop("DATABASE_CONN_MAX_AGE", None)
    if args.pool_max_size is not None:
        os.environ["DATABASE_POOL_MAX_SIZE"] = str(args.pool_max_size)
        os.environ["DATABASE_POOL_MIN_SIZE"] = str(min(2, args.pool_max_size))
    if args.pool_timeout is not None:
        os.environ["DATABASE_POOL_TIMEOUT"] = str(args.pool_timeout)


def prepare(runs: int, latency: float) -> tuple[str, list[str]]:
    """A user with a token, the slow demo profile, and one conversation per run."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from conversations.models import Conversation, LanguageModel, Profile, Provider

    user = get_user_model().objects.create_user(username="bench")
    token = Token.objects.create(user=user)
    provider = Provider.objects.create(
        slug="slow-demo",
        name="Demo with model latency",
        adapter=Provider.Adapter.DEMO,
        # The model's whole latency is the one measured here: no pause per streamed piece.
        options={"latency_seconds": latency, "stream_delay_seconds": 0},
    )
    model = LanguageModel.objects.create(provider=provider, model_id="demo")
    profile = Profile.objects.create(
        slug="bench",
        name="Bench",
        language_model=model,
        is_default=True,
        max_iterations=4,
        allowed_tools=["get_weather"],
    )
    conversations = Conversation.objects.bulk_create(
        [Conversation(owner=user, title=f"bench {i}", profile=profile) for i in range(runs)]
    )
    return token.key, [str(c.pk) for c in conversations]


def start_workers(
    count: int, concurrency: int, queue: str, conn_max_age: int, base_env: dict[str, str]
) -> list[subprocess.Popen[bytes]]:
    pool = (
        ["--pool=solo"] if concurrency == 1 else ["--pool=threads", f"--concurrency={concurrency}"]
    )
    env = {**base_env, "PYTHONPATH": str(REPO), "DATABASE_CONN_MAX_AGE": str(conn_max_age)}
    if conn_max_age:
        env["DATABASE_POOL"] = "off"  # persistent connections and Django's pool exclude each other
    workers = []
    for index in range(count):
        log = Path(tempfile.gettempdir()) / f"{queue}-{index}.log"
        command = [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "project",
            "worker",
            *pool,
            "-Q",
            queue,
            "-n",
            f"{queue}-{index}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            os.environ.get("BENCH_WORKER_LOG_LEVEL", "warning"),
        ]
        with log.open("wb") as out:
            workers.append(
                subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
            )
    wait_until_consuming(queue, count)
    return workers


def wait_until_consuming(queue: str, count: int, timeout: float = 60.0) -> None:
    """Until ``count`` workers answer a ping (they are connected and consuming)."""
    from project import celery_app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replies = celery_app.control.ping(
            destination=[f"{queue}-{i}@{platform.node()}" for i in range(count)], timeout=0.5
        )
        if len(replies) == count:
            return
    raise SystemExit(f"the {count} workers did not start within {timeout} s")


def cleanup_queue(broker_url: str, queue: str) -> None:
    import redis

    with contextlib.suppress(Exception):
        client = redis.Redis.from_url(broker_url)
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")


@contextlib.contextmanager
def web_server() -> Iterator[str]:
    """The API on Django's threaded WSGI server (as ``runserver`` serves it), in a thread."""
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadedWSGIServer):
        request_queue_size = 1024  # all clients connect at once (Django's default is 10)

    server = Server(("127.0.0.1", 0), Quiet, allow_reuse_address=True)
    server.set_app(get_wsgi_application())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# The measurement --------------------------------------------------------------------------


def post_all(
    base_url: str, token: str, conversation_ids: list[str]
) -> tuple[float, list[Any], dict[str, int]]:
    """POST one message to every conversation at the same moment; the answers in order."""
    import httpx
    from django.test.utils import override_settings

    answers: list[Any] = [None] * len(conversation_ids)
    barrier = threading.Barrier(len(conversation_ids) + 1)

    def post(index: int, conversation_id: str) -> None:
        with httpx.Client(base_url=base_url, timeout=600) as client:
            barrier.wait()
            sent = time.monotonic()
            try:
                response = client.post(
                    f"/api/conversations/{conversation_id}/messages/",
                    json={"content": QUESTION},
                    headers={"Authorization": f"Token {token}"},
                )
            except httpx.HTTPError as exc:
                answers[index] = (type(exc).__name__, time.monotonic() - sent, None, None)
                return
            answers[index] = (
                response.status_code,
                time.monotonic() - sent,
                response.text,
                response.headers.get("Retry-After"),
            )

    threads = [
        threading.Thread(target=post, args=(i, cid)) for i, cid in enumerate(conversation_ids)
    ]
    from django.db import connections

    with override_settings(CONVERSATIONS={**_conf(), "MESSAGE_THROTTLE_RATE": None}):
        connections.close_all()  # this thread's connection back: the requests get the whole pool
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.time()
        for thread in threads:
            thread.join()
        stats = pool_stats()
        wait_for_the_end(conversation_ids)
    return started, answers, stats


def pool_stats() -> dict[str, int]:
    """The web process's pool counters so far (empty without a pool)."""
    from django.db import connection

    pool = getattr(connection, "pool", None)
    return dict(pool.get_stats()) if pool is not None else {}


def _conf() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.CONVERSATIONS)


def wait_for_the_end(conversation_ids: list[str], timeout: float = 600.0) -> None:
    from conversations.models import Run

    deadline = time.monotonic() + timeout
    while Run.objects.filter(conversation_id__in=conversation_ids, status="running").exists():
        if time.monotonic() > deadline:
            raise SystemExit("runs still running after the timeout")
        time.sleep(0.02)


def report(
    args: Any,
    started: float,
    answers: list[Any],
    conversation_ids: list[str],
    stats: dict[str, int],
) -> bool:
    from conversations.models import Conversation, Run
    from conversations.selectors import get_history

    sys.path.insert(0, str(REPO))
    from tests.providers.replay import assert_every_adapter_accepts

    expected = 202 if args.executor == "celery" else 201
    statuses = [a[0] for a in answers]
    runs = list(Run.objects.filter(conversation_id__in=conversation_ids))
    ended = max(r.finished_at for r in runs if r.finished_at)
    elapsed = ended.timestamp() - started
    answer_s = [a[1] for a in answers]
    waits = [(r.claimed_at - r.started_at).total_seconds() for r in runs if r.claimed_at]
    durations = [(r.finished_at - r.started_at).total_seconds() for r in runs if r.finished_at]

    invalid = []
    # A POST answered 503 stored nothing: its conversation is still empty, with no history to check.
    with_runs = {r.conversation_id for r in runs}
    for conversation in Conversation.objects.filter(pk__in=with_runs):
        try:
            assert_every_adapter_accepts(get_history(conversation=conversation))
        except AssertionError as exc:
            invalid.append((conversation.pk, str(exc)[:200]))

    completed = sum(r.status == Run.Status.COMPLETED for r in runs)
    slots = args.workers * args.concurrency if args.executor == "celery" else args.runs
    bound = slots / (2 * args.latency) if args.latency else float("inf")
    print()
    others = sorted({str(s) for s in statuses if s != expected})
    print(
        f"answers           {statuses.count(expected)}/{len(statuses)} were {expected}"
        + (f" (others: {', '.join(others)})" if others else "")
    )
    print(
        f"runs completed    {completed}/{len(runs)} (every run terminal: {len(durations) == len(runs)})"
    )
    print(f"histories valid   {len(with_runs) - len(invalid)}/{len(with_runs)}")
    print(f"elapsed           {elapsed:.2f} s (first POST -> last run ended)")
    print(f"throughput        {len(runs) / elapsed:.2f} runs/s (model latency allows {bound:.2f})")
    print(f"POST -> answer    {summary(answer_s)}")
    if args.executor == "celery":
        print(f"queue wait        {summary(waits)}  (run created -> claimed by a worker)")
    print(f"run duration      {summary(durations)}  (run created -> ended)")
    for conversation_id, problem in invalid[:5]:
        print(f"INVALID history {conversation_id}: {problem}")
    counts = collections.Counter(str(s) for s in statuses)
    print(f"status counts     {', '.join(f'{s}: {n}' for s, n in sorted(counts.items()))}")
    if stats:
        print(
            f"pool after POSTs  {stats.get('requests_num', 0)} connections asked for, "
            f"{stats.get('requests_queued', 0)} waited ({stats.get('requests_wait_ms', 0)} ms "
            f"in all), {stats.get('requests_errors', 0)} timed out; "
            f"{stats.get('connections_num', 0)} connections opened"
        )
    server_errors = [a for a in answers if isinstance(a[0], int) and a[0] >= 500]
    busy = [
        a for a in server_errors if a[0] == 503 and a[3] and '"service_unavailable"' in (a[2] or "")
    ]
    zero_5xx = not server_errors
    verdict = {True: "PASS", False: "MISS"}
    print(f"zero 5xx          {verdict[zero_5xx]} ({len(server_errors)} answers of 500-599)")
    if args.expect_busy:
        # The deliberately small pool must say "busy" (503 + Retry-After), never fail (500).
        busy_ok = bool(server_errors) and len(busy) == len(server_errors)
        print(
            f"503 + Retry-After {verdict[busy_ok]} ({len(busy)} of {len(server_errors)} 5xx were "
            f"503 service_unavailable with Retry-After "
            f"{sorted({a[3] for a in busy}) or '-'})"
        )
    accepted = statuses.count(expected)
    every_other_busy = accepted + len(busy) == len(statuses)
    return (
        (busy_ok if args.expect_busy else zero_5xx)
        and every_other_busy
        and completed == len(runs) == accepted
        and not invalid
    )


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {ordered[-1] * 1000:.0f} ms"
    )


def describe_pool() -> str:
    from django.db import connection

    pool = connection.settings_dict["OPTIONS"].get("pool")
    if not pool:
        return "off (a connection per request)"
    return (
        f"min {pool['min_size']}, max {pool['max_size']} connections, "
        f"a request waits {pool['timeout']:g} s at most"
    )


def print_header(args: Any, description: str) -> None:
    pool = "solo" if args.concurrency == 1 else f"threads x {args.concurrency}"
    print(f"# concurrent_runs: {args.runs} runs posted at once, executor {args.executor}")
    if args.executor == "celery":
        print(
            f"workers           {args.workers} ({pool} pool, "
            f"CONN_MAX_AGE {args.worker_conn_max_age}; logs in {tempfile.gettempdir()})"
        )
    print(f"model latency     {args.latency:.3f} s per call (2 calls per run)")
    print(f"web database pool {describe_pool()}")
    print(f"database          {description}")
    print(
        f"machine           {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(f"load average      {load:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
