"""The Vercel AI SDK's ``useChat``: its default transport's request, and the history as UI messages.

``POST /conversations/{id}/chat/`` takes the body ``DefaultChatTransport``
sends (``{id, messages, trigger, messageId?}``): the last of ``messages`` is
the new user message (its text parts joined, its ``file`` parts stored as
attachments: see ``files``); the earlier ones are ignored,
the stored history is what the model reads. It starts a run exactly like the
messages endpoint (same checks, limits and errors) and answers with the UI
message stream (``ai_sdk_stream``). ``GET`` returns the stored history as
``UIMessage`` values to initialise ``useChat`` with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.db import transaction
from django.http import Http404, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import events, selectors
from conversations.conf import app_settings
from conversations.exceptions import ExecutorUnavailable
from conversations.models import Attachment, Conversation, Message, OutputSchema, Run, ToolCall
from conversations.services import submit_message

from ..base import ConversationsAPIView
from ..errors import APIError, blame_configuration, error_item, json_pointer
from ..resources.messages import run_answer
from ..resources.outputs import requested_schema
from ..responses import AUTH_ERRORS, ERR_400_LIST, ERR_404, ERR_409, error_response
from ..schema import NamedChoiceField, document
from ..serializers import MessageInputSerializer
from ..sse.slots import acquire_stream_slot, release_stream_slot, releasing, releasing_async
from ..throttling import MessageRateThrottle
from .chunks import HEADERS, run_message_id, source_urls, thinking_texts
from .files import SentFile, file_parts, history_file_parts, store_sent_files
from .history import HISTORY_PAGE_LINK, HistoryQuerySerializer, history_page
from .stream import ChatStream

__all__ = ["ChatView", "chat_content", "chat_request", "start_chat_run", "ui_messages"]

_ROLES = ("system", "user", "assistant")


# The request -------------------------------------------------------------------------------


class UIMessageSerializer(serializers.Serializer[Any]):
    """An AI SDK ``UIMessage``."""

    id = serializers.CharField(
        help_text="The stored message's id; an assistant message showing a run is `run-<run id>`."
    )
    role = NamedChoiceField(component_name="UIMessageRole", choices=_ROLES)
    parts = serializers.ListField(
        child=serializers.DictField(),
        help_text="`text`, `file` (`mediaType`, `filename`, `url`: a `data:` URL in a "
        "request, the attachment's content URL in the history), `reasoning`, `step-start` "
        "and `tool-<name>` parts (`toolCallId`, `state`, `input`, `output` or `errorText`).",
    )
    metadata = serializers.DictField(
        required=False,
        help_text="`runId`, `messageIds` (the stored messages shown) and, on assistant "
        "messages, `runStatus`, `position` (the last answer's, which the feedback endpoint "
        "takes) and `toolCalls` (each `toolCallId`'s `pk`).",
    )


class ChatRequestSerializer(serializers.Serializer[Any]):
    """The body the AI SDK's ``DefaultChatTransport`` sends for ``useChat``."""

    id = serializers.CharField(required=False, help_text="The chat's id (not used).")
    messages = UIMessageSerializer(
        many=True,
        help_text="The chat's messages; only the last one, the new user message, is read.",
    )
    trigger = NamedChoiceField(
        component_name="ChatTrigger",
        choices=("submit-message", "regenerate-message"),
        required=False,
        help_text="Only `submit-message`: regenerate and edit through the branch endpoints.",
    )
    messageId = serializers.CharField(  # the SDK's name
        required=False, allow_null=True, help_text="Must be absent or null (no edits here)."
    )


def _invalid(path: Sequence[str | int], detail: str, code: str = "invalid") -> APIError:
    pointer = json_pointer(path)
    return APIError(detail, code=code, errors=[error_item(code, detail, pointer=pointer)])


def _check_messages(messages: Any) -> list[Mapping[str, Any]]:
    if messages is None:
        raise _invalid(["messages"], "This field is required.", "required")
    if not isinstance(messages, list) or not messages:
        raise _invalid(["messages"], "Must be a non-empty list of UI messages.")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise _invalid(["messages", index], "Must be an object (a UI message).")
        if message.get("role") not in _ROLES:
            raise _invalid(["messages", index, "role"], f"Must be one of {', '.join(_ROLES)}.")
        if not isinstance(message.get("parts"), list):
            raise _invalid(["messages", index, "parts"], "Must be a list of message parts.")
    return messages


