"""The registry of tools, the ``@tool`` decorator and discovery of installed apps' tools."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, overload

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from conversations.domain import ToolSpec

from .base import Tool

__all__ = ["TOOLS_MODULE", "ToolRegistry", "autodiscover", "registry", "tool"]

TOOLS_MODULE = "llm_tools"
"""The module of an installed app that :func:`autodiscover` imports."""

F = TypeVar("F", bound=Callable[..., Any])


def _same_function(a: Tool, b: Tool) -> bool:
    """Whether two registrations come from one function (a re-import, not a clash)."""
    if a.func is b.func:
        return True
    # Nested functions and lambdas share a qualname without being the same
    # code, so for them only identity counts.
    ambiguous = "<locals>" in a.origin or "<lambda>" in a.origin
    return not ambiguous and a.origin == b.origin


class ToolRegistry:
    """Tools by name, in registration order.

    The app uses the module-level :data:`registry`; separate instances are for
    tests and for hosts that want to assemble a tool set by hand.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        # Registration normally happens during imports (serialised by the
        # import lock), but a host may register from a thread of its own.
        self._lock = threading.RLock()
        for item in tools:
            self.register(item)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``; registering the same function again replaces it in place.

        Raises :class:`~django.core.exceptions.ImproperlyConfigured` naming both
        functions when a different function already holds the name: silently
        letting one win would make the model call code nobody chose.
        """
        with self._lock:
            existing = self._tools.get(tool.name)
            if existing is not None and not _same_function(existing, tool):
                raise ImproperlyConfigured(
                    f'Two tools are named "{tool.name}": {existing.origin} and {tool.origin}. '
                    "Tool names must be unique across installed apps; rename one with "
                    '@tool(name="...").'
                )
            self._tools[tool.name] = tool
            return tool

    def unregister(self, name: str) -> None:
        """Remove a tool; :class:`KeyError` if there is none by that name."""
        with self._lock:
            del self._tools[name]

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> tuple[str, ...]:
        """Every tool name, in registration order."""
        return tuple(self._tools)

    def all(self) -> tuple[Tool, ...]:
        """Every tool, in registration order."""
        return tuple(self._tools.values())

    def specs(self, names: Iterable[str] | None = None) -> tuple[ToolSpec, ...]:
        """Specs to offer a model: all, or those in ``names`` (unknown names are skipped).

        Registration order either way, so the same tool set always produces the
        same request (which keeps provider-side prompt caches warm).
        """
        if names is None:
            return tuple(t.spec for t in self._tools.values())
        wanted = set(names)
        return tuple(t.spec for t in self._tools.values() if t.name in wanted)

    @contextmanager
    def isolated(self, *, empty: bool = False) -> Iterator[ToolRegistry]:
        """Undo every change made inside the block; start from nothing if ``empty``.

        For tests::

            @pytest.fixture
            def tools():
                with registry.isolated(empty=True) as r:
                    yield r
        """
        with self._lock:
            saved = dict(self._tools)
            if empty:
                self._tools = {}
        try:
            yield self
        finally:
            with self._lock:
                self._tools = saved

    def __repr__(self) -> str:
        return f"<ToolRegistry {list(self._tools)}>"


registry = ToolRegistry()
"""The tools the app offers: filled by :func:`autodiscover` at startup."""

_default_registry = registry  # ``tool()`` has a parameter named ``registry``


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    requires_approval: bool | str = False,
    concurrent: bool = True,
    timeout: float | None = None,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    requires_approval: bool | str = False,
    concurrent: bool = True,
    timeout: float | None = None,
) -> F | Callable[[F], F]:
    """Register a typed function as a tool; use as ``@tool`` or ``@tool(...)``.

    ``name`` defaults to the function's name, ``description`` to its
    docstring's prose, ``parameters`` to a JSON Schema derived from its type
    hints (see :mod:`conversations.tools.schema`); ``registry`` to the app's.
    ``requires_approval`` makes every call wait for a human decision: ``True``
    (the conversation's owner decides) or ``"staff"`` (only a holder of the
    ``conversations.approve_toolcall`` permission, never the owner).
    ``concurrent=False`` runs each call alone, after the other calls of its
    turn; ``timeout`` bounds a call in seconds (default: the
    ``TOOL_TIMEOUT_SECONDS`` setting). An ``async def`` function is awaited.
    The function is returned unchanged, so it stays callable as plain Python.
    """
    target = _default_registry if registry is None else registry

    def decorate(function: F) -> F:
        target.register(
            Tool.from_function(
                function,
                name=name,
                description=description,
                parameters=parameters,
                requires_approval=requires_approval,
                concurrent=concurrent,
                timeout=timeout,
            )
        )
        return function

    if func is None:
        return decorate
    if not callable(func):
        raise TypeError(f"@tool expects a function, got {func!r}; did you mean @tool(name=...)?")
    return decorate(func)


def autodiscover() -> None:
    """Import the ``llm_tools`` module of every installed app, as the admin does ``admin``.

    Importing runs the ``@tool`` decorators, so an app contributes tools just by
    being installed. An app without the module is skipped; an error inside an
    existing module propagates (a broken tool should stop startup, loudly).
    """
    autodiscover_modules(TOOLS_MODULE)
