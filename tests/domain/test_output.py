"""Output schemas: canonical digest, the checks a schema passes, validating an answer."""

from __future__ import annotations

import json

import pytest

from conversations.domain.output import (
    check_output,
    check_schema,
    schema_sha256,
    strict_subset_problem,
)
from conversations.exceptions import InvalidArgumentError

RECURSIVE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/node",
}


def refused(schema, **limits) -> InvalidArgumentError:
    with pytest.raises(InvalidArgumentError) as caught:
        check_schema(schema, **limits)
    assert caught.value.code == "invalid_schema"
    return caught.value


def test_the_digest_does_not_depend_on_key_order():
    assert schema_sha256({"type": "object", "title": "a"}) == schema_sha256(
        {"title": "a", "type": "object"}
    )
    assert schema_sha256({"type": "object"}) != schema_sha256({"type": "array"})


def test_a_schema_with_a_remote_ref_is_refused_with_its_pointer():
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}
    error = refused(schema)
    assert error.field == "/properties/a/$ref"
    assert "example.com" in error.detail


def test_an_invalid_schema_is_refused_with_the_pointer_of_the_problem():
    error = refused({"type": "object", "properties": {"a": {"type": 5}}})
    assert error.field == "/properties/a/type"


def test_a_schema_over_the_size_limit_is_refused():
    schema = {"type": "object", "description": "x" * 100_000}
    error = refused(schema, max_bytes=64 * 1024)
    assert "bytes" in error.detail


def test_a_schema_nested_past_the_depth_limit_is_refused_without_recursion():
    schema: dict = {"type": "object"}
    for _ in range(50_000):
        schema = {"type": "array", "items": schema}
    error = refused(schema, max_depth=64)
    assert error.field.startswith("/items/items")


def test_a_schema_that_is_not_an_object_is_refused():
    assert refused(["type", "object"]).field == ""


def test_a_recursive_schema_validates_answers_at_any_allowed_depth():
    check_schema(RECURSIVE)
    good = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
    assert check_output(json.dumps(good), RECURSIVE).value == good
    bad = {"name": "a", "children": [{"name": "b", "children": [{}]}]}
    failed = check_output(json.dumps(bad), RECURSIVE)
    assert not failed.valid
    assert failed.pointer == "/children/0/children/0"


def test_an_answer_nested_too_deeply_fails_without_recursion_errors():
    text = "[" * 100_000 + "]" * 100_000
    failed = check_output(text, {"type": "array"}, max_depth=64)
    assert not failed.valid
    assert "deeper" in failed.error


def test_an_answer_that_is_not_json_fails_at_the_root():
    failed = check_output("Sure! Here it is.", {"type": "object"})
    assert not failed.valid
    assert failed.pointer == ""
    assert failed.describe().startswith("at the root: the answer is not JSON")


def test_a_fenced_json_answer_is_accepted():
    assert check_output('```json\n{"a": 1}\n```', {"type": "object"}).value == {"a": 1}


def test_the_strict_subset_requires_closed_objects_listing_every_property():
    closed = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_subset_problem(closed) is None
    assert "additionalProperties" in strict_subset_problem({**closed, "additionalProperties": True})
    assert "require" in strict_subset_problem({**closed, "required": []})
    assert "minLength" in strict_subset_problem(
        {**closed, "properties": {"a": {"type": "string", "minLength": 2}}}
    )
    assert strict_subset_problem({"type": "array"}) == "the root is not an object schema"
