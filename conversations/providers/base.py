"""What every provider adapter shares: the protocol, options, HTTP and error mapping.

An adapter converts ``ChatMessage`` objects (through ``to_dict()``, the one
place the OpenAI wire shape is made) into its vendor's JSON body in a pure
``build_payload`` method, parses the vendor's answer in a pure
``parse_response`` method, and leaves the HTTP exchange to
:class:`HTTPProvider`, which owns retries, backoff and the mapping of
failures to :mod:`conversations.exceptions`. Tests hand an ``httpx.Client``
built on ``httpx.MockTransport``; nothing is monkeypatched.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import random
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import httpx

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    ToolCall,
    ToolSpec,
)
from conversations.domain.messages import decode_arguments
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderTimeout,
)

from .boundary import check_response

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "SAMPLING_PARAMETERS",
    "ChatProvider",
    "CompletionOptions",
    "HTTPProvider",
    "arguments_object",
    "assign_call_ids",
    "fresh_call_id",
    "join_system_messages",
    "redact",
    "stable_alias",
    "token_count",
]

logger = logging.getLogger("conversations.providers")

TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
SAMPLING_PARAMETERS: frozenset[str] = frozenset({"temperature"})
"""The sampling parameters ``CompletionOptions`` can carry, by the names a
``LanguageModel.sampling_parameters`` list uses."""
MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 120.0
ERROR_BODY_LIMIT = 500
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CompletionOptions:
    """How to ask: which model, sampling, and how tools may be used."""

    model: str
    """The provider's model id (for Azure: the deployment name)."""
    temperature: float | None = None
    """Sampling temperature; ``None`` leaves the provider's default."""
    max_tokens: int | None = None
    """Upper bound on output tokens; ``None`` leaves the default (Anthropic needs one: 4096)."""
    tool_choice: str | None = None
    """``"auto"``, ``"none"``, ``"required"``, or the name of the one tool to call."""
    parallel_tool_calls: bool | None = None
    """``False`` asks for at most one call per turn; ``None`` leaves the default."""
    stop: tuple[str, ...] = ()
    """Stop sequences."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific top-level keys merged into the request body last."""
    sampling_parameters: frozenset[str] | None = None
    """The sampling parameters the model accepts (names from :data:`SAMPLING_PARAMETERS`);
    ``None`` = the adapter's default. A parameter the model does not accept is not sent."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise InvalidArgumentError(
                "a model id is required", code="invalid_model", field="model"
            )
        if self.temperature is not None and (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, int | float)
            or self.temperature < 0
        ):
            raise InvalidArgumentError(
                f"temperature must be a number >= 0, got {self.temperature!r}",
                code="invalid_temperature",
                field="temperature",
            )
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise InvalidArgumentError(
                f"max_tokens must be a positive integer, got {self.max_tokens!r}",
                code="invalid_max_tokens",
                field="max_tokens",
            )
        if self.tool_choice is not None and (
            not isinstance(self.tool_choice, str) or not self.tool_choice
        ):
            raise InvalidArgumentError(
                "tool_choice must be auto, none, required or a tool name",
                code="invalid_tool_choice",
                field="tool_choice",
            )
        if self.sampling_parameters is not None:
            accepted = self.sampling_parameters
            if isinstance(accepted, str) or not all(isinstance(name, str) for name in accepted):
                raise InvalidArgumentError(
                    f"sampling_parameters must be a collection of names, got {accepted!r}",
                    code="invalid_sampling_parameters",
                    field="sampling_parameters",
                )
            unknown = sorted(set(accepted) - SAMPLING_PARAMETERS)
            if unknown:
                raise InvalidArgumentError(
                    f"sampling_parameters: unknown parameter(s) {', '.join(unknown)}; "
                    f"known: {', '.join(sorted(SAMPLING_PARAMETERS))}",
                    code="invalid_sampling_parameters",
                    field="sampling_parameters",
                )
            object.__setattr__(self, "sampling_parameters", frozenset(accepted))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "extra", dict(self.extra))

    @property
    def forced_tool(self) -> str | None:
        """The tool name when ``tool_choice`` names one tool, else ``None``."""
        if self.tool_choice is None or self.tool_choice in TOOL_CHOICE_KEYWORDS:
            return None
        return self.tool_choice


@runtime_checkable
class ChatProvider(Protocol):
    """Anything that can complete a conversation."""

    # Read-only, so a class attribute (the adapters' ClassVar) satisfies it too.
    @property
    def provider_name(self) -> str:
        """A short name of the provider (``openai``, ``ollama``, ...)."""
        ...

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        """Answer the conversation ``messages``, offering ``tools``."""
        ...


# Shared conversion helpers ---------------------------------------------------


def join_system_messages(messages: Iterable[ChatMessage]) -> str:
    """Every system message's text, in order, joined by a blank line (none dropped)."""
    return "\n\n".join(m.content for m in messages if m.role is Role.SYSTEM and m.content)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """Arguments for wires that need an object: raw (non-object) text becomes ``{}``."""
    wire = call.to_wire()["function"]["arguments"]
    decoded = decode_arguments(wire)
    return decoded if decoded is not None else {}


