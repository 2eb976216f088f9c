"""Latency of live deltas from the model to an SSE client, and streams per ASGI process.

Usage, from the repository root (PostgreSQL and Redis running)::

    .venv/bin/python bench/stream_latency.py [--deltas 500] [--streams 200] [--rate 20]
                                             [--seconds 10] [--redis-url URL]

What happens:

1. A throwaway PostgreSQL database is created beside the one ``DATABASE_URL``
   (or ``--postgres-url``) names, migrated, and dropped at the end.
2. Latency, for each bus (in-process, Redis, PostgreSQL): a uvicorn server runs
   ``project.asgi`` in a thread of this process; an SSE client (httpx, another
   thread) follows a running run's ``/api/runs/{id}/events/``; a "provider"
   publishes ``--deltas`` text deltas as fast as it can, each stamped with
   ``time.monotonic()`` as it leaves (the snapshot written first, as the loop
   does). With the in-process bus the provider is a thread of the server's
   process; with Redis and PostgreSQL it is a separate process, as a Celery
   worker would be. The client records arrival minus stamp (one clock: the
   machine's monotonic clock) for every delta, and checks that none was
   dropped or reordered.
3. Capacity: a uvicorn process (``uvicorn project.asgi:application``, Redis
   bus and Redis cache) serves ``--streams`` SSE clients (asyncio, this
   process) while four provider processes publish ``--rate`` deltas per
   second to each of their runs for ``--seconds`` (without snapshots: their
   cost is the workers', not the web process's). It prints the uvicorn process's
   CPU share over that time, the latency percentiles under load, and checks
   every stream got every delta in order.

Targets (PASS/MISS): p50 <= 5 ms in-process, p50 <= 15 ms across processes,
``--streams`` streams without a dropped or reordered delta. Prints numbers;
asserts no time (see bench/README.md). Exit code 1 when a delta was lost or
reordered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from databases import fresh_database  # bench/ is sys.path[0] when run as a script

REPO = Path(__file__).resolve().parent.parent
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"
TARGET_LOCAL_MS = 5.0
TARGET_REMOTE_MS = 15.0
PROVIDERS = 4
"""Processes publishing the capacity test's deltas (a share of the runs each)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=500)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="deltas per second per stream")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--publish", default=None, help=argparse.SUPPRESS)  # provider process
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.publish is not None:
        return provider_process(args)

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    redis_bus = f"{args.redis_url}?prefix={prefix}"
    with (
        fresh_database("postgres", args.postgres_url, label="stream") as description,
        closing_bus(),
    ):
        os.environ["DJANGO_CACHE_URL"] = args.redis_url
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(f"# {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print(f"# {description}; Redis {args.redis_url}")
        token = prepare_user()
        ok = True
        print(f"\n## Latency: {args.deltas} deltas as fast as the provider can, one SSE client")
        for name, url, target in (
            ("in-process", "", TARGET_LOCAL_MS),
            ("Redis", redis_bus, TARGET_REMOTE_MS),
            ("PostgreSQL", "postgres", TARGET_REMOTE_MS),
        ):
            ok &= latency(name, url, target, token, args)
        print(
            f"\n## Capacity: {args.streams} streams of a {args.rate:g} deltas/s model, one uvicorn"
        )
        ok &= capacity(redis_bus, token, args)
    return 0 if ok else 1


# Setup ------------------------------------------------------------------------------------


@contextlib.contextmanager
def closing_bus() -> Iterator[None]:
    """Close the event bus's listener and connections before the database is dropped."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            from conversations import events

            events.reset()


def prepare_user() -> str:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username="bench")
    # The cache is shared with earlier runs of the bench, whose user had the same id:
    # give back any stream slot an interrupted run left taken.
    from django.core.cache import cache

    cache.delete_many([f"conversations:stream-slot:{user.pk}:{n}" for n in range(1000)])
    return str(Token.objects.create(user=user).key)


def running_runs(count: int) -> list[str]:
    """``count`` runs that look executed elsewhere (claimed, running), with a snapshot each."""
    from django.contrib.auth import get_user_model

    from conversations import events
    from conversations.models import Conversation
    from conversations.providers.scripted import ScriptedProvider
    from conversations.services.loop.runs import claim_run, start_run

    user = get_user_model().objects.get(username="bench")
    runs = []
    for number in range(count):
        conversation = Conversation.objects.create(owner=user, title=f"stream {number}")
        run = start_run(conversation=conversation, content="go", provider=ScriptedProvider())
        claim_run(run=run)
        # An answer has begun: each client's ``inflight`` event tells it is subscribed.
        events.set_inflight(run.pk, {"seq": 0, "text": "", "reasoning": "", "tool_calls": []})
        runs.append(str(run.pk))
    return runs


def end_runs(run_ids: list[str]) -> None:
    from django.utils import timezone

    from conversations import events
    from conversations.models import Run

    Run.objects.filter(pk__in=run_ids).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )
    for run_id in run_ids:
        events.publish(run_id, events.CHANGED)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The provider ------------------------------------------------------------------------------


def publish_deltas(run_ids: list[str], count: int, rate: float, snapshots: bool = True) -> None:
    """``count`` deltas to each run: as fast as possible (``rate`` 0) or ``rate`` per second."""
    from conversations import events

    started = time.monotonic()
    text = ""
    for seq in range(1, count + 1):
        text += "tok "
        for run_id in run_ids:
            if snapshots:
                snapshot = {"seq": seq, "text": text, "reasoning": "", "tool_calls": []}
                events.set_inflight(run_id, snapshot)
            events.publish(
                run_id, "text.delta", {"seq": seq, "text": "tok ", "t": time.monotonic()}
            )
        if rate:
            pause = started + seq / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)


def provider_process(args: argparse.Namespace) -> int:
    """``--publish run,run,...``: the provider as a process of its own (a worker's place)."""
    import django

    django.setup()
    publish_deltas(args.publish.split(","), args.deltas, args.rate, snapshots=args.rate == 0)
    from conversations import events

    events.reset()
    return 0


def start_provider(
    run_ids: list[str], bus: str, deltas: int, rate: float
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CONVERSATIONS_EVENTS_URL": bus, "PYTHONPATH": str(REPO)}
    command = [sys.executable, __file__, "--publish", ",".join(run_ids)]
    command += ["--deltas", str(deltas), "--rate", str(rate)]
    return subprocess.Popen(command, env=env, cwd=REPO)


# Reading the stream ------------------------------------------------------------------------


class Received:
    """What one client got: latencies (ms) and whether the deltas came complete and in order."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.seqs: list[int] = []
        self.subscribed = threading.Event()
        self.finished = False
        self.error: str | None = None

    def feed(self, kind: str, data: dict[str, Any]) -> None:
        now = time.monotonic()
        if kind == "inflight":
            self.subscribed.set()
        elif kind == "text.delta":
            self.latencies.append((now - data["t"]) * 1000)
            self.seqs.append(data["seq"])
        elif kind == "run_finished":
            self.finished = True

    def complete(self, count: int) -> bool:
        return self.seqs == list(range(1, count + 1))


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "event" in fields:
                yield fields["event"], json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def follow(base_url: str, token: str, run_id: str, received: Received) -> None:
    import httpx

    url = f"{base_url}/api/runs/{run_id}/events/"
    headers = {"Authorization": f"Token {token}"}
    with httpx.stream("GET", url, headers=headers, timeout=120) as response:
        for kind, data in sse_events(response.iter_lines()):
            received.feed(kind, data)
            if received.finished:
                return


async def afollow(client: Any, base_url: str, token: str, run_id: str, received: Received) -> None:
    url = f"{base_url}/api/runs/{run_id}/events/"
    headers = {"Authorization": f"Token {token}"}
    async with client.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            received.error = f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
            return
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line == "":
                if "event" in fields:
                    received.feed(fields["event"], json.loads(fields["data"]))
                    if received.finished:
                        return
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")


def percentiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    cuts = statistics.quantiles(values, n=100)
    return statistics.median(values), cuts[98]


# Latency -----------------------------------------------------------------------------------


@contextlib.contextmanager
def server_thread() -> Iterator[str]:
    """uvicorn serving ``project.asgi`` in a thread of this process."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        "project.asgi:application", host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def latency(name: str, bus: str, target: float, token: str, args: argparse.Namespace) -> bool:
    from django.test import override_settings

    settings = {"EVENTS_URL": bus, "MAX_STREAMS_PER_USER": args.streams + 10}
    with override_settings(CONVERSATIONS=settings), server_thread() as base_url:
        (run_id,) = running_runs(1)
        received = Received()
        client = threading.Thread(target=follow, args=(base_url, token, run_id, received))
        client.start()
        received.subscribed.wait(30)
        if bus:
            provider = start_provider([run_id], bus, args.deltas, 0)
            provider.wait(120)
        else:
            publish_deltas([run_id], args.deltas, 0)
        time.sleep(0.5)  # the last deltas on their way
        end_runs([run_id])
        client.join(60)
    p50, p99 = percentiles(received.latencies)
    complete = received.complete(args.deltas)
    verdict = "PASS" if p50 <= target and complete else "MISS"
    where = "provider thread in the server's process" if not bus else "provider in its own process"
    print(
        f"{name:<11} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
        f"({len(received.seqs)}/{args.deltas} deltas, in order: {complete}; {where})  "
        f"target p50 <= {target:g} ms: {verdict}"
    )
    return complete


# Capacity ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def capacity(bus: str, token: str, args: argparse.Namespace) -> bool:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "CONVERSATIONS_EVENTS_URL": bus,
        "CONVERSATIONS_MAX_STREAMS_PER_USER": str(args.streams + 10),
    }
    command = [str(Path(sys.executable).parent / "uvicorn"), "project.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(command, env=env, cwd=REPO)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port)
        run_ids = running_runs(args.streams)
        deltas = max(1, int(args.rate * args.seconds))
        results = [Received() for _ in run_ids]
        cpu: dict[str, float] = {}

        async def clients() -> None:
            import httpx

            limits = httpx.Limits(max_connections=args.streams + 10)
            async with httpx.AsyncClient(timeout=120, limits=limits) as client:
                tasks = []
                # Clients arrive in waves of 20, each wave once the previous one is subscribed.
                for start in range(0, len(run_ids), 20):
                    wave = list(zip(run_ids, results, strict=True))[start : start + 20]
                    tasks += [
                        asyncio.create_task(afollow(client, base_url, token, run_id, received))
                        for run_id, received in wave
                    ]
                    deadline = time.monotonic() + 120
                    while not all(received.subscribed.is_set() for _, received in wave):
                        done = [task for task in tasks if task.done()]
                        if done or time.monotonic() > deadline:
                            errors = {r.error for r in results if r.error} or {
                                repr(t.exception()) for t in done
                            }
                            raise RuntimeError(f"streams did not open: {errors or 'timeout'}")
                        await asyncio.sleep(0.05)
                cpu["before"], cpu["at"] = cpu_seconds(server.pid), time.monotonic()
                # Several model processes, as several workers would be.
                providers = [
                    start_provider(run_ids[part::PROVIDERS], bus, deltas, args.rate)
                    for part in range(PROVIDERS)
                ]
                while any(provider.poll() is None for provider in providers):
                    await asyncio.sleep(0.1)
                cpu["after"], cpu["until"] = cpu_seconds(server.pid), time.monotonic()
                await asyncio.sleep(0.5)
                await asyncio.to_thread(end_runs, run_ids)
                await asyncio.wait_for(asyncio.gather(*tasks), 60)

        asyncio.run(clients())
    finally:
        server.terminate()
        server.wait(15)
    elapsed = cpu["until"] - cpu["at"]
    share = (cpu["after"] - cpu["before"]) / elapsed * 100
    achieved = deltas / elapsed
    latencies = [value for received in results for value in received.latencies]
    p50, p99 = percentiles(latencies)
    whole = sum(received.complete(deltas) for received in results)
    verdict = "PASS" if whole == len(results) else "MISS"
    print(
        f"{len(results)} streams x {deltas} deltas ({args.rate:g}/s asked, {achieved:.1f}/s "
        f"achieved by the providers, Redis bus): uvicorn CPU "
        f"{share:.0f}% of one core; p50 {p50:.2f} ms, p99 {p99:.2f} ms; "
        f"{whole}/{len(results)} streams complete and in order: {verdict}"
    )
    return whole == len(results)


def wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("uvicorn did not start")


if __name__ == "__main__":
    raise SystemExit(main())
