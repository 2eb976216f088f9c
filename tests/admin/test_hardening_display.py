"""The admin renders any stored JSON value, however deeply nested, without recursion errors."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from conversations.admin.display import pretty_json
from conversations.models import Conversation, Message, ToolCall

from .conftest import admin_url

pytestmark = pytest.mark.django_db

DEPTH = 900


def deep_value(depth: int = DEPTH):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_pretty_json_renders_a_value_nested_past_the_recursion_limit():
    value = {"a": deep_value(5_000)}
    text = pretty_json(value)
    assert text.startswith('{"a":[[')
    assert text.count("[") == 5_000


def test_pretty_json_still_indents_ordinary_values():
    assert pretty_json({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'


def test_pages_with_arguments_stored_900_deep_render(admin_client, history):
    call = ToolCall.objects.first()
    table = connection.ops.quote_name(ToolCall._meta.db_table)
    stored = json.dumps({"deep": deep_value()})
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        # Written with SQL, as an older version or another client could have.
        cursor.execute(f"UPDATE {table} SET arguments = %s{cast} WHERE id = %s", [stored, call.pk])
    for obj in (call, call.message, call.conversation):
        response = admin_client.get(admin_url(obj))
        assert response.status_code == 200, obj
    response = admin_client.get(admin_url(Message, "changelist"))
    assert response.status_code == 200
    assert Conversation.objects.filter(pk=call.conversation_id).exists()