def fresh_call_id(prefix: str = "call_") -> str:
    """A new call id, unique for all practical purposes (122 random bits)."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def assign_call_ids(
    candidates: Sequence[tuple[str | None, str, Any]],
    *,
    known_ids: Collection[str] = (),
    provider: str,
) -> tuple[ToolCall, ...] | None:
    """Turn parsed ``(id, name, arguments)`` triples into tool calls.

    ``arguments`` may be an object, a JSON string, ``None`` or ``""``. A call
    without a name is dropped with a warning (it cannot be executed or
    answered); a missing id, or one already used in this response or in
    ``known_ids`` (the conversation so far), is replaced by a fresh one.
    Returns ``None`` when no call is left, never an empty tuple.
    """
    used = set(known_ids)
    calls: list[ToolCall] = []
    for position, (call_id, name, arguments) in enumerate(candidates):
        if not isinstance(name, str) or not name:
            logger.warning("%s response: dropped tool call #%d without a name", provider, position)
            continue
        if not isinstance(call_id, str) or not call_id or call_id in used:
            call_id = fresh_call_id()
        used.add(call_id)
        call = ToolCall.try_from_dict(
            {"id": call_id, "function": {"name": name, "arguments": arguments}}
        )
        if call is None:
            # Arguments of an unusable type (a list, a number): keep the text.
            raw = json.dumps(arguments, ensure_ascii=False)
            call = ToolCall(id=call_id, name=name, raw_arguments=raw)
        calls.append(call)
    return tuple(calls) if calls else None


def token_count(value: Any, name: str, *, provider: str = "") -> int:
    """A token counter from a response: missing is 0, anything but a count is an error."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        prefix = f"{provider}: " if provider else ""
        raise ProviderResponseError(f"{prefix}{name} is not a count: {value!r}")
    return value


def known_call_ids(messages: Iterable[ChatMessage]) -> frozenset[str]:
    """Every call id already used in ``messages``."""
    return frozenset(call.id for m in messages if m.tool_calls is not None for call in m.tool_calls)


def stable_alias(value: str, *, pattern: re.Pattern[str], length: int | None = None) -> str:
    """Rewrite an id for a provider with stricter id rules, deterministically.

    An id that already fits ``pattern`` (and ``length``) is kept. Otherwise the
    result is derived from a hash of the whole id, so a call and the result
    answering it always map to the same alias, and two different ids do not
    collide in practice.
    """
    if pattern.fullmatch(value) and (length is None or len(value) == length):
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()
    if length is not None:
        alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        number = int(digest, 16)
        chars = []
        for _ in range(length):
            number, rest = divmod(number, len(alphabet))
            chars.append(alphabet[rest])
        return "".join(chars)
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", value)[:40]
    return f"{cleaned}_{digest[:12]}"


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret replaced, cut to a short excerpt."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    if len(text) > ERROR_BODY_LIMIT:
        text = text[:ERROR_BODY_LIMIT] + "…"
    return text


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - time.time()
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))


