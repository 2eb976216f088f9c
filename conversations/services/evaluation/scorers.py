"""Scorers: plain callables that judge one answer, registered by name; the built-in ones.

A scorer takes a :class:`Scoring` (the example, the answer, the run, its
tool calls) and returns a number, a boolean or a label, stored as a
``Score`` under the scorer's name, or ``None`` when the example gives it
nothing to judge (no ``expected`` for ``exact_match``, ...). Apps add
scorers in an ``llm_scorers`` module, with ``@scorer``, as they add tools in
``llm_tools``; those modules are imported on first use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema
from django.utils.module_loading import autodiscover_modules

from conversations import domain
from conversations.exceptions import InvalidArgumentError
from conversations.models import Evaluation, Profile, Run

__all__ = [
    "SCORERS_MODULE",
    "ScoreValue",
    "Scorer",
    "ScorerRegistry",
    "Scoring",
    "autodiscover_scorers",
    "scorer",
    "scorers",
]

SCORERS_MODULE: Final = "llm_scorers"
"""The module of an installed app whose ``@scorer`` functions are registered."""

ScoreValue = float | bool | str | None
"""What a scorer returns: a number, a boolean, a label, or ``None`` (nothing to judge)."""


@dataclass(frozen=True, slots=True)
class Scoring:
    """What a scorer sees of one replayed example."""

    example: Mapping[str, Any]
    """The dataset line: ``input``, and ``expected``, ``contains``, ``schema``, ``tool``,
    ``rubric`` as the scorers need them."""
    answer: str
    """The run's final answer (empty when it ended without one)."""
    run: Run
    """The run that answered."""
    tool_calls: tuple[domain.ToolCall, ...] = ()
    """Every call the run made, in order."""
    judge: Profile | None = None
    """The profile the LLM judge asks (``--judge``)."""
    evaluation: Evaluation | None = None
    """The evaluation being run."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Extra values the caller passes through (a provider for the judge in tests)."""


Scorer = Callable[[Scoring], ScoreValue]
"""A scorer: one answer in, one value out."""


class ScorerRegistry:
    """Scorers by name; thread-safe, discovered from installed apps on first use."""

    def __init__(self) -> None:
        self._scorers: dict[str, Scorer] = {}
        self._lock = threading.Lock()
        self._discovered = False

    def register(self, name: str, function: Scorer) -> Scorer:
        """Add ``function`` under ``name``; a name already taken is refused."""
        if not name or not name.replace("_", "").isalnum():
            raise InvalidArgumentError(
                f"a scorer name is letters, digits and underscores, got {name!r}",
                code="invalid_scorer_name",
            )
        with self._lock:
            if name in self._scorers and self._scorers[name] is not function:
                raise InvalidArgumentError(
                    f"a scorer named {name!r} is already registered", code="duplicate_scorer"
                )
            self._scorers[name] = function
        return function

    def _discover(self) -> None:
        if not self._discovered:
            self._discovered = True
            autodiscover_scorers()

    def get(self, name: str) -> Scorer:
        """The scorer ``name``; :class:`InvalidArgumentError` (``unknown_scorer``) if none."""
        self._discover()
        found = self._scorers.get(name)
        if found is None:
            raise InvalidArgumentError(
                f"no scorer named {name!r}; known: {', '.join(self.names())}",
                code="unknown_scorer",
                field="scorer",
            )
        return found

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        self._discover()
        return tuple(sorted(self._scorers))

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests register scorers of their own)."""
        with self._lock:
            self._scorers.pop(name, None)


scorers = ScorerRegistry()
"""The scorers ``manage.py evaluate --scorer NAME`` can name."""


def scorer(
    func: Scorer | None = None, *, name: str | None = None
) -> Scorer | Callable[[Scorer], Scorer]:
    """Register a function as a scorer (``@scorer`` or ``@scorer(name="...")``)."""

    def decorate(function: Scorer) -> Scorer:
        return scorers.register(name or function.__name__, function)

    return decorate if func is None else decorate(func)


def autodiscover_scorers() -> None:
    """Import the ``llm_scorers`` module of every installed app (its ``@scorer``\\ s run)."""
    autodiscover_modules(SCORERS_MODULE)


# The built-in scorers -----------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@scorer
def exact_match(scoring: Scoring) -> ScoreValue:
    """The answer equals ``expected`` (surrounding whitespace aside)."""
    expected = scoring.example.get("expected")
    if expected is None:
        return None
    return scoring.answer.strip() == _text(expected).strip()


@scorer
def contains(scoring: Scoring) -> ScoreValue:
    """The answer contains each of ``contains`` (a string or a list), ignoring case."""
    wanted = scoring.example.get("contains")
    if wanted is None:
        return None
    needles = [wanted] if isinstance(wanted, str) else [str(item) for item in wanted]
    answer = scoring.answer.casefold()
    return all(needle.casefold() in answer for needle in needles)


@scorer
def json_schema(scoring: Scoring) -> ScoreValue:
    """The answer (or the run's structured output) is JSON valid against ``schema``."""
    schema = scoring.example.get("schema")
    if not isinstance(schema, Mapping):
        return None
    if scoring.run.output_schema_id is not None and scoring.run.output is not None:
        value = scoring.run.output
    else:
        try:
            value = json.loads(scoring.answer)
        except ValueError:
            return False
    validator = jsonschema.validators.validator_for(schema)(schema)
    return validator.is_valid(value)


def _subset(wanted: Any, given: Any) -> bool:
    if isinstance(wanted, Mapping):
        return isinstance(given, Mapping) and all(
            key in given and _subset(value, given[key]) for key, value in wanted.items()
        )
    return bool(wanted == given)


@scorer
def tool_called(scoring: Scoring) -> ScoreValue:
    """The run called ``tool.name`` with arguments that include ``tool.arguments``."""
    wanted = scoring.example.get("tool")
    if isinstance(wanted, str):
        wanted = {"name": wanted}
    if not isinstance(wanted, Mapping) or not isinstance(wanted.get("name"), str):
        return None
    arguments = wanted.get("arguments") or {}
    return any(
        call.name == wanted["name"] and _subset(arguments, dict(call.arguments))
        for call in scoring.tool_calls
    )
