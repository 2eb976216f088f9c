"""Output schemas: canonical digest, the checks a schema passes, validating an answer."""

from __future__ import annotations

import json

import pytest

from conversations.domain.output import (
    OutputSpec,
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


def test_a_reference_the_schema_does_not_hold_is_a_failed_check_never_a_fetch():
    check = check_output('{"a": 1}', {"$ref": "urn:example:elsewhere"})
    assert not check.valid
    assert "urn:example:elsewhere" in check.error


def test_an_answer_nested_deeper_than_the_limit_names_where():
    check = check_output("[[[[1]]]]", {"type": "array"}, max_depth=2)
    assert not check.valid
    assert check.pointer == "/0/0"
    assert check.error == "nested deeper than 2 levels"


def test_a_schema_that_recurses_without_end_fails_the_check_without_a_crash():
    endless = {"$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}]}}, "$ref": "#/$defs/n"}
    check = check_output('{"a": 1}', endless)
    assert not check.valid
    assert check.error == "the schema recurses without end on this answer"


def test_an_output_spec_refuses_a_schema_that_is_not_an_object():
    with pytest.raises(InvalidArgumentError, match="must be a JSON object"):
        OutputSpec(schema=[1, 2])


def test_the_strict_subset_names_an_unknown_keyword_and_a_missing_required():
    closed = {"type": "object", "properties": {}, "additionalProperties": False, "required": []}
    assert strict_subset_problem({**closed, "oneOf": []}) == "the root uses oneOf"
    loose = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    }
    assert strict_subset_problem(loose) == "the root does not require every property"


def test_the_strict_subset_looks_inside_items_and_any_of():
    open_object = {"type": "object", "properties": {}, "additionalProperties": True}
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string"}},
            "c": {"anyOf": [{"type": "string"}, {**open_object, "required": []}]},
        },
        "additionalProperties": False,
        "required": ["a", "c"],
    }
    assert strict_subset_problem(schema) == (
        "/properties/c/anyOf/1 does not set additionalProperties: false"
    )
    inside_items = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {**open_object, "required": []}}},
        "additionalProperties": False,
        "required": ["a"],
    }
    assert strict_subset_problem(inside_items) == (
        "/properties/a/items does not set additionalProperties: false"
    )


def test_the_strict_subset_skips_boolean_schemas_and_limits_object_depth():
    closed = {"type": "object", "additionalProperties": False}
    with_true = {**closed, "properties": {"a": {"anyOf": [True]}}, "required": ["a"]}
    assert strict_subset_problem(with_true) is None
    deep: dict = {**closed, "properties": {}, "required": []}
    for _ in range(11):
        deep = {**closed, "properties": {"x": deep}, "required": ["x"]}
    assert "nests objects deeper than 10" in strict_subset_problem(deep)
