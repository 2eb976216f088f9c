"""Every ``conversations`` name the README, CONTRIBUTING, docs/ and the ADRs show can be imported.

The names come from the fenced code blocks (``from conversations... import``
lines and dotted names) and from the prose's backticked spans of README.md and
docs/*.md; each one is a test of its own, so a rename that leaves the
documentation behind fails here with the name and the file.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    REPO / "README.md",
    REPO / "CONTRIBUTING.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs" / "adr").glob("*.md")),
]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
BACKTICKS = re.compile(r"`([^`\n]+)`")
FROM_IMPORT = re.compile(
    r"^\s*from\s+(conversations(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n]+)", re.MULTILINE
)
DOTTED = re.compile(r"(?<![\w./-])conversations(?:\.\w+)+")
# System check ids (conversations.E001, conversations.W0xx) are not Python names.
CHECK_ID = re.compile(r"^conversations\.[EW][0-9x]{3}$")


def _celery_task_names() -> set[str]:
    """The names the app registers its Celery tasks under (``conversations.execute_run``)."""
    from conversations import tasks

    found = (tasks.execute_run_task, tasks.recover_runs_task)
    return {task.name for task in found if task is not None}


def _imports(code: str) -> set[str]:
    names = set()
    for module, imported in FROM_IMPORT.findall(code):
        for item in imported.strip("()").split(","):
            name = item.split("#", 1)[0].split(" as ", 1)[0].strip()
            if name:
                names.add(f"{module}.{name}")
    return names


def _permission_names() -> set[str]:
    """The app's own permissions as ``has_perm`` names them (``conversations.<codename>``)."""
    from django.apps import apps

    models = list(apps.get_app_config("conversations").get_models())
    custom = {f"conversations.{code}" for model in models for code, _ in model._meta.permissions}
    default = {
        f"conversations.{action}_{model._meta.model_name}"
        for model in models
        for action in model._meta.default_permissions
    }
    return custom | default


def _dotted(text: str) -> set[str]:
    return {
        name
        for name in DOTTED.findall(text)
        if not CHECK_ID.match(name)
        and name not in CELERY_TASK_NAMES
        and name not in PERMISSION_NAMES
    }


def documented_names() -> list[tuple[str, str]]:
    """``(name, document)`` for every conversations name shown in the documents."""
    found: set[tuple[str, str]] = set()
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO).as_posix()
        blocks = FENCE.findall(text)
        prose = FENCE.sub("", text)
        names = set()
        for block in blocks:
            names |= _imports(block) | _dotted(block)
        for span in BACKTICKS.findall(prose):
            names |= _imports(span) | _dotted(span)
        found |= {(name, where) for name in names}
    return sorted(found)


def resolve(name: str) -> object:
    """Import the longest importable module prefix of ``name``, then walk its attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise  # the module exists but imports something that is missing
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(name)


CELERY_TASK_NAMES = _celery_task_names()
PERMISSION_NAMES = _permission_names()
NAMES = documented_names()


def test_the_documents_show_names_to_check():
    names = {name for name, _ in NAMES}
    assert "conversations.tools.tool" in names
    assert "conversations.domain.ChatMessage" in names
    assert len(names) > 10
    assert {"conversations.execute_run", "conversations.recover_runs"} == CELERY_TASK_NAMES


@pytest.mark.parametrize(("name", "document"), NAMES, ids=[f"{n} ({d})" for n, d in NAMES])
def test_a_documented_name_can_be_imported(name, document):
    try:
        resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{document} shows {name}, which cannot be imported: {exc}")


WHERE_ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<where>[^|]+) \|$", re.MULTILINE)


def _contributing_map() -> list[str]:
    """The paths of CONTRIBUTING.md's "where code lives" table, in order."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Where code lives", 1)[1].split("\n## ", 1)[0]
    paths = []
    for row in WHERE_ROW.finditer(section):
        paths += [span for span in BACKTICKS.findall(row["where"]) if "/" in span]
    return paths


def test_every_path_of_the_contributing_map_exists():
    paths = _contributing_map()
    assert paths, "the map has no rows"
    missing = [path for path in paths if not (REPO / path).exists()]
    assert missing == [], f"CONTRIBUTING.md names paths that do not exist: {missing}"


def test_every_package_of_the_app_is_on_the_contributing_map():
    """Each package of ``conversations/`` (and each capability of services and api) has a row."""
    named = {path.rstrip("/").removesuffix("/__init__.py") for path in _contributing_map()}
    app = REPO / "conversations"
    packages = [p for p in app.iterdir() if (p / "__init__.py").exists()]
    packages += [p for p in (app / "services").iterdir() if (p / "__init__.py").exists()]
    packages += [p for p in (app / "api").iterdir() if (p / "__init__.py").exists()]
    unnamed = sorted(
        path.relative_to(REPO).as_posix()
        for path in packages
        if path.relative_to(REPO).as_posix() not in named
    )
    assert unnamed == [], f"packages missing from CONTRIBUTING.md's map: {unnamed}"
