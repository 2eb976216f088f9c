"""Shared fixtures; tests marked ``postgres`` are skipped on SQLite.

The users, the offline demo provider, model and profile, and the conversations
every package builds on are defined here once; package conftests keep only
what is specific to them.

The test process publishes Celery messages to a queue of its own (in Redis
database ``TEST_REDIS_DB``, default 15), set here before anything uses the
broker, so neither a developer's worker nor another test session on the same
Redis ever receives them.
"""

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import hypothesis
import pytest
from django.db import connection

from conversations.models import Conversation, LanguageModel, Profile, Provider

TEST_REDIS_DB = int(os.environ.get("TEST_REDIS_DB", "15"))
BROKER_URL = f"redis://127.0.0.1:6379/{TEST_REDIS_DB}"
QUEUE = f"tests-{uuid.uuid4().hex[:12]}"

try:
    from project import celery_app
except ImportError:  # pragma: no cover
    celery_app = None
if celery_app is not None:
    celery_app.conf.update(broker_url=BROKER_URL, task_default_queue=QUEUE)

# The demo model pauses between streamed pieces by default (about 30 a second, so
# that people see it stream); tests want its answers at once. Set before any
# provider is built, so that every test, and every process a test starts (workers,
# servers), inherits it; tests of the pause set a provider option or the variable.
os.environ["CONVERSATIONS_DEMO_STREAM_DELAY"] = "0"

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

CHROMIUM = Path("/usr/bin/chromium")

# Hypothesis's deadline (200 ms an example) and its "too slow" health check
# assert wall-clock time, which depends on the machine's load (pytest-xdist
# workers, other jobs), not on the code under test.
hypothesis.settings.register_profile(
    "suite", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("suite")

SYSTEM_PROMPT = "You are terse."


def pytest_collection_modifyitems(config, items):
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: run with DATABASE_URL=postgres://...")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


# No passwords: hashing one costs most of a second, and clients log in with
# force_authenticate / force_login or a token.
@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory")


@pytest.fixture
def provider(db):
    """The offline demo provider (no network)."""
    return Provider.objects.create(slug="demo", name="Demo", adapter=Provider.Adapter.DEMO)


@pytest.fixture
def language_model(provider):
    return LanguageModel.objects.create(provider=provider, model_id="demo-model")


@pytest.fixture
def profile(language_model):
    """The default profile: the demo model, a system prompt, at most four iterations."""
    return Profile.objects.create(
        slug="demo",
        name="Demo",
        language_model=language_model,
        system_prompt=SYSTEM_PROMPT,
        is_default=True,
        max_iterations=4,
        temperature=0.5,
        max_tokens=256,
    )


@pytest.fixture
def conversation(user):
    """An empty conversation of ``user`` without a profile."""
    return Conversation.objects.create(owner=user, title="Weather")


@pytest.fixture
def other_conversation(user):
    """A second empty conversation of the same ``user``."""
    return Conversation.objects.create(owner=user, title="Other")


@pytest.fixture
def demo_conversation(user, profile):
    """An empty conversation of ``user`` on the demo ``profile``."""
    return Conversation.objects.create(owner=user, title="Weather talk", profile=profile)


@pytest.fixture
def snapshot_hook(settings):
    """``when_snapshot_forgotten(run_id, hook)``: act where the loop forgets a run's snapshot."""
    from tests import snapshot_hook as hooks

    settings.CACHES = {
        "default": {"BACKEND": "tests.snapshot_hook.SnapshotHookCache", "LOCATION": hooks.LOCATION}
    }
    yield hooks.when_snapshot_forgotten
    hooks.clear_hooks()


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


@pytest.fixture
def small_pool(transactional_db):
    """The default database behind a psycopg pool of ONE connection that waits 0.2 s at most.

    PostgreSQL only (mark the test ``postgres``). Whatever the session's own
    pool settings, this test runs pooled; they are put back afterwards.
    """
    from django.db import connections

    conf = connection.settings_dict  # one dict, shared by every thread's connection
    saved = conf["OPTIONS"].get("pool"), conf["CONN_MAX_AGE"]
    connections.close_all()
    connection.close_pool()
    conf["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 0.2}
    conf["CONN_MAX_AGE"] = 0
    yield
    connections.close_all()
    connection.close_pool()
    if saved[0] is None:
        del conf["OPTIONS"]["pool"]
    else:
        conf["OPTIONS"]["pool"] = saved[0]
    conf["CONN_MAX_AGE"] = saved[1]


@pytest.fixture
def held_connection(small_pool):
    """``held_connection()``: a context in which another thread holds the pool's only connection."""
    import contextlib
    import threading

    from django.db import connections

    @contextlib.contextmanager
    def hold():
        connections.close_all()  # this thread's connection goes back to the pool first
        taken, release = threading.Event(), threading.Event()

        def holder():
            try:
                connection.ensure_connection()
                taken.set()
                release.wait(30)
            finally:
                connection.close()

        thread = threading.Thread(target=holder, name="holds-the-connection")
        thread.start()
        try:
            assert taken.wait(10), "the other thread got no connection"
            yield
        finally:
            release.set()
            thread.join(10)

    return hold
