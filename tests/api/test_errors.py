"""The error handler and the status mapping, without HTTP."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions

from conversations import exceptions as app
from conversations.api.errors import (
    ERROR_STATUSES,
    APIError,
    exception_handler,
    json_pointer,
    status_for_code,
    status_for_exception,
)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (app.InvalidArgumentError("bad", code="invalid_role", field="0/role"), 400, "invalid_role"),
        (app.ConversationBusy("busy"), 409, "conversation_busy"),
        (app.RunCancelled("stop"), 409, "run_cancelled"),
        (app.ConfigurationError("no key"), 503, "configuration_error"),
        (app.ProviderTimeout("slow"), 504, "provider_timeout"),
        (app.ProviderConnectionError("down"), 503, "provider_unavailable"),
        (app.ProviderRateLimited("429"), 503, "provider_rate_limited"),
        (
            app.ProviderAuthenticationError("no", status_code=401),
            502,
            "provider_authentication_failed",
        ),
        (app.ProviderHTTPError("500", status_code=500), 502, "provider_http_error"),
        (app.ProviderResponseError("junk"), 502, "provider_bad_response"),
        (app.ProviderError("other"), 502, "provider_error"),
    ],
)
def test_each_app_error_has_its_status_and_code(exc, status, code):
    response = exception_handler(exc, {})
    assert response.status_code == status
    assert response.data["code"] == code
    # A located problem is named by its place; every message starts with a capital letter.
    place = f'Field "{exc.field}": ' if getattr(exc, "field", None) else ""
    assert response.data["detail"] == place + exc.detail[0].upper() + exc.detail[1:]
    assert status_for_exception(exc) == status
    # A run that stored the class's code answers exactly like the exception.
    assert status_for_code(type(exc).code) == status


def test_unknown_codes_and_unmapped_errors_are_left_alone():
    assert status_for_code("no_such_code") is None
    assert status_for_code("") is None
    assert exception_handler(app.ConversationsError("base"), {}) is None
    assert exception_handler(RuntimeError("boom"), {}) is None
    assert exception_handler(KeyError("x"), {}) is None


def test_every_mapped_status_is_a_client_or_gateway_error():
    assert all(400 <= status < 600 and status != 500 for _, status in ERROR_STATUSES)


def test_invalid_argument_points_into_the_body():
    exc = app.InvalidArgumentError(
        "x", code="empty_tool_name", field="messages/1/tool_calls/0/function/name"
    )
    assert exception_handler(exc, {}).data["errors"] == [
        {
            "pointer": "/messages/1/tool_calls/0/function/name",
            "parameter": None,
            "code": "empty_tool_name",
            "detail": "X",
        }
    ]
    # Without a field there is nothing in the request to point at.
    unplaced = exception_handler(app.InvalidArgumentError("y", code="c"), {})
    assert unplaced.status_code == 400 and unplaced.data["errors"] == []


def test_rate_limits_pass_on_retry_after():
    response = exception_handler(app.ProviderRateLimited("429", retry_after=7.5), {})
    assert response["Retry-After"] == "7"


def test_nested_validation_errors_become_pointers():
    exc = exceptions.ValidationError(
        {
            "title": [exceptions.ErrorDetail("Too long.", code="max_length")],
            "items": {2: {"name": [exceptions.ErrorDetail("Required.", code="required")]}},
            "rows": [{}, {"x": [exceptions.ErrorDetail("Bad.", code="invalid")]}],
            "non_field_errors": [exceptions.ErrorDetail("Whole.", code="whole")],
        }
    )
    data = exception_handler(exc, {}).data
    assert data["code"] == "invalid"
    assert data["detail"] == (
        'The request is not valid: Field "title", Field "items/2/name", Field "rows/1/x".'
    )
    assert [(e["pointer"], e["code"]) for e in data["errors"]] == [
        ("/title", "max_length"),
        ("/items/2/name", "required"),
        ("/rows/1/x", "invalid"),
        ("", "whole"),
    ]


def test_django_404_and_403_are_converted_without_their_message():
    assert exception_handler(Http404("No Conversation matches"), {}).data == {
        "code": "not_found",
        "detail": "Not found.",
        "errors": [],
    }
    denied = exception_handler(DjangoPermissionDenied("internal reason"), {})
    assert denied.status_code == 403 and denied.data["code"] == "permission_denied"
    assert denied.data["detail"] == "You do not have permission to perform this action."


def test_api_errors_keep_their_status_code_and_items():
    exc = APIError(
        "Too big.", code="content_too_large", status_code=413, errors=[{"pointer": "/c"}]
    )
    response = exception_handler(exc, {})
    assert response.status_code == 413
    assert response.data == {
        "code": "content_too_large",
        "detail": "Too big.",
        "errors": [{"pointer": "/c"}],
    }


def test_json_pointers_escape_tilde_and_slash():
    assert json_pointer(["metadata", "a/b", "c~d", 0]) == "/metadata/a~1b/c~0d/0"
    assert json_pointer([]) == ""