# HTTP ------------------------------------------------------------------------


class _DeadlinePassed(Exception):
    """The whole exchange has run out of time (inside ``_post`` only)."""


class HTTPProvider:
    """Base class of the HTTP adapters: configuration, retries, error mapping.

    Subclasses set ``provider_name`` and ``default_base_url`` and implement
    ``build_payload``, ``parse_response``, ``_url`` and ``_auth_headers``.
    """

    provider_name: ClassVar[str] = "http"
    default_base_url: ClassVar[str] = ""
    requires_api_key: ClassVar[bool] = True
    default_sampling_parameters: ClassVar[frozenset[str]] = frozenset({"temperature"})
    """The sampling parameters sent when the model names none of its own
    (``CompletionOptions.sampling_parameters`` is ``None``)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        extra_headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if self.requires_api_key and not api_key:
            raise InvalidArgumentError(
                f"{self.provider_name}: an api_key is required", code="missing_api_key"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidArgumentError(
                "max_retries must be an integer >= 0", code="invalid_max_retries"
            )
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise InvalidArgumentError("timeout must be a positive number", code="invalid_timeout")
        self._api_key = api_key or None
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.extra_headers = dict(extra_headers or {})
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or max_response_bytes < 1
        ):
            raise InvalidArgumentError(
                "max_response_bytes must be a positive integer", code="invalid_max_response_bytes"
            )
        self.max_response_bytes = max_response_bytes
        self._client = http_client
        self._owns_client = http_client is None
        self._sleep = sleep

    def __repr__(self) -> str:
        # Never include the key.
        return f"<{type(self).__name__} {self.base_url}>"

    # To implement ------------------------------------------------------------

    def build_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The JSON request body (pure)."""
        raise NotImplementedError

    def parse_response(
        self,
        body: Mapping[str, Any],
        *,
        known_ids: Collection[str] = (),
        tools: Sequence[ToolSpec] = (),
    ) -> CompletionResponse:
        """The completion in a 2xx body (pure).

        ``known_ids`` are call ids already in use; ``tools`` are the tools the
        request offered (an adapter that renames tools on its wire maps calls
        back to the real names with them).
        """
        raise NotImplementedError

    def _url(self, options: CompletionOptions) -> str:
        raise NotImplementedError

    def _auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    # Shared --------------------------------------------------------------------

    @classmethod
    def sends(cls, parameter: str, options: CompletionOptions) -> bool:
        """Whether ``parameter`` (a sampling parameter) may go into the body for ``options``."""
        accepted = options.sampling_parameters
        return parameter in (cls.default_sampling_parameters if accepted is None else accepted)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> CompletionResponse:
        """Build the body, send it (with retries) and parse the answer."""
        payload = self.build_payload(messages, tools, options)
        body = self._post(self._url(options), payload)
        try:
            response = self.parse_response(body, known_ids=known_call_ids(messages), tools=tools)
        except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
            raise ProviderResponseError(
                f"{self.provider_name}: could not understand the response ({type(exc).__name__})"
            ) from None
        return check_response(response, provider=self.provider_name)

    def close(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        # Header names are case-insensitive: merged as typed, an extra
        # "Authorization" would travel beside the adapter's "authorization".
        headers.update({name.lower(): value for name, value in self.extra_headers.items()})
        headers.update({name.lower(): value for name, value in self._auth_headers().items()})
        return headers

    def _redact(self, text: str) -> str:
        return redact(text, [self._api_key])

    def _backoff(self, attempt: int) -> float:
        delay: float = min(MAX_BACKOFF_SECONDS, 0.5 * (2**attempt))
        return delay + random.uniform(0, delay / 4)  # jitter spreads synchronized retries

    def _post(self, url: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``payload``; retry 429, 5xx and connection errors; map failures.

        ``timeout`` is a deadline for the whole exchange, retries and waits
        included: a wait that would pass it ends the call at once.
        """
        deadline = time.monotonic() + self.timeout
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                status, headers, data = self._exchange(url, payload, deadline)
            except (httpx.TimeoutException, _DeadlinePassed):
                if last or not self._wait(attempt, None, "timeout", deadline):
                    raise ProviderTimeout(
                        f"{self.provider_name}: no answer within {self.timeout:g} s"
                    ) from None
                continue
            except httpx.TransportError as exc:
                if last or not self._wait(attempt, None, type(exc).__name__, deadline):
                    raise ProviderConnectionError(
                        f"{self.provider_name}: connection failed ({type(exc).__name__})"
                    ) from None
                continue
            if 200 <= status < 300:
                return self._decode(data)
            text = data.decode("utf-8", errors="replace")
            if status in (401, 403):
                raise ProviderAuthenticationError(
                    f"{self.provider_name}: authentication failed (HTTP {status}): "
                    f"{self._redact(text)}",
                    status_code=status,
                )
            retry_after = _retry_after_seconds(headers.get("retry-after"))
            if status == 429:
                if last or not self._wait(attempt, retry_after, "HTTP 429", deadline):
                    raise ProviderRateLimited(
                        f"{self.provider_name}: rate limited (HTTP 429)", retry_after=retry_after
                    )
                continue
            if (
                status >= 500
                and not last
                and self._wait(attempt, retry_after, f"HTTP {status}", deadline)
            ):
                continue
            body = self._redact(text)
            raise ProviderHTTPError(
                f"{self.provider_name}: HTTP {status}: {body}", status_code=status, body=body
            )
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _exchange(
        self, url: str, payload: Mapping[str, Any], deadline: float
    ) -> tuple[int, httpx.Headers, bytes]:
        """One request: status, headers and at most ``max_response_bytes`` of body.

        The body is read in chunks so that neither a slow trickle (each read
        well within the socket timeout) outlives the deadline nor a huge answer
        is held in memory.
        """
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _DeadlinePassed
        with self.client.stream(
            "POST", url, json=payload, headers=self._headers(), timeout=remaining
        ) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_response_bytes:
                raise self._too_big()
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise self._too_big()
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _DeadlinePassed
            return response.status_code, response.headers, b"".join(chunks)

    def _too_big(self) -> ProviderInvalidResponse:
        return ProviderInvalidResponse(
            f"{self.provider_name}: the answer is larger than {self.max_response_bytes} bytes"
        )

    def _wait(self, attempt: int, retry_after: float | None, reason: str, deadline: float) -> bool:
        """Sleep before the next attempt; ``False`` (no sleep) when that would pass the deadline."""
        delay = retry_after if retry_after is not None else self._backoff(attempt)
        if time.monotonic() + delay >= deadline:
            logger.warning(
                "%s: %s, and a retry in %.2f s would pass the %g s deadline",
                self.provider_name,
                reason,
                delay,
                self.timeout,
            )
            return False
        logger.warning(
            "%s: %s, retrying in %.2f s (attempt %d of %d)",
            self.provider_name,
            reason,
            delay,
            attempt + 2,
            self.max_retries + 1,
        )
        self._sleep(delay)
        return True

    def _decode(self, data: bytes) -> dict[str, Any]:
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            text = data[:800].decode("utf-8", errors="replace")
            raise ProviderResponseError(
                f"{self.provider_name}: the response is not JSON: {self._redact(text[:200])}"
            ) from None
        if not isinstance(body, dict):
            raise ProviderResponseError(
                f"{self.provider_name}: expected a JSON object, got {type(body).__name__}"
            )
        return body
