"""Shared fixtures; tests marked ``postgres`` are skipped on SQLite.

The test process publishes Celery messages to a queue of its own (in Redis
database ``TEST_REDIS_DB``, default 15), set here before anything uses the
broker, so neither a developer's worker nor another test session on the same
Redis ever receives them.
"""

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

TEST_REDIS_DB = int(os.environ.get("TEST_REDIS_DB", "15"))
BROKER_URL = f"redis://127.0.0.1:6379/{TEST_REDIS_DB}"
QUEUE = f"tests-{uuid.uuid4().hex[:12]}"

try:
    from project import celery_app
except ImportError:  # pragma: no cover
    celery_app = None
if celery_app is not None:
    celery_app.conf.update(broker_url=BROKER_URL, task_default_queue=QUEUE)

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

CHROMIUM = Path("/usr/bin/chromium")


def pytest_collection_modifyitems(config, items):
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: run with DATABASE_URL=postgres://...")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@dataclass(frozen=True)
class Broker:
    """The Redis broker of this test session: where its messages go."""

    url: str
    queue: str
    client: object

    def waiting(self) -> int:
        """Messages waiting in this session's queue."""
        return int(self.client.llen(self.queue))


@pytest.fixture(scope="session")
def broker():
    """This session's broker (Redis); skips when Redis or Celery is not available."""
    if celery_app is None:
        pytest.skip("Celery is not installed: pip install -e '.[dev]'")
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"Redis is not running at {BROKER_URL} (.ci/run starts it)")
    yield Broker(BROKER_URL, QUEUE, client)
    client.delete(QUEUE, f"_kombu.binding.{QUEUE}", f"_kombu.binding_permanent.{QUEUE}")
    client.close()


@pytest.fixture
def workers(broker, django_db_setup, tmp_path):
    """Start Celery worker processes on this session's queue and test database.

    ``workers(**env)`` returns a started :class:`tests.processes.Process`; every
    worker still alive at the end of the test is stopped. PostgreSQL only.
    """
    from .processes import start_worker

    started = []

    def start(**env):
        worker = start_worker(broker_url=broker.url, queue=broker.queue, log_dir=tmp_path, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.terminate()  # all at once: each takes a second or so to shut down
    for worker in started:
        worker.stop()


@pytest.fixture
def uvicorn(broker, django_db_setup, tmp_path):
    """Start ``uvicorn project.asgi:application``; ``uvicorn(**env)`` returns (process, url)."""
    from .processes import start_uvicorn

    started = []

    def start(**env):
        server, url = start_uvicorn(
            broker_url=broker.url, queue=broker.queue, log_dir=tmp_path, env=env
        )
        started.append(server)
        return server, url

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def browser():
    """Headless Chromium; request it after the fixtures that write to the database.

    Playwright's sync API runs an event loop in this thread, and Django refuses
    ORM calls from such a thread.
    """
    if sync_playwright is None:
        pytest.skip(
            "Playwright for Python is not installed: .venv/bin/pip install playwright "
            "(or pip install -e '.[dev]'); it drives Debian's chromium, so skip `playwright install`"
        )
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
