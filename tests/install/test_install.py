"""Installing the built wheel into a fresh project, following docs/install.md to the letter.

One module-scoped fixture does the slow part once: build the wheel from a copy
of the source tree, make a clean virtualenv, install the wheel, start a host
project with ``django-admin startproject``, paste in the ``settings.py`` and
``urls.py`` blocks of docs/install.md, add an app of the host with its own
``llm_tools.py``, and migrate. The tests then look at the wheel and drive the
host's ``manage.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
INSTALL_DOC = REPO / "docs" / "install.md"

# Left out of the copy the wheel is built from: environments, caches, local
# databases and build output, none of which may influence what gets packaged.
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    "*.pyc",
    "*.sqlite3",
    "build",
    "dist",
    "*.egg-info",
    "staticfiles",
    "htmlcov",
    ".coverage",
    ".*_cache",
    ".hypothesis",
    "node_modules",
    "screenshots",
)

HOST_TOOL_MARKER = "host-station-7"

HOST_TOOLS = f'''\
"""Tools of the host project's own app (not the demo tools of the app's repository)."""

from typing import Annotated

from conversations.tools import tool


@tool
def get_weather(city: Annotated[str, "City name"]) -> dict[str, str]:
    """Get the current weather for a city from the host's weather station."""
    return {{"city": city, "sky": "clear", "station": "{HOST_TOOL_MARKER}"}}
