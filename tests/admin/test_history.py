"""The history admin: conversations, runs, tool calls and messages are inspectable, never editable."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import checks
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.admin.display import pretty_result
from conversations.domain import ChatMessage
from conversations.domain import ToolCall as Call
from conversations.models import Conversation, Message, Run, ToolCall
from conversations.services import append_messages, create_conversation

from .conftest import (
    ASSISTANT_TEXT,
    CITY,
    FINAL_TEXT,
    USER_TEXT,
    add_run,
    admin_url,
)

pytestmark = pytest.mark.django_db

HISTORY_MODELS = (Conversation, Run, ToolCall, Message)


def html(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def call_row(page: str, call: ToolCall) -> str:
    """The transcript row of one call: the call's cell and its result's cell."""
    start = page.index(f'id="call-{call.pk}"')
    return page[start : page.index("</tr>", start)]


def test_admin_configuration_passes_the_admin_checks():
    errors = [
        e
        for e in checks.run_checks(tags=[checks.Tags.admin])
        if getattr(e.obj, "__module__", "").startswith("conversations")
    ]
    assert errors == []


@pytest.mark.parametrize("model", HISTORY_MODELS, ids=lambda m: m._meta.model_name)
def test_every_history_changelist_renders(admin_client, history, model):
    page = html(admin_client.get(admin_url(model, "changelist")))
    assert "<script>alert(" not in page
    # with the filter counts ("Show counts") too
    html(admin_client.get(admin_url(model, "changelist") + "?_facets=1"))


def test_every_history_change_page_renders(admin_client, history):
    objects = [
        history.conversation,
        history.open_conversation,
        *history.runs.values(),
        *ToolCall.objects.all(),
        *Message.objects.all(),
    ]
    for obj in objects:
        page = html(admin_client.get(admin_url(obj)))
        assert "<script>alert(" not in page, obj
        assert 'name="_save"' not in page, obj


def test_conversation_changelist_columns(admin_client, history):
    response = admin_client.get(admin_url(Conversation, "changelist"))
    html(response)
    rows = {row.pk: row for row in response.context["cl"].result_list}
    row = rows[history.conversation.pk]
    assert row.message_count == 6
    assert row.last_run_status == Run.Status.COMPLETED
    assert rows[history.open_conversation.pk].last_run_status is None
    page = response.content.decode()
    assert "Trip &lt;b&gt;planning&lt;/b&gt;" in page
    assert "alice" in page
    assert "Completed" in page


def test_transcript_shows_each_call_beside_its_result(admin_client, history):
    page = html(admin_client.get(admin_url(history.conversation)))
    weather = call_row(page, history.calls["call_weather"])
    assert "get_weather" in weather and "Succeeded" in weather and "420 ms" in weather
    # Pretty JSON, escaped.
    assert (
        "&quot;city&quot;: &quot;&lt;script&gt;alert(&#x27;args&#x27;)&lt;/script&gt;Paris"
        in weather
    )
    assert "&lt;b&gt;sunny&lt;/b&gt;" in weather  # the result, in the same row
    # A JSON result is indented like the arguments, escaped, its keys in their order.
    result = weather[weather.index('class="llm-result"') :]
    assert (
        "{\n  &quot;city&quot;: &quot;Paris&quot;,\n  &quot;temperature_c&quot;: 18,\n"
        "  &quot;note&quot;: &quot;&lt;b&gt;sunny&lt;/b&gt;&quot;\n}"
    ) in result

    failed = call_row(page, history.calls["call_calc"])
    assert "Failed" in failed and "1.5 s" in failed
    assert "never sent to the model" in failed
    assert "Traceback (most recent call last)" in failed
    assert "RuntimeError: calculator crashed &lt;b&gt;boom&lt;/b&gt;" in failed
    assert "Error: tool &quot;calculate&quot; failed." in failed

    raw = call_row(page, history.calls["call_raw"])
    assert "Rejected" in raw and "raw arguments" in raw
    assert "{city: &lt;i&gt;Paris&lt;/i&gt;" in raw

    # Assistant turn details: model, usage and latency.
    assert "model gpt-test" in page
    assert "tokens 120 in / 30 out / 150 total" in page
    assert "100 cached" in page and "10 reasoning" in page
    assert "latency 850 ms" in page
    # Answers are shown beside their call, not again as separate messages.
    assert page.count('class="llm-msg llm-role-tool"') == 0
    # Position order.
    positions = [int(p) for p in re.findall(r'id="message-(\d+)"', page)]
    assert positions == sorted(positions) == [0, 1, 5]


def test_model_output_is_escaped_on_the_transcript(admin_client, history):
    page = html(admin_client.get(admin_url(history.conversation)))
    for text in (USER_TEXT, ASSISTANT_TEXT, FINAL_TEXT, CITY):
        assert text not in page
    assert "<script>" not in page.split("<body", 1)[1].replace('<script src="', "")
    assert "&lt;img src=x onerror=alert(&#x27;assistant&#x27;)&gt;" in page
    assert "It is 18C in Paris. &lt;script&gt;alert(&#x27;final&#x27;)&lt;/script&gt;" in page


def test_open_call_is_marked_open(admin_client, history):
    page = html(admin_client.get(admin_url(history.open_conversation)))
    call = ToolCall.objects.get(conversation=history.open_conversation)
    assert "No result yet: the call is open." in call_row(page, call)


def test_run_page_shows_the_trace(admin_client, history):
    page = html(admin_client.get(admin_url(history.run)))
    for call in history.calls.values():
        assert f'id="call-{call.pk}"' in page
    assert "RuntimeError: calculator crashed" in page
    assert "320 in (0 cached) / 50 out (0 reasoning) / 370 total" in page
    assert "2 / 5" in page


def test_run_trace_includes_answers_written_without_the_run(admin_client, history):
    # recovery answers open calls with run=None when a new turn starts
    stale = history.stale_run
    append_messages(
        conversation=stale.conversation,
        messages=[ChatMessage.tool_result("call_open", "Error: interrupted")],
    )
    page = html(admin_client.get(admin_url(stale)))
    call = ToolCall.objects.get(call_id="call_open")
    assert "Error: interrupted" in call_row(page, call)


def test_a_run_of_one_and_a_half_milliseconds_shows_2_ms_as_the_api_does(admin_client, history):
    run = history.run
    Run.objects.filter(pk=run.pk).update(finished_at=run.started_at + timedelta(microseconds=1_500))
    page = html(admin_client.get(admin_url(run)))
    assert re.search(r">\s*2 ms\s*<", page)


def test_runs_changelist_columns(admin_client, history):
    response = admin_client.get(admin_url(Run, "changelist"))
    page = html(response)
    rows = {row.pk: row for row in response.context["cl"].result_list}
    assert rows[history.run.pk].call_count == 3
    assert rows[history.runs["failed"].pk].call_count == 0
    assert "Failed: provider_timeout" in page
    assert "Stopped at max iterations" in page
    assert "370" in page and "gpt-test" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status__exact": "failed"}, {"failed"}),
        ({"error_code": "run_cancelled"}, {"cancelled"}),
        ({"error_code": "none"}, {"completed", "max_iterations", "running"}),
        ({"tool": "get_weather"}, {"completed"}),
        ({"tool": "get_current_time"}, {"running"}),
        ({"tool": "calculate"}, {"completed"}),
    ],
)
def test_run_filters(admin_client, history, query, expected):
    response = admin_client.get(admin_url(Run, "changelist"), query)
    html(response)
    assert {run.status for run in response.context["cl"].result_list} == expected


def date_choice(client, url, title, display):
    """The query string of one choice of a date filter, as the page offers it."""
    response = client.get(url)
    html(response)
    (spec,) = [s for s in response.context["cl"].filter_specs if s.title == title]
    (choice,) = [c for c in spec.choices(response.context["cl"]) if c["display"] == display]
    return choice["query_string"]


def test_run_filter_by_profile_and_date(admin_client, history, openai_profile):
    url = admin_url(Run, "changelist")
    response = admin_client.get(url, {"profile__id__exact": openai_profile.pk})
    assert len(html(response) and response.context["cl"].result_list) == 6
    for display, count in (("Past 7 days", 6), ("This year", 6)):
        query = date_choice(admin_client, url, "started at", display)
        response = admin_client.get(url + query)
        assert len(html(response) and response.context["cl"].result_list) == count


def test_tool_name_filter_lists_registered_and_called_names(admin_client, history):
    ToolCall.objects.filter(call_id="call_x").update(name="hallucinated_tool")
    page = html(admin_client.get(admin_url(Run, "changelist")))
    for name in ("get_weather", "calculate", "get_current_time", "hallucinated_tool"):
        assert f"?tool={name}" in page


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ({"last_run": "completed"}, {"Trip <b>planning</b>"}),
        ({"last_run": "none"}, {"Open calls"}),
        ({"last_run": "running"}, {"Stale run"}),
        ({"q": "planning"}, {"Trip <b>planning</b>"}),
        ({"q": "alice"}, None),  # every conversation
    ],
)
def test_conversation_filters_and_search(admin_client, history, query, titles):
    response = admin_client.get(admin_url(Conversation, "changelist"), query)
    html(response)
    found = {c.title for c in response.context["cl"].result_list}
    if titles is None:
        assert len(found) == Conversation.objects.count()
    else:
        assert found == titles


def test_conversation_search_by_id(admin_client, history):
    url = admin_url(Conversation, "changelist")
    for term in (str(history.conversation.pk), str(history.conversation.pk)[:8]):
        response = admin_client.get(url, {"q": term})
        html(response)
        assert [c.pk for c in response.context["cl"].result_list] == [history.conversation.pk]


def test_run_search_by_exact_id(admin_client, history):
    url = admin_url(Run, "changelist")
    response = admin_client.get(url, {"q": str(history.run.pk)})
    assert [r.pk for r in html(response) and response.context["cl"].result_list] == [history.run.pk]
    response = admin_client.get(url, {"q": "planning"})  # the conversation's title
    assert [r.pk for r in html(response) and response.context["cl"].result_list] == [history.run.pk]


def test_message_search_by_content(admin_client, history):
    response = admin_client.get(admin_url(Message, "changelist"), {"q": "18C in Paris"})
    html(response)
    assert [m.position for m in response.context["cl"].result_list] == [5]


def test_conversation_filters_by_profile_and_created_date(admin_client, history, openai_profile):
    url = admin_url(Conversation, "changelist")
    response = admin_client.get(url, {"profile__id__exact": openai_profile.pk})
    html(response)
    assert history.open_conversation not in response.context["cl"].result_list
    response = admin_client.get(url + date_choice(admin_client, url, "created at", "Today"))
    assert len(html(response) and response.context["cl"].result_list) == 7


@pytest.mark.parametrize(
    ("term", "call_ids"),
    [
        ("Paris", {"call_weather", "call_raw"}),  # an argument value, and raw arguments
        ("expression", {"call_calc"}),  # an argument name
        ("call_calc", {"call_calc"}),
        ("get_current", {"call_open"}),
    ],
)
def test_tool_call_search(admin_client, history, term, call_ids):
    response = admin_client.get(admin_url(ToolCall, "changelist"), {"q": term})
    html(response)
    assert {c.call_id for c in response.context["cl"].result_list} == call_ids


@pytest.mark.parametrize(
    ("query", "call_ids"),
    [
        ({"status__exact": "failed"}, {"call_calc"}),
        ({"tool": "get_weather"}, {"call_weather", "call_raw", "call_x"}),
    ],
)
def test_tool_call_filters(admin_client, history, query, call_ids):
    response = admin_client.get(admin_url(ToolCall, "changelist"), query)
    html(response)
    assert {c.call_id for c in response.context["cl"].result_list} == call_ids


def test_tool_call_links_to_the_conversation(admin_client, history):
    call = history.calls["call_calc"]
    page = html(admin_client.get(admin_url(ToolCall, "changelist")))
    assert f'{admin_url(history.conversation)}#call-{call.pk}"' in page
    detail = html(admin_client.get(admin_url(call)))
    assert f'{admin_url(history.conversation)}#call-{call.pk}"' in detail
    assert admin_url(history.run) in detail
    assert "RuntimeError: calculator crashed &lt;b&gt;boom&lt;/b&gt;" in detail
    assert "Error: tool &quot;calculate&quot; failed." in detail


# Read-only -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", HISTORY_MODELS, ids=lambda m: m._meta.model_name)
def test_history_cannot_be_added(admin_client, history, model):
    assert admin_client.get(admin_url(model, "add")).status_code == 403


def test_history_cannot_be_changed(admin_client, history):
    message = Message.objects.get(conversation=history.conversation, position=3)
    call = history.calls["call_weather"]
    cases = [
        (message, {"content": "rewritten", "role": "user", "position": 3}),
        (call, {"name": "other", "arguments": "{}", "status": "succeeded"}),
        (history.run, {"status": "completed"}),
        (history.conversation, {"title": "changed"}),
    ]
    for obj, data in cases:
        page = html(admin_client.get(admin_url(obj)))
        assert 'name="_save"' not in page and 'name="_continue"' not in page
        assert admin_client.post(admin_url(obj), data).status_code == 403
    before = message.content
    message.refresh_from_db()
    call.refresh_from_db()
    assert message.content == before and call.name == "get_weather"


@pytest.mark.parametrize("model", (Run, ToolCall, Message), ids=lambda m: m._meta.model_name)
def test_history_rows_cannot_be_deleted(admin_client, history, model):
    obj = model.objects.filter(conversation=history.conversation).first()
    url = admin_url(obj, "delete")
    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=obj.pk).exists()


def test_superuser_deletes_a_whole_conversation(admin_client, history):
    conversation = history.conversation
    url = admin_url(conversation, "delete")
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()
    assert not ToolCall.objects.filter(conversation_id=conversation.pk).exists()
    assert Conversation.objects.filter(pk=history.open_conversation.pk).exists()


def test_conversation_with_a_live_run_cannot_be_deleted(
    admin_client, history, user, openai_profile
):
    busy = create_conversation(owner=user, title="Live", profile=openai_profile)
    add_run(busy, openai_profile, Run.Status.RUNNING)  # a fresh heartbeat: its process is alive
    assert admin_client.get(admin_url(busy, "delete")).status_code == 403
    response = admin_client.post(
        admin_url(Conversation, "changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [busy.pk, history.open_conversation.pk],
            "post": "yes",
        },
        follow=True,
    )
    page = html(response)
    assert "1 conversation(s) with a run in progress are not deleted." in page
    assert "Successfully deleted 1 conversation." in page
    assert Conversation.objects.filter(pk=busy.pk).exists()
    assert not Conversation.objects.filter(pk=history.open_conversation.pk).exists()


def test_admin_delete_recovers_a_dead_run_like_the_api(admin_client, history):
    # The run's heartbeat expired long ago: delete_conversation recovers it
    # first, so the admin can delete, exactly as DELETE on the API can.
    dead = history.stale_run.conversation
    url = admin_url(dead, "delete")
    assert admin_client.get(url).status_code == 200
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.filter(pk=dead.pk).exists()
    assert not Run.objects.filter(pk=history.stale_run.pk).exists()


def test_admin_bulk_delete_goes_through_the_service(admin_client, history, user, openai_profile):
    dead = history.stale_run.conversation
    response = admin_client.post(
        admin_url(Conversation, "changelist"),
        {"action": "delete_selected", "_selected_action": [dead.pk], "post": "yes"},
        follow=True,
    )
    assert "Successfully deleted 1 conversation." in html(response)
    assert not Conversation.objects.filter(pk=dead.pk).exists()


def test_a_run_started_after_confirmation_stops_the_delete(admin_client, user, openai_profile):
    from django.contrib import admin as django_admin
    from django.test import RequestFactory

    from conversations.admin.history import ConversationAdmin

    conversation = create_conversation(owner=user, title="Raced", profile=openai_profile)
    add_run(conversation, openai_profile, Run.Status.RUNNING)
    model_admin = ConversationAdmin(Conversation, django_admin.site)
    request = RequestFactory().post("/")
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        model_admin.delete_model(request, conversation)
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_the_transcript_marks_error_results(admin_client, user):
    conversation = create_conversation(owner=user, title="Errors")
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("1/0 and 2/1?"),
            ChatMessage.assistant_tool_calls(
                [Call("c_bad", "calculate", {"expression": "1/0"}), Call("c_ok", "calculate")]
            ),
            ChatMessage.tool_result(
                "c_bad", 'Error: tool "calculate" failed: division by zero', is_error=True
            ),
            ChatMessage.tool_result("c_ok", "2"),
        ],
    )
    page = html(admin_client.get(admin_url(conversation)))
    bad = call_row(page, ToolCall.objects.get(call_id="c_bad"))
    good = call_row(page, ToolCall.objects.get(call_id="c_ok"))
    assert 'class="llm-error-flag"' in bad and ">error</span>" in bad
    assert "llm-error-flag" not in good
    message = Message.objects.get(tool_call__call_id="c_bad")
    assert "True" in html(admin_client.get(admin_url(message)))  # the field on its own page


def test_staff_without_superuser_cannot_delete_conversations(client, django_user_model, history):
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_conversation", "delete_conversation", "change_conversation"]
        )
    )
    client.force_login(staff)
    assert client.get(admin_url(history.open_conversation)).status_code == 200
    assert client.get(admin_url(history.open_conversation, "delete")).status_code == 403


# Actions -----------------------------------------------------------------------------


def test_recover_action_interrupts_only_stale_runs(admin_client, history, user, openai_profile):
    stale = history.stale_run
    live_conversation = create_conversation(owner=user, title="Live")
    live = add_run(live_conversation, openai_profile, Run.Status.RUNNING)
    response = admin_client.post(
        admin_url(Run, "changelist"),
        {
            "action": "recover_interrupted_runs",
            "_selected_action": [stale.pk, live.pk, history.run.pk],
        },
        follow=True,
    )
    page = html(response)
    assert "Recovered 1 run(s)" in page
    assert "1 running run(s) still have a live heartbeat" in page
    stale.refresh_from_db()
    live.refresh_from_db()
    assert stale.status == Run.Status.INTERRUPTED and stale.error_code == "interrupted"
    assert live.status == Run.Status.RUNNING
    call = ToolCall.objects.get(call_id="call_open")
    assert call.status == ToolCall.Status.INTERRUPTED
    assert call.results.get().content.startswith('Error: tool "get_current_time" was interrupted')


def test_cancel_action_flags_running_runs_only(admin_client, history, user, openai_profile):
    live = add_run(
        create_conversation(owner=user, title="Live"), openai_profile, Run.Status.RUNNING
    )
    Run.objects.filter(pk=live.pk).update(claimed_at=live.started_at, worker="host:1")
    response = admin_client.post(
        admin_url(Run, "changelist"),
        {"action": "cancel_runs", "_selected_action": [live.pk, history.run.pk]},
        follow=True,
    )
    assert "Asked 1 run(s) to stop" in html(response)
    live.refresh_from_db()
    assert live.cancel_requested and live.status == Run.Status.RUNNING
    history.run.refresh_from_db()
    assert not history.run.cancel_requested


def test_answer_open_calls_action(admin_client, history):
    response = admin_client.post(
        admin_url(Conversation, "changelist"),
        {
            "action": "answer_open_calls_as_interrupted",
            "_selected_action": [history.open_conversation.pk, history.stale_run.conversation.pk],
        },
        follow=True,
    )
    page = html(response)
    assert "Answered 1 open tool call(s) as interrupted." in page
    assert "Skipped 1 conversation(s) with a run in progress" in page
    assert ToolCall.objects.get(call_id="call_x").status == ToolCall.Status.INTERRUPTED
    assert ToolCall.objects.get(call_id="call_open").status == ToolCall.Status.RUNNING


def test_actions_need_the_change_permission(client, django_user_model, history):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user(username="v", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_run"))
    client.force_login(viewer)
    page = html(client.get(admin_url(Run, "changelist")))
    assert "recover_interrupted_runs" not in page
    client.post(
        admin_url(Run, "changelist"),
        {"action": "recover_interrupted_runs", "_selected_action": [history.stale_run.pk]},
    )
    history.stale_run.refresh_from_db()
    assert history.stale_run.status == Run.Status.RUNNING


# Query counts ------------------------------------------------------------------------


def _many_conversations(user, openai_profile, count):
    for index in range(count):
        conversation = create_conversation(owner=user, title=f"c{index}", profile=openai_profile)
        run = add_run(conversation, openai_profile, Run.Status.COMPLETED)
        append_messages(
            conversation=conversation,
            messages=[ChatMessage.user("hi"), ChatMessage.assistant("hello")],
            run=run,
        )


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


# Measured on SQLite and PostgreSQL with 100 conversations: session, user, the profile
# filter's choices, the feedback-tag filter's choices, two counts, and the page itself.
CONVERSATION_CHANGELIST_MAX_QUERIES = 7


def test_conversation_changelist_queries_are_bounded(
    admin_client, user, openai_profile, django_assert_max_num_queries
):
    url = admin_url(Conversation, "changelist")
    _many_conversations(user, openai_profile, 10)
    with_ten = _queries(admin_client, url)
    _many_conversations(user, openai_profile, 90)
    with django_assert_max_num_queries(CONVERSATION_CHANGELIST_MAX_QUERIES):
        response = admin_client.get(url)
    assert len(response.context["cl"].result_list) == 100
    assert _queries(admin_client, url) == with_ten


# Measured: the run list adds the choices of the error-code, tool, feedback-tag and
# output-schema filters and the date hierarchy; the message list has no related filter.
OTHER_CHANGELIST_MAX_QUERIES = {Run: 12, ToolCall: 6, Message: 5}


def test_other_changelists_have_constant_queries(
    admin_client, user, openai_profile, django_assert_max_num_queries
):
    _many_conversations(user, openai_profile, 5)
    before = {
        m: _queries(admin_client, admin_url(m, "changelist")) for m in OTHER_CHANGELIST_MAX_QUERIES
    }
    _many_conversations(user, openai_profile, 95)
    for model, bound in OTHER_CHANGELIST_MAX_QUERIES.items():
        with django_assert_max_num_queries(bound):
            assert admin_client.get(admin_url(model, "changelist")).status_code == 200
        assert _queries(admin_client, admin_url(model, "changelist")) == before[model]


def test_change_pages_have_constant_queries(admin_client, user, openai_profile):
    small = create_conversation(owner=user, title="small", profile=openai_profile)
    large = create_conversation(owner=user, title="large", profile=openai_profile)
    for conversation, turns in ((small, 1), (large, 12)):
        run = add_run(conversation, openai_profile, Run.Status.COMPLETED)
        for turn in range(turns):
            ids = [f"t{turn}_{i}" for i in range(3)]
            append_messages(
                conversation=conversation,
                messages=[
                    ChatMessage.user("go"),
                    ChatMessage.assistant_tool_calls(
                        [Call(i, "calculate", {"expression": "1"}) for i in ids]
                    ),
                    *(ChatMessage.tool_result(i, "1") for i in ids),
                    ChatMessage.assistant("done"),
                ],
                run=run,
            )
    assert _queries(admin_client, admin_url(small)) == _queries(admin_client, admin_url(large))
    small_run, large_run = (Run.objects.get(conversation=c) for c in (small, large))
    assert _queries(admin_client, admin_url(small_run)) == _queries(
        admin_client, admin_url(large_run)
    )


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ('{"a":1,"b":[1,2]}', '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'),
        ("[1]", "[\n  1\n]"),
        ('{"cut": "at the limit', '{"cut": "at the limit'),  # not JSON: as it is
        ('Error: tool "x" failed: boom', 'Error: tool "x" failed: boom'),
        ("42", "42"),  # JSON, but nothing to indent
        ('"text"', '"text"'),
        ("", ""),
    ],
)
def test_a_tool_result_is_indented_only_when_it_is_a_json_object_or_array(content, shown):
    assert pretty_result(content) == shown