def chat_content(data: Any) -> str:
    """The new user message's text from a ``useChat`` request body (see :func:`chat_request`)."""
    return chat_request(data)[0]


def chat_request(data: Any) -> tuple[str, list[SentFile]]:
    """The new user message's text and files from a ``useChat`` request body.

    A 400 names the bad field; a file part that is not a ``data:`` URL is
    refused, never fetched. The text may be empty when there is a file.
    """
    if not isinstance(data, Mapping):
        raise _invalid([], "The body must be a JSON object: the request useChat sends.")
    if data.get("id") is not None and not isinstance(data["id"], str):
        raise _invalid(["id"], "Must be a string.")
    trigger = data.get("trigger", "submit-message")
    if trigger == "regenerate-message":
        raise _invalid(
            ["trigger"],
            "Regenerating is not done here: POST .../regenerate/ answers again in a new branch.",
            "unsupported_trigger",
        )
    if trigger != "submit-message":
        raise _invalid(["trigger"], 'Must be "submit-message".')
    if data.get("messageId") is not None:
        raise _invalid(
            ["messageId"],
            "Replacing a message is not done here: POST .../messages/{position}/edit/ "
            "edits it in a new branch.",
            "unsupported_message_id",
        )
    messages = _check_messages(data.get("messages"))
    last = len(messages) - 1
    if messages[last]["role"] != "user":
        raise _invalid(["messages", last, "role"], "The last message must be the new user message.")
    texts = []
    for index, part in enumerate(messages[last]["parts"]):
        path: list[str | int] = ["messages", last, "parts", index]
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(kind, str):
            raise _invalid([*path, "type"], "Each part must be an object with a type.")
        if kind == "file":
            continue  # read below
        if kind != "text":
            raise _invalid(
                [*path, "type"],
                f'Parts of type "{kind}" are not supported: send text and file parts.',
            )
        if not isinstance(part.get("text"), str):
            raise _invalid([*path, "text"], "Must be a string.")
        texts.append(part["text"])
    content = "\n".join(texts)
    files = file_parts(messages[last]["parts"], last=last)
    if files and not content:
        return content, files
    serializer = MessageInputSerializer(data={"content": content})
    try:
        serializer.is_valid(raise_exception=True)
    except APIError as exc:  # too large: the same answer, located in this body
        pointer = json_pointer(["messages", last, "parts"])
        exc.errors = [{**item, "pointer": pointer} for item in exc.errors]
        raise
    except exceptions.ValidationError as exc:
        found: Any = exc.detail.get("content") if isinstance(exc.detail, dict) else None
        detail = str(found[0]) if isinstance(found, list) and found else "It is not valid."
        raise _invalid(["messages", last, "parts"], f"The new message's text: {detail}") from None
    return str(serializer.validated_data["content"]), files


# Starting the run ---------------------------------------------------------------------------


def start_chat_run(
    *,
    conversation: Conversation,
    content: str,
    output_schema: OutputSchema | None = None,
    attachments: Sequence[Attachment] = (),
) -> tuple[Run, events.Subscription]:
    """Store the user message, start its run and subscribe to it; the run goes on without us.

    The run is started as the messages endpoint starts it with a stream (in a
    thread of this process with the ``inline`` executor, queued for a worker
    with ``celery``), inside a transaction that also opens the subscription:
    the thread starts, or the worker hears of the run, only once that commits,
    so no delta is published before someone listens. Configuration errors and
    a busy conversation raise before anything is stored, as there.
    """
    subscription = None
    try:
        with transaction.atomic():
            run = submit_message(
                conversation=conversation,
                content=content,
                background=True,
                output_schema=output_schema,
                attachments=attachments,
            )
            subscription = events.subscribe(run.pk)
    except BaseException:
        if subscription is not None:
            subscription.close()
        raise
    return run, subscription


# The history as UI messages ------------------------------------------------------------------


