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
import json
import logging
import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import httpx

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    StreamEvent,
    ToolSpec,
)
from conversations.exceptions import (
    ContextTooLarge,
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderTimeout,
)

from .boundary import check_response
from .context_errors import is_context_length_error
from .conversion import (
    arguments_object,
    assign_call_ids,
    fresh_call_id,
    join_system_messages,
    known_call_ids,
    stable_alias,
    token_count,
)
from .options import SAMPLING_PARAMETERS, TOOL_CHOICE_KEYWORDS, CompletionOptions
from .provider_tools import require_provider_tools
from .stream_deadline import DEFAULT_MAX_STREAM_SECONDS
from .streaming import StreamParser, stream_http

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_STREAM_SECONDS",
    "SAMPLING_PARAMETERS",
    "TOOL_CHOICE_KEYWORDS",
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

MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 120.0
ERROR_BODY_LIMIT = 500
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024


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

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        """Like :meth:`complete`, as deltas followed, last and exactly once, by the response.

        The tool loop also accepts a provider without this method: it then
        asks :meth:`complete` and relays the whole answer at once.
        """
        ...


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
    provider_tool_kinds: ClassVar[frozenset[str]] = frozenset()
    """The tools the provider runs itself that this adapter can offer (see
    :mod:`conversations.providers.provider_tools`); a request for another is refused."""

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
        max_stream_seconds: float = DEFAULT_MAX_STREAM_SECONDS,
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
        if (
            isinstance(max_stream_seconds, bool)
            or not isinstance(max_stream_seconds, int | float)
            or not 0 < max_stream_seconds < float("inf")
        ):
            raise InvalidArgumentError(
                "max_stream_seconds must be a positive number",
                code="invalid_max_stream_seconds",
                field="max_stream_seconds",
            )
        self.max_stream_seconds = float(max_stream_seconds)
        """The longest a streamed answer may last, however much it sends."""
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

    stream_format: ClassVar[Literal["sse", "ndjson"]] = "sse"
    """How the vendor frames a streamed answer."""

    def build_stream_payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: CompletionOptions,
    ) -> dict[str, Any]:
        """The JSON body asking for a streamed answer (pure): by default the whole
        request's body with ``"stream": true``."""
        return {**self.build_payload(messages, tools, options), "stream": True}

    def _stream_url(self, options: CompletionOptions) -> str:
        return self._url(options)

    def stream_parser(
        self, *, known_ids: Collection[str] = (), tools: Sequence[ToolSpec] = ()
    ) -> StreamParser:
        """A fresh parser for one streamed answer (``known_ids``/``tools`` as in ``parse_response``)."""
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
        require_provider_tools(self.provider_name, self.provider_tool_kinds, options.provider_tools)
        payload = self.build_payload(messages, tools, options)
        return self._answer(self._url(options), payload, known_call_ids(messages), tools)

    def _answer(
        self, url: str, payload: dict[str, Any], known: Collection[str], tools: Sequence[ToolSpec]
    ) -> CompletionResponse:
        """The checked answer to a built body; :meth:`_streamed` streams it (both overridable)."""
        body = self._post(url, payload)
        try:
            response = self.parse_response(body, known_ids=known, tools=tools)
        except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
            raise ProviderResponseError(
                f"{self.provider_name}: could not understand the response ({type(exc).__name__})"
            ) from None
        return check_response(response, provider=self.provider_name)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions,
    ) -> Iterator[StreamEvent]:
        """Ask for a streamed answer; see :mod:`conversations.providers.streaming`."""
        require_provider_tools(self.provider_name, self.provider_tool_kinds, options.provider_tools)
        payload = self.build_stream_payload(messages, tools, options)
        return self._streamed(self._stream_url(options), payload, known_call_ids(messages), tools)

    def _streamed(
        self, url: str, payload: dict[str, Any], known: Collection[str], tools: Sequence[ToolSpec]
    ) -> Iterator[StreamEvent]:
        return stream_http(
            self,
            url=url,
            payload=payload,
            parser=lambda: self.stream_parser(known_ids=known, tools=tools),
            wire=self.stream_format,
            whole=lambda body: self.parse_response(body, known_ids=known, tools=tools),
        )

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
            self._refuse(status, headers, data, attempt=attempt, last=last, deadline=deadline)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _refuse(
        self,
        status: int,
        headers: httpx.Headers,
        data: bytes,
        *,
        attempt: int,
        last: bool,
        deadline: float,
    ) -> None:
        """Handle a non-2xx answer: return after waiting when it is worth another attempt, else raise."""
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
            return
        if (
            status >= 500
            and not last
            and self._wait(attempt, retry_after, f"HTTP {status}", deadline)
        ):
            return
        body = self._redact(text)
        if is_context_length_error(self.provider_name, status, text):
            raise ContextTooLarge(
                f"{self.provider_name}: the request is longer than the model's context window "
                f"(HTTP {status}): {body}",
                status_code=status,
            )
        raise ProviderHTTPError(
            f"{self.provider_name}: HTTP {status}: {body}", status_code=status, body=body
        )

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
