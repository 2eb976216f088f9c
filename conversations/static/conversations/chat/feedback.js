/*
 * Feedback: thumbs up or down, and an optional comment, on each answer and
 * each tool card. The controls are added to whatever the transcript shows
 * (a MutationObserver, so the rendering modules need not know about them),
 * and what the user gave is read from the API whenever a conversation
 * opens, so it is there again after a reload.
 */

import { showError } from "./alerts.js";
import { api, apiRoot, conversationUrl } from "./api.js";
import { el, ui } from "./dom.js";
import { state } from "./state.js";

const given = new Map(); // "message:4" or "call:12" -> {value, comment}
let loadedFor = null;

const LABELS = { 1: "Good", "-1": "Bad" };

/** The API path of one target: an answer by position, a call by pk. */
export function feedbackUrl(conversationId, key) {
  const [kind, id] = key.split(":");
  if (kind === "message") {
    return `${conversationUrl(conversationId)}messages/${encodeURIComponent(id)}/feedback/`;
  }
  return `${apiRoot}tool-calls/${encodeURIComponent(id)}/feedback/`;
}

/** The key of a row of ``GET .../feedback/`` (runs have no control on the page). */
export function keyOf(row) {
  const target = row && row.target;
  if (!target) {
    return null;
  }
  if (target.kind === "message") {
    return `message:${target.position}`;
  }
  return target.kind === "tool_call" ? `call:${target.id}` : null;
}

const stamp = (key) => {
  const current = given.get(key);
  return current ? `${current.value}|${current.comment}` : "none";
};

function thumb(key, value, current) {
  const pressed = Boolean(current && current.value === value);
  return el(
    "button",
    {
      type: "button",
      className: "llm-secondary llm-thumb",
      "data-feedback-value": value,
      "aria-pressed": String(pressed),
      title: pressed ? `${LABELS[value]} (click again to take it back)` : `${LABELS[value]} answer`,
    },
    // Words, not emoji: they read the same on every system and to a screen reader.
    LABELS[value]
  );
}

function commentForm(current) {
  const input = el("input", {
    type: "text",
    name: "comment",
    maxlength: "2000",
    placeholder: "Add a comment (optional)",
    "aria-label": "Feedback comment",
  });
  input.value = current.comment || "";
  return el(
    "form",
    { className: "llm-feedback-comment" },
    input,
    el("button", { type: "submit", className: "llm-secondary" }, "Save comment")
  );
}

function controls(key) {
  const current = given.get(key);
  return el(
    "div",
    { className: "llm-feedback", "data-feedback": key, "data-state": stamp(key), role: "group", "aria-label": "Feedback" },
    thumb(key, 1, current),
    thumb(key, -1, current),
    current && commentForm(current)
  );
}

function place(container, key) {
  const existing = container.querySelector(":scope > .llm-feedback");
  if (existing && existing.dataset.feedback === key && existing.dataset.state === stamp(key)) {
    return;
  }
  const fresh = controls(key);
  if (existing) {
    existing.replaceWith(fresh);
  } else {
    container.append(fresh);
  }
}

/** Add (or bring up to date) the controls of every answer and tool card in ``root``. */
export function decorateFeedback(root = ui.transcript) {
  root.querySelectorAll(".llm-msg-assistant[data-position] > .llm-msg-footer").forEach((footer) => {
    place(footer, `message:${footer.parentElement.dataset.position}`);
  });
  root.querySelectorAll(".llm-tool[data-call-pk] > .llm-tool-body").forEach((body) => {
    place(body, `call:${body.parentElement.dataset.callPk}`);
  });
}

async function load(conversationId) {
  loadedFor = conversationId;
  given.clear();
  try {
    const rows = await api("GET", `${conversationUrl(conversationId)}feedback/`);
    if (loadedFor !== conversationId) {
      return; // another conversation opened meanwhile
    }
    (rows || []).forEach((row) => {
      const key = keyOf(row);
      if (key) {
        given.set(key, { value: row.value, comment: row.comment || "" });
      }
    });
  } catch (error) {
    if (error.status !== 404) {
      showError(error);
    }
  }
  decorateFeedback();
}

async function send(key, value, comment) {
  const conversation = state.conversation;
  if (!conversation) {
    return;
  }
  const current = given.get(key);
  const url = feedbackUrl(conversation.id, key);
  try {
    if (comment === undefined && current && current.value === value) {
      await api("DELETE", url);
      given.delete(key);
    } else {
      const row = await api("PUT", url, {
        value,
        comment: comment === undefined ? (current && current.comment) || "" : comment,
      });
      given.set(key, { value: row.value, comment: row.comment || "" });
    }
  } catch (error) {
    showError(error);
  }
  decorateFeedback();
}

ui.transcript.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-feedback-value]");
  if (!button) {
    return;
  }
  event.preventDefault();
  const key = button.closest(".llm-feedback").dataset.feedback;
  send(key, Number(button.dataset.feedbackValue));
});

ui.transcript.addEventListener("submit", (event) => {
  const form = event.target.closest(".llm-feedback-comment");
  if (!form) {
    return;
  }
  event.preventDefault();
  const key = form.closest(".llm-feedback").dataset.feedback;
  const current = given.get(key);
  if (current) {
    send(key, current.value, form.elements.comment.value.trim());
  }
});

new MutationObserver(() => {
  const id = state.conversation && state.conversation.id;
  if (id && id !== loadedFor) {
    load(id);
  } else if (!id) {
    loadedFor = null;
    given.clear();
  }
  decorateFeedback();
}).observe(ui.transcript, { childList: true, subtree: true });