def _tool_part(call: ToolCall) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": f"tool-{call.name}",
        "toolCallId": call.call_id,
        "state": "input-available",
        "input": call.arguments,
    }
    if call.status == ToolCall.Status.AWAITING_APPROVAL:
        part["state"] = "approval-requested"
        part["approval"] = {"id": str(call.approval.pk)}
    return part


def ui_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Stored messages as ``UIMessage`` values, the way ``useChat`` holds a conversation.

    User and system messages are one each, a ``file`` part per attachment
    after the text. The assistant and tool messages after them form one
    assistant message per run (one ``step-start`` per model call), each
    result folded into its call's tool part, the files a tool returned as
    ``file`` parts after it.
    """
    result: list[dict[str, Any]] = []
    group: dict[str, Any] | None = None
    tool_parts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    steps = 0
    for message in messages:
        if message.role in (Message.Role.USER, Message.Role.SYSTEM):
            group = None
            files = history_file_parts(message)
            text_part = [{"type": "text", "text": message.content}]
            result.append(
                {
                    "id": str(message.pk),
                    "role": message.role,
                    "parts": (text_part if message.content or not files else []) + files,
                    "metadata": {
                        "runId": str(message.run_id) if message.run_id else None,
                        "messageIds": [message.pk],
                    },
                }
            )
        elif message.role == Message.Role.ASSISTANT:
            run_id = message.run_id
            if group is None or group["metadata"]["runId"] != (str(run_id) if run_id else None):
                group = {
                    "id": run_message_id(run_id) if run_id else str(message.pk),
                    "role": "assistant",
                    "parts": [],
                    "metadata": {
                        "runId": str(run_id) if run_id else None,
                        "runStatus": message.run.status if message.run else None,
                        "messageIds": [],
                        "position": message.position,
                        "toolCalls": {},
                    },
                }
                result.append(group)
                steps = 0
            steps += 1
            group["metadata"]["messageIds"].append(message.pk)
            group["metadata"]["position"] = message.position
            parts = group["parts"]
            parts.append({"type": "step-start"})
            for number, text in enumerate(thinking_texts(message)):
                part_id = f"reasoning-{steps}" + (f"-{number}" if number else "")
                parts.append({"type": "reasoning", "id": part_id, "text": text, "state": "done"})
            if message.content:
                parts.append({"type": "text", "text": message.content, "state": "done"})
            parts += source_urls(message)
            for call in message.tool_calls.all():
                part = _tool_part(call)
                parts.append(part)
                group["metadata"]["toolCalls"][call.call_id] = call.pk
                tool_parts[call.call_id] = (part, group)
        elif message.tool_call is not None and message.tool_call.call_id in tool_parts:
            part, owner = tool_parts[message.tool_call.call_id]
            part.pop("approval", None)
            if message.is_error:
                part.update(state="output-error", errorText=message.content)
            else:
                part.update(state="output-available", output=message.content)
            # The files a tool returned follow its part (the content URL, never the bytes).
            owner["parts"].extend(history_file_parts(message))
            owner["metadata"]["messageIds"].append(message.pk)
    return result


# The view ------------------------------------------------------------------------------------


class ChatView(ConversationsAPIView):
    """``useChat``'s endpoint: post the next message, get the history."""

    def get_throttles(self) -> list[Any]:
        if self.request.method == "POST":
            return [*super().get_throttles(), MessageRateThrottle()]
        return super().get_throttles()

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Whatever the client accepts, errors are JSON and the answer is the stream.
        return super().perform_content_negotiation(request, force=True)

    @document(
        operation_id="conversations_chat_history",
        summary="The history as AI SDK UI messages",
        description=(
            "The stored history as `UIMessage` values for `useChat({messages})`: user and "
            "system messages one each; each run's assistant turns and tool results as one "
            "assistant message `run-<run id>`, a `step-start` part per model call, every "
            "result folded into its call's `tool-<name>` part. A page holds the newest "
            "`page_size` turns (a user or system message and the answer after it), oldest "
            'first; the `Link` header has the URL of the older turns (`rel="next"`) and of '
            'the newer ones (`rel="prev"`). See docs/ai-sdk.md.'
        ),
        parameters=[HistoryQuerySerializer, HISTORY_PAGE_LINK],
        responses={
            200: UIMessageSerializer(many=True),
            400: ERR_400_LIST,
            404: ERR_404,
            **AUTH_ERRORS,
        },
        tags=["messages"],
    )
    def get(self, request: Request, conversation_id: Any) -> Response:
        conversation = self.get_conversation(conversation_id)
        rows, headers = history_page(request=request, view=self, conversation=conversation)
        return Response(ui_messages(rows), headers=headers)

    @document(
        operation_id="conversations_chat",
        summary="Send useChat's request; answer with the UI message stream",
        description=(
            "Takes the body of the AI SDK's `DefaultChatTransport` and reads only the last "
            "message (the new user message: its text parts, joined by newlines, and its "
            "`file` parts, `data:` URLs only, stored as your attachments). Starts a "
            "run exactly like `POST .../messages/` (same limits and errors) and answers 200 "
            "with the UI message stream (`x-vercel-ai-ui-message-stream: v1`): `data:` "
            "lines with the chunks `start`, `start-step`, `text-*`, `reasoning-*`, "
            "`tool-input-*`, `tool-output-available`/`-error`, `finish-step`, `error`, "
            "`finish`, then `data: [DONE]`. The run goes on if the client hangs up. "
            "See docs/ai-sdk.md."
        ),
        request=ChatRequestSerializer,
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The UI message stream of the run."
            ),
            400: error_response(
                "The body is not useChat's request (`invalid`, `required`, "
                "`unsupported_trigger`, `unsupported_message_id`, `unsupported_file_url` for "
                "a file that is not a `data:` URL, `too_many_attachments`; located by `pointer`)."
            ),
            **AUTH_ERRORS,
            404: ERR_404,
            409: ERR_409,
            413: error_response(
                "The new message or a file is larger than allowed (`content_too_large`, "
                "`attachment_too_large`)."
            ),
            415: error_response("A file's type is not accepted (`unsupported_media_type`)."),
            429: error_response(
                "Too many messages (`throttled`), event streams (`too_many_streams`) or "
                "running runs (`too_many_runs`), or a blocking budget is used up "
                "(`budget_exceeded`)."
            ),
            503: error_response(
                "The profile is unusable (`configuration_error`, ...) or the task queue "
                "refused the run (`executor_unavailable`)."
            ),
        },
        tags=["messages"],
    )
    def post(self, request: Request, conversation_id: Any) -> HttpResponseBase:
        conversation = self.get_conversation(conversation_id)
        content, files = chat_request(request.data)
        body = request.data if isinstance(request.data, dict) else {}
        schema = requested_schema(request, body.get("output_schema"))
        slot = acquire_stream_slot(user_id=request.user.pk, lifetime=ChatStream.max_seconds)
        if slot is None:
            limit = app_settings().MAX_STREAMS_PER_USER
            raise APIError(
                f"At most {limit} event streams may be open at once; close one first.",
                code="too_many_streams",
                status_code=429,
            )
        try:
            # Stored first (outside the run's transaction): a run that cannot start
            # leaves unreferenced rows that purge_attachments removes, never
            # stored objects without a row.
            attachments = store_sent_files(owner=request.user, files=files)
            with blame_configuration():
                run, subscription = start_chat_run(
                    conversation=conversation,
                    content=content,
                    output_schema=schema,
                    attachments=attachments,
                )
        except BaseException:
            release_stream_slot(slot)
            raise
        if run.error_code == ExecutorUnavailable.code:  # the task queue refused it
            subscription.close()
            release_stream_slot(slot)
            try:
                return run_answer(request, selectors.run_with_calls(run_id=run.pk), queued=True)
            except Run.DoesNotExist:
                raise Http404 from None
        stream = ChatStream(run, subscription)
        content_iter: Any = (
            releasing_async(stream.iter_async(), slot)
            if isinstance(request._request, ASGIRequest)
            else releasing(stream.iter_sync(), slot)
        )
        response = StreamingHttpResponse(content_iter, content_type="text/event-stream")
        for name, value in HEADERS.items():
            response[name] = value
        return response
