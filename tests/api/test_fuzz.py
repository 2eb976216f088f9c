"""Schemathesis against the live app (in-process WSGI): no request may cause a 5xx.

The app is loaded from its own ``/api/schema/``. Every operation gets cases
generated from the schema with random ids (mostly 404s) and cases aimed at
objects the token's user owns (a conversation with history, a run, and a
conversation kept for the DELETE), so the bodies reach the services. Posting
messages runs the tool loop on the offline demo adapter: no network. Each
generated path is also asked ``OPTIONS`` and ``HEAD``, with and without the
token (the schema lists neither method, so schemathesis would not).
"""

from __future__ import annotations

import collections

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from conversations.domain import Role, ToolCall
from conversations.domain.messages import decode_arguments
from conversations.models import Conversation
from conversations.services import store_attachment
from tests.strategies import argument_objects, histories, import_bodies, tool_calls

from .conftest import scripted_turn

EXAMPLES_PER_OPERATION = 30
NEGATIVE_EXAMPLES = 15
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _import_call(call_id: str) -> st.SearchStrategy[ToolCall]:
    return tool_calls(
        st.just(call_id),
        st.sampled_from(["get_weather", "calculate", "unknown"]),
        argument_objects(st.text(max_size=5), st.integers(), max_size=3),
        # Raw argument text: anything that is not a JSON object.
        st.text(min_size=1, max_size=20).filter(lambda text: decode_arguments(text) is None),
    )


def _histories() -> st.SearchStrategy[dict]:
    """An import body whose tool calls are all answered (texts, ids and error flags are random)."""
    return import_bodies(
        histories(
            texts=st.text(max_size=50),
            ids=st.text(min_size=1, max_size=20),
            calls=_import_call,
            systems=(0, 0),
            rounds=(1, 1),
            turns_per_round=(0, 3),
            calls_per_turn=(1, 3),
            interludes=(Role.ASSISTANT,),
            final_answers=False,
        )
    )


def _probe(case, headers: dict[str, str], counter: collections.Counter) -> None:
    """``OPTIONS`` and ``HEAD`` on the case's path, with the token and without."""
    client = Client(raise_request_exception=False)
    for method in ("options", "head"):
        for sent in (headers, {}):
            response = getattr(client, method)(case.formatted_path, headers=sent)
            counter[f"{method.upper()} {response.status_code}"] += 1
            assert response.status_code < 500, (method, case.formatted_path, sent != {})


def _exercise(
    strategy, counter: collections.Counter, checks=CHECKS, examples=None, probe=None
) -> None:
    """Call the app with ``strategy``'s cases; count statuses; fail on a 5xx or a failed check.

    With ``probe`` (the token's headers and a counter), each case's path is
    also asked ``OPTIONS`` and ``HEAD`` by :func:`_probe`.
    """

    @settings(
        max_examples=examples or EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def exercise(case):
        response = case.call()
        counter[response.status_code] += 1
        assert response.status_code < 500, (case.method, case.formatted_path, response.text)
        case.validate_response(response, checks=checks)
        if probe is not None:
            _probe(case, *probe)

    exercise()


def _closing(application):
    """``application``, closing each response once its body is read, as a WSGI server does.

    Schemathesis' WSGI transport reads a body that is not an event stream
    without closing the response, so an attachment's ``FileResponse`` would
    keep its file open until the garbage collector finds it, in whatever test
    runs then. Event streams are left to the transport, which closes them.
    """

    def closing_application(environ, start_response):
        kinds = []

        def start(status, headers, exc_info=None):
            kinds.extend(value for name, value in headers if name.lower() == "content-type")
            return start_response(status, headers, exc_info)

        result = application(environ, start)
        if any(kind.startswith("text/event-stream") for kind in kinds):
            return result
        try:
            return [b"".join(result)]
        finally:
            if hasattr(result, "close"):
                result.close()

    return closing_application


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_error(user, profile, demo_conversation, capsys):
    token = Token.objects.create(user=user)
    run = scripted_turn(demo_conversation)
    doomed = Conversation.objects.create(owner=user, title="To delete", profile=profile)
    headers = {"Authorization": f"Token {token.key}"}
    owned = {
        "conversation_id": str(demo_conversation.pk),
        "run_id": str(run.pk),
        "tool_call_id": str(demo_conversation.tool_calls.first().pk),
        "position": "4",  # the run's answer: feedback takes an assistant message
        "attachment_id": str(
            store_attachment(owner=user, file=b"notes", name="a.txt").attachment.pk
        ),
    }
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/",
        _closing(get_wsgi_application()),
        headers={"Accept": "application/vnd.oai.openapi+json"},
    )
    statuses: dict[str, collections.Counter] = {}
    probes: collections.Counter = collections.Counter()
    unsatisfiable: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 44  # with feedback, scores, datasets and attachments

    for operation in operations:
        label = f"{operation.method.upper()} {operation.path}"
        counter = statuses.setdefault(label, collections.Counter())
        params = {
            name: value for name, value in owned.items() if "{" + name + "}" in operation.path
        }
        if operation.method.lower() == "delete" and set(params) == {"conversation_id"}:
            params = {"conversation_id": str(doomed.pk)}  # deleting it spares the others
        strategies = [operation.as_strategy(headers=headers)]
        if params:
            strategies.append(operation.as_strategy(headers=headers, path_parameters=params))
        if operation.method.lower() == "post" and operation.path.endswith("/messages/"):
            # The schema's optional fields (attachment ids above all) make a random
            # body almost always a 400: also send plain texts, which a run answers.
            strategies.append(
                st.text(min_size=1, max_size=40)
                .filter(str.strip)
                .flatmap(
                    lambda text, operation=operation, params=params: operation.as_strategy(
                        headers=headers, path_parameters=params, body={"content": text}
                    )
                )
            )
        if operation.path.endswith("/import/"):
            # Random bodies almost never pair calls with results: also send
            # well-formed histories with random texts, ids and arguments.
            strategies.append(
                _histories().flatmap(
                    lambda body, operation=operation: operation.as_strategy(
                        headers=headers, body=body
                    )
                )
            )

        _exercise(st.one_of(strategies), counter, probe=(headers, probes))
        # Invalid data (wrong types, missing fields, malformed ids): never a 5xx,
        # whatever else (a path that matches no route gets the API's JSON 404).
        negative = operation.as_strategy(GenerationMode.NEGATIVE, headers=headers)
        try:
            _exercise(
                negative,
                counter,
                checks=[not_a_server_error],
                examples=NEGATIVE_EXAMPLES,
                probe=(headers, probes),
            )
        except Unsatisfiable:
            # Nothing in this operation's schema can be made invalid (e.g. only
            # optional free-text parameters, or no parameters at all).
            unsatisfiable.append(label)

    with capsys.disabled():
        print("\nschemathesis: status codes per operation")
        for label, counter in statuses.items():
            print(f"  {label}: {dict(sorted(counter.items()))}")
        print(f"  no invalid data possible: {unsatisfiable}")
        print(f"  OPTIONS and HEAD on the same paths: {dict(sorted(probes.items()))}")
    assert all(code < 500 for counter in statuses.values() for code in counter)
    # OPTIONS and HEAD reached the views themselves, not only the 404 of random ids.
    assert probes["OPTIONS 200"] > 0 and probes["HEAD 200"] > 0
    # The owned objects were reached, not only random ids.
    assert statuses["POST /api/conversations/{conversation_id}/messages/"][201] > 0
    assert statuses["POST /api/conversations/import/"][201] > 0
    assert statuses["POST /api/runs/{run_id}/cancel/"][409] > 0  # the owned run has ended
