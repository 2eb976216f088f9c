"""A tool: a Python callable together with the name, description and schema the model sees."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from conversations.domain import TOOL_NAME_PATTERN, ToolSpec
from conversations.exceptions import InvalidArgumentError

from .schema import (
    Converter,
    FunctionShape,
    derive_converters,
    derive_parameters,
    describe_function,
    inspect_function,
    is_async_callable,
)

__all__ = ["Tool", "checked_spec"]


def checked_spec(name: str, description: str, parameters: Any, *, label: str) -> ToolSpec:
    """The spec a model is shown for a tool, its parameters checked to be a JSON Schema.

    :class:`ToolSpec` normalises (type "object", properties {}) and deep-copies,
    so the schema calls are validated with is exactly the one the model is
    shown. ``label`` names the kind of tool in the error ("tool", "MCP tool").
    Raises ``InvalidArgumentError`` (``invalid_tool_spec``, field ``parameters``).
    """
    spec = ToolSpec(name=name, description=description, parameters=parameters)
    try:
        Draft202012Validator.check_schema(spec.parameters)
    except SchemaError as exc:
        raise InvalidArgumentError(
            f"{label} {name!r}: parameters are not a valid JSON Schema: {exc.message}",
            code="invalid_tool_spec",
            field="parameters",
        ) from None
    return spec


@dataclass(frozen=True, slots=True, eq=False)
class Tool:
    """A callable the model may ask for, with everything needed to offer and call it.

    Build one with :meth:`from_function` (or the ``@tool`` decorator) to derive
    the description and schema; the constructor takes them as given and checks
    that they fit the function. Tools compare by identity.
    """

    name: str
    """Unique across installed apps; matches ``^[a-zA-Z0-9_-]{1,64}$``."""
    description: str
    """What the model is told the tool does."""
    parameters: Mapping[str, Any]
    """A JSON Schema (Draft 2020-12) of type ``object``: the arguments the model passes."""
    func: Callable[..., Any]
    """The function called with the (validated, converted) arguments as keywords."""
    requires_approval: bool | str = False
    """Whether a human decides each call first: ``True`` (the conversation's owner),
    ``"staff"`` (a holder of ``conversations.approve_toolcall``) or ``False``."""
    concurrent: bool = True
    """Whether its calls may run alongside the other calls of a turn; ``False``: each
    call runs alone, after the turn's concurrent calls."""
    timeout: float | None = None
    """Seconds a call may take before it is answered as timed out (``None``: the
    ``TOOL_TIMEOUT_SECONDS`` setting)."""
    shape: FunctionShape = field(init=False, repr=False)
    """What the function's signature accepts (derived)."""
    converters: Mapping[str, Converter] = field(init=False, repr=False)
    """Per-parameter conversion of JSON values to hinted types, e.g. Enums (derived)."""
    validator: Draft202012Validator = field(init=False, repr=False)
    """The compiled validator of :attr:`parameters` (derived)."""
    _spec: ToolSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shape = inspect_function(self.func)
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.fullmatch(self.name):
            raise InvalidArgumentError(
                f"tool name {self.name!r} (of {shape.qualified_name}) must match "
                f"{TOOL_NAME_PATTERN.pattern}: letters, digits, _ and -, at most 64",
                code="invalid_tool_name",
                field="name",
            )
        if self.requires_approval not in (True, False, "staff"):
            raise InvalidArgumentError(
                f'tool {self.name!r}: requires_approval must be True, False or "staff", '
                f"not {self.requires_approval!r}",
                code="invalid_tool_spec",
                field="requires_approval",
            )
        if not isinstance(self.concurrent, bool):
            raise InvalidArgumentError(
                f"tool {self.name!r}: concurrent must be True or False, not {self.concurrent!r}",
                code="invalid_tool_spec",
                field="concurrent",
            )
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise InvalidArgumentError(
                f"tool {self.name!r}: timeout must be a positive number of seconds or None, "
                f"not {timeout!r}",
                code="invalid_tool_spec",
                field="timeout",
            )
        if not isinstance(self.description, str):
            raise InvalidArgumentError(
                f"tool {self.name!r}: description must be a string",
                code="invalid_tool_spec",
                field="description",
            )
        spec = checked_spec(self.name, self.description, self.parameters, label="tool")
        parameters = spec.parameters
        _check_fits_function(self.name, parameters, shape)
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "converters", derive_converters(shape))
        object.__setattr__(self, "validator", Draft202012Validator(parameters))
        object.__setattr__(self, "_spec", spec)

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        requires_approval: bool | str = False,
        concurrent: bool = True,
        timeout: float | None = None,
    ) -> Tool:
        """Build a tool from a typed function; any argument given overrides derivation.

        Raises :class:`TypeError` naming the parameter when a hint has no JSON
        Schema equivalent (and ``parameters`` is not given), and
        :class:`InvalidArgumentError` (code ``invalid_tool_name``) for a bad name.
        """
        if parameters is None:
            parameters = derive_parameters(inspect_function(func))
        return cls(
            name=getattr(func, "__name__", "") if name is None else name,
            description=describe_function(func) if description is None else description,
            parameters=parameters,
            func=func,
            requires_approval=requires_approval,
            concurrent=concurrent,
            timeout=timeout,
        )

    @property
    def spec(self) -> ToolSpec:
        """The tool as offered to a model."""
        return self._spec

    @property
    def origin(self) -> str:
        """``module.qualname`` of the function: how duplicates and logs name it."""
        return self.shape.qualified_name

    @property
    def is_async(self) -> bool:
        """True when calling the function returns an awaitable (an ``async def`` tool)."""
        return is_async_callable(self.func)

    @property
    def takes_context(self) -> bool:
        """True when the function has a ``ToolContext`` parameter."""
        return self.shape.context_parameter is not None


def _check_fits_function(name: str, parameters: Mapping[str, Any], shape: FunctionShape) -> None:
    """Refuse an explicit schema the function cannot honour, at startup, not per call."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return
    unknown = sorted(set(properties) - shape.accepted)
    if unknown:
        raise InvalidArgumentError(
            f"tool {name!r}: the schema offers {', '.join(map(repr, unknown))}, "
            f"which {shape.qualified_name} does not accept",
            code="invalid_tool_spec",
            field="parameters/properties",
        )
    missing = sorted(shape.required - set(properties))
    if missing:
        raise InvalidArgumentError(
            f"tool {name!r}: {shape.qualified_name} requires "
            f"{', '.join(map(repr, missing))}, which the schema does not offer",
            code="invalid_tool_spec",
            field="parameters/properties",
        )
