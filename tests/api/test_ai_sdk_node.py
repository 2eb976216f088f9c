"""The real AI SDK (``ai`` on npm, pinned in tests/js) reads our endpoint under uvicorn.

Node runs tests/js/use_chat.mjs against a live server: the SDK's own
transport sends useChat's request and checks every chunk against its schema,
its stream reader folds them into a UIMessage, the ``Chat`` class behind
``useChat`` sends a second message, and ``validateUIMessages`` accepts the
history. The packages are installed with ``npm ci`` from the lock file, once
per lock file (a stamp in node_modules says which).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from conversations.models import Run
from conversations.providers.demo_output import SAMPLE_SCHEMAS
from tests.conftest import TEST_REDIS_DB

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

JS = Path(__file__).resolve().parents[1] / "js"
QUESTION = "What's the weather in Leipzig and what time is it?"
# Redis channels of this session only: other sessions share TEST_REDIS_DB.
PREFIX = f"ai-sdk-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def node():
    """The ``node`` binary, with tests/js's packages installed (``npm ci``, cached by lock file)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the AI SDK: apt-get install -y nodejs npm")
    digest = hashlib.sha256((JS / "package-lock.json").read_bytes()).hexdigest()
    stamp = JS / "node_modules" / ".installed-lock"
    # One installer at a time: pytest-xdist workers share tests/js, and two
    # `npm ci` at once on a fresh checkout each delete the node_modules the
    # other is filling. The second waits here, then finds the stamp. The lock
    # file lives outside node_modules, which `npm ci` deletes first.
    with (JS / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != digest:
            subprocess.run([npm, "ci"], cwd=JS, check=True, capture_output=True, timeout=600)
            stamp.write_text(digest)
    return node


@pytest.fixture
def token(user):
    return Token.objects.create(user=user)


def use_chat(node, base_url, conversation, token, text):
    done = subprocess.run(
        [node, "use_chat.mjs", base_url, str(conversation.pk), token.key, text],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("executor", ["inline", "celery"])
def test_the_ai_sdk_reads_the_stream_and_validates_the_history(
    executor, node, uvicorn, workers, token, demo_conversation
):
    env = {}
    if executor == "celery":
        # The worker's deltas and "changed" reach the web process over Redis.
        env = {
            "CONVERSATIONS_EXECUTOR": "celery",
            "CONVERSATIONS_EVENTS_URL": f"redis://127.0.0.1:6379/{TEST_REDIS_DB}?prefix={PREFIX}",
            "DJANGO_CACHE_URL": f"redis://127.0.0.1:6379/{TEST_REDIS_DB}",
        }
        workers(**env)
    server, base_url = uvicorn(**env)
    result = use_chat(node, base_url, demo_conversation, token, QUESTION)
    assert result["errors"] == []

    first, second = Run.objects.filter(conversation=demo_conversation).order_by("started_at")
    assert (first.status, second.status) == ("completed", "completed")
    types = result["chunkTypes"]
    assert types[0] == "start" and types[-1] == "finish"
    assert types.count("start-step") == types.count("finish-step") == 2
    assert types.count("tool-input-available") == types.count("tool-output-available") == 2
    assert types.index("tool-output-available") < types.index("text-start")

    streamed = result["streamed"]
    assert streamed["id"] == f"run-{first.pk}"
    assert [part["type"] for part in streamed["parts"]] == [
        "step-start",
        "tool-get_weather",
        "tool-get_current_time",
        "step-start",
        "text",
    ]
    weather = streamed["parts"][1]
    assert weather["state"] == "output-available"
    assert weather["input"] == {"city": "Leipzig"}
    assert json.loads(weather["output"])["city"] == "Leipzig"
    assert "Leipzig" in streamed["parts"][-1]["text"]
    assert streamed["metadata"]["runStatus"] == "completed"

    history = result["history"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    # What the stream built is exactly what the history says afterwards.
    assert history[1] == streamed
    assert history[3]["id"] == f"run-{second.pk}"
    # A turn per page, newest first, each page validated by the SDK; older ones by Link.
    assert result["pages"] == [history[2:], history[:2]]

    chat = result["chat"]
    assert chat["status"] == "ready"
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant"]
    assert chat["messages"][1] == history[3]
    assert "Warning" not in server.output()


def test_a_queue_that_refuses_the_run_answers_json(uvicorn, token, demo_conversation):
    _, base_url = uvicorn(
        CONVERSATIONS_EXECUTOR="celery", CELERY_BROKER_URL="redis://127.0.0.1:9/0"
    )
    url = f"{base_url}/api/conversations/{demo_conversation.pk}/chat/"
    body = {"messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    response = httpx.post(
        url, json=body, headers={"Authorization": f"Token {token.key}"}, timeout=60
    )
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "executor_unavailable"
    assert response.json()["run"]["status"] == "failed"


SENTIMENT = SAMPLE_SCHEMAS["sentiment"]


def test_the_ai_sdk_reads_the_structured_output_as_a_data_part(
    node, uvicorn, token, demo_conversation
):
    _, base_url = uvicorn()
    done = subprocess.run(
        [
            node,
            "structured_output.mjs",
            base_url,
            str(demo_conversation.pk),
            token.key,
            "Great product!",
            json.dumps(SENTIMENT),
        ],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["errors"] == []
    run = Run.objects.get(conversation=demo_conversation)
    assert run.status == Run.Status.COMPLETED
    outputs = [part for part in result["parts"] if part["type"] == "data-output"]
    assert outputs == [{"type": "data-output", "id": "output", "data": run.output}]
    assert result["chunkTypes"].index("data-output") < result["chunkTypes"].index("finish")


def test_the_ai_sdk_sends_a_file_part_and_the_history_gives_it_back(
    node, uvicorn, token, demo_conversation, tmp_path
):
    import base64

    from conversations.models import Attachment

    from ..files import png

    picture = png()
    _, base_url = uvicorn(MEDIA_ROOT=str(tmp_path / "media"))
    done = subprocess.run(
        [
            node,
            "use_chat_file.mjs",
            base_url,
            str(demo_conversation.pk),
            token.key,
            "What is in this picture?",
            base64.b64encode(picture).decode(),
        ],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["errors"] == []
    assert result["chat"]["status"] == "ready"

    run = Run.objects.get(conversation=demo_conversation)
    assert run.status == Run.Status.COMPLETED
    attachment = Attachment.objects.get()
    assert (attachment.media_type, attachment.name, attachment.size) == (
        "image/png",
        "dot.png",
        len(picture),
    )
    user, assistant = result["history"]
    assert user["parts"] == [
        {"type": "text", "text": "What is in this picture?"},
        {
            "type": "file",
            "mediaType": "image/png",
            "filename": "dot.png",
            "url": f"/api/attachments/{attachment.pk}/content/",
        },
    ]
    assert assistant["parts"][-1]["type"] == "text"
    # The streamed answer is the one the history has.
    assert result["chat"]["messages"][1] == assistant
    assert base64.b64decode(result["served"]) == picture