'''

SETUP_PROFILE = """\
from conversations.models import LanguageModel, Profile, Provider

provider = Provider.objects.create(slug="offline", name="Offline", adapter="demo")
model = LanguageModel.objects.create(provider=provider, model_id="demo")
Profile.objects.create(slug="host-demo", name="Host demo", language_model=model, is_default=True)
print("profile ready")
"""

# Renders the chat page and the API inside the host through Django's test client.
SMOKE = """\
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()
user = get_user_model().objects.create_user("smoke", password="smoke-password-1")
client = Client()
anonymous = client.get("/chat/")
client.force_login(user)
page = client.get("/chat/")
profiles = client.get("/api/profiles/")
print("anonymous", anonymous.status_code, anonymous.headers.get("Location"))
print("page", page.status_code, b"conversations/chat.js" in page.content)
print("profiles", profiles.status_code, profiles.content.decode()[:300])
"""


@dataclass
class Host:
    """The installed host project."""

    root: Path
    python: Path
    env: dict[str, str]
    wheel: Path
    build_output: str
    timings: dict[str, float]

    def manage(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``manage.py`` of the host; fails the test with its output on a non-zero exit."""
        return run(
            [str(self.python), "manage.py", *args], cwd=self.root, env=self.env, timeout=timeout
        )


def run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300):
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if completed.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {completed.returncode}\n"
            f"--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
        )
    return completed


def documented_block(name: str) -> str:
    """The fenced code block of docs/install.md whose first line is ``# {name}``."""
    text = INSTALL_DOC.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL):
        if block.startswith(f"# {name}\n"):
            return block
    raise AssertionError(f"docs/install.md has no python block starting with '# {name}'")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what points at the repository's project or venv."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV"}
        and not key.startswith(("PYTEST_", "COV_CORE_"))
    }
    env.update(extra)
    return env


def build_wheel(out: Path, env: dict[str, str]) -> tuple[Path, str]:
    """The wheel built from a copy of the repository, and everything the build printed."""
    # Built from a copy, so concurrent work in the repository (or its own
    # build/ and *.egg-info) neither disturbs nor leaks into the wheel.
    source = out / "source"
    shutil.copytree(REPO, source, ignore=COPY_IGNORE)
    built = run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out / "dist"), str(source)],
        cwd=out,
        env=env,
    )
    (wheel,) = (out / "dist").glob("django_llm_conversations-*.whl")
    return wheel, built.stdout + built.stderr


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Host:
    if connection.vendor != "sqlite":
        # The host has a SQLite database of its own; the suite's database plays
        # no part, so `make test`'s second (PostgreSQL) pass would only repeat it.
        pytest.skip("independent of the suite's database; runs in the SQLite pass")
    tmp = tmp_path_factory.mktemp("install")
    env = clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    timings: dict[str, float] = {}

    started = time.monotonic()
    wheel, build_output = build_wheel(tmp, env)
    timings["build"] = time.monotonic() - started

    started = time.monotonic()
    venv.EnvBuilder(with_pip=True, clear=True).create(tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp, env=env)
    timings["install"] = time.monotonic() - started

    started = time.monotonic()
    django_admin = tmp / "venv" / "bin" / "django-admin"
    run([str(django_admin), "startproject", "host"], cwd=tmp, env=env)
    root = tmp / "host"
    host = Host(
        root=root,
        python=python,
        env=env,
        wheel=wheel,
        build_output=build_output,
        timings=timings,
    )
    settings = root / "host" / "settings.py"
    urls = root / "host" / "urls.py"
    with settings.open("a", encoding="utf-8") as f:
        f.write("\n" + documented_block("settings.py"))
    with urls.open("a", encoding="utf-8") as f:
        f.write("\n" + documented_block("urls.py"))

    # The host's own app with a tool, installed like any other app.
    host.manage("startapp", "weather_ext")
    (root / "weather_ext" / "llm_tools.py").write_text(HOST_TOOLS, encoding="utf-8")
    with settings.open("a", encoding="utf-8") as f:
        f.write('\nINSTALLED_APPS += ["weather_ext"]\n')
    host.manage("migrate", "--noinput")
    timings["host"] = time.monotonic() - started
    print("install timings (s):", {k: round(v, 1) for k, v in timings.items()})
    return host


def test_the_wheel_holds_the_app_and_nothing_else(host):
    with zipfile.ZipFile(host.wheel) as wheel:
        names = wheel.namelist()

    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]
    top_levels = {name.split("/", 1)[0] for name in names}
    assert top_levels == {"conversations", f"django_llm_conversations-{version}.dist-info"}
    assert not [n for n in names if n.startswith(("project/", "tests/", "bench/", "docs/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    expected = {
        "conversations/__init__.py",
        "conversations/py.typed",
        "conversations/migrations/__init__.py",
        "conversations/migrations/0001_initial.py",
        "conversations/migrations/0002_triggers.py",
        "conversations/templates/conversations/base.html",
        "conversations/templates/conversations/chat.html",
        "conversations/static/conversations/chat.js",
        "conversations/static/conversations/chat.css",
        "conversations/web/views.py",
        "conversations/api/urls.py",
        "conversations/management/commands/chat.py",
    }
    assert expected <= set(names), sorted(expected - set(names))
    # Every template and static file of the source tree is in the wheel.
    source = REPO / "conversations"
    for folder in ("templates", "static"):
        for path in (source / folder).rglob("*"):
            if path.is_file():
                assert path.relative_to(REPO).as_posix() in names


def test_the_wheel_carries_the_license_and_builds_without_deprecation_warnings(host):
    with zipfile.ZipFile(host.wheel) as wheel:
        names = wheel.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = wheel.read(metadata).decode()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        license_text = wheel.read(license_file).decode()

    assert "License-Expression: MIT" in headers.splitlines()
    assert license_text == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "the django-llm-conversations authors" in license_text
    assert "deprecat" not in host.build_output.lower(), host.build_output


def test_the_host_passes_the_system_checks_without_warnings(host):
    checked = host.manage("check", "--fail-level", "WARNING")

    assert "System check identified no issues (0 silenced)." in checked.stdout
    assert checked.stderr == ""


def test_the_app_ships_every_migration_it_needs(host):
    checked = host.manage("makemigrations", "--check", "--dry-run", "conversations")

    assert "No changes detected" in checked.stdout


def test_chat_calls_the_tool_of_the_hosts_own_app(host):
    created = host.manage("shell", "-c", SETUP_PROFILE)
    assert "profile ready" in created.stdout

    chat = host.manage(
        "chat", "--profile", "host-demo", "What's the weather in Leipzig?", timeout=60
    )

    assert '-> get_weather({"city": "Leipzig"}) succeeded' in chat.stdout
    # The demo model answers from the result, which only the host's tool produces.
    assert HOST_TOOL_MARKER in chat.stdout
    assert "[completed: 2 round(s)" in chat.stdout


def test_the_chat_page_and_the_api_are_served_by_the_host(host):
    smoke = host.manage("shell", "-c", SMOKE)

    lines = dict(line.split(" ", 1) for line in smoke.stdout.splitlines() if " " in line)
    assert lines["anonymous"] == "302 /chat/login/?next=/chat/"
    assert lines["page"] == "200 True"
    assert lines["profiles"].startswith("200 ")


API_DOCS = """\
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()
client = Client(raise_request_exception=False)
client.force_login(get_user_model().objects.create_user("reader", password="reader-password-1"))
print("schema", client.get("/api/schema/").status_code)
print("docs", client.get("/api/docs/").status_code)
"""


def test_the_api_schema_and_docs_are_served_by_the_host(host):
    served = host.manage("shell", "-c", API_DOCS)

    assert "schema 200" in served.stdout
    assert "docs 200" in served.stdout


def test_the_documented_blocks_hold_the_lines_that_matter():
    settings = documented_block("settings.py")
    urls = documented_block("urls.py")

    for app in (
        "rest_framework",
        "rest_framework.authtoken",
        "drf_spectacular",
        "drf_spectacular_sidecar",
        "conversations",
    ):
        assert f'"{app}",' in settings
    assert 'path("api/", include("conversations.api.urls"))' in urls
    assert 'path("chat/", include("conversations.web.urls"))' in urls


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def served_host(host) -> Iterator[str]:
    """The host's ``runserver`` (DEBUG on, as ``startproject`` leaves it); yields its URL."""
    port = free_port()
    server = subprocess.Popen(
        [str(host.python), "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=host.root,
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/schema/", timeout=2):  # noqa: S310 - local
                    break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"the host's runserver did not come up:\n{server.stdout.read()}")
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        server.stdout.close()


def test_the_api_docs_page_renders_in_the_host_without_network(served_host, browser):
    from playwright.sync_api import expect

    context = browser.new_context()
    blocked: list[str] = []

    def local_only(route):
        # Any request that would leave the machine fails, as it would offline.
        if urlsplit(route.request.url).hostname in {"127.0.0.1", "localhost"}:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", local_only)
    page = context.new_page()
    page.goto(f"{served_host}/api/docs/")

    title = page.locator(".swagger-ui .info .title")
    expect(title).to_be_visible(timeout=15_000)
    expect(title).to_contain_text("django-llm-conversations API")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert blocked == [], blocked
    context.close()
