"""Real processes for the integration tests: Celery workers and a uvicorn server.

They run the project against this test session's database (PostgreSQL: the
test database pytest-django created, so the tests need ``transaction=True``
for the processes to see their rows) and its Redis queue.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def database_url() -> str:
    """The URL of the database this test session uses (the ``test_...`` one)."""
    conf = connection.settings_dict
    if connection.vendor != "postgresql":
        raise RuntimeError("worker processes need PostgreSQL (mark the test postgres)")
    auth = quote(conf["USER"] or "", safe="")
    if conf["PASSWORD"]:
        auth += ":" + quote(conf["PASSWORD"], safe="")
    host = conf["HOST"] or "127.0.0.1"
    port = conf["PORT"] or "5432"
    return f"postgres://{auth}@{host}:{port}/{quote(conf['NAME'], safe='')}"


class Process:
    """A child process whose output goes to a log file the test can wait on."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        self._log_file = log.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # signals go to this process only, not to pytest
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, *, timeout: float = 30.0, count: int = 1) -> None:
        """Until ``text`` appears ``count`` times in the output; fails on exit or timeout."""
        deadline = time.monotonic() + timeout
        while self.output().count(text) < count:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited ({self.process.returncode}):\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {text!r} in {timeout} s:\n{self.output()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement, exactly like a machine going away."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM (a warm shutdown) without waiting; ``stop`` waits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log_file.close()

    def listening_port(self, *, timeout: float = 30.0) -> int:
        """The port a uvicorn started with ``--port 0`` took, once it listens.

        The kernel picks the port when uvicorn binds: nothing can take it in
        between, as it could if a port found free here were handed over.
        """
        self.wait_for("Uvicorn running on http://", timeout=timeout)
        found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", self.output())
        assert found, self.output()
        return int(found[1])

    def threads(self) -> int:
        """How many threads the process has now (Linux)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(
            next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1]
        )


def base_env(broker_url: str, queue: str, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        # Stream slots are keyed by user id, and every test database (one per
        # pytest-xdist worker) has its own user 1: a Redis cache, shared by the
        # sessions on TEST_REDIS_DB, keeps each session's keys apart.
        "DJANGO_CACHE_KEY_PREFIX": queue,
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra)
    return env


def start_worker(
    *, broker_url: str, queue: str, log_dir: Path, env: dict[str, str] | None = None
) -> Process:
    """``celery worker`` (solo pool) with the test tool app; returns once it is ready."""
    name = f"w-{uuid.uuid4().hex[:8]}"
    command = [
        str(BIN / "celery"),
        "-A",
        "project",
        "worker",
        "--pool=solo",
        "--concurrency=1",
        "-Q",
        queue,
        "-n",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        "info",
    ]
    environment = base_env(
        broker_url,
        queue,
        DJANGO_SETTINGS_MODULE="tests.worker_app.settings",
        **(env or {}),
    )
    worker = Process(name, command, environment, log_dir / f"{name}.log")
    worker.wait_for(" ready.")
    return worker


def start_uvicorn(
    *, broker_url: str, queue: str, log_dir: Path, env: dict[str, str] | None = None
) -> tuple[Process, str]:
    """``uvicorn project.asgi:application`` on a port of its own; returns it and its base URL."""
    command = [
        str(BIN / "uvicorn"),
        "project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--log-level",
        "info",
    ]
    environment = base_env(
        broker_url, queue, DJANGO_SETTINGS_MODULE="project.settings", **(env or {})
    )
    name = f"uvicorn-{uuid.uuid4().hex[:8]}"
    server = Process(name, command, environment, log_dir / f"{name}.log")
    return server, f"http://127.0.0.1:{server.listening_port()}"
