/*
 * Edits, regenerations and the version switches. An edit or a regeneration
 * never changes a conversation: the API copies the start of it into a new
 * branch and answers there, and the page opens the branch. The family
 * (GET branches/) gives each member's source and cut.
 */

import { hideError, setProgress, showError } from "./alerts.js";
import { api, conversationUrl, readAnswer, request, STREAM_ACCEPT } from "./api.js";
import { setBusy } from "./composer.js";
import { openConversation } from "./conversation.js";
import { el, ui } from "./dom.js";
import { followRun, reportRun } from "./runs.js";
import { isEventStream } from "./sse.js";
import { branchSwitches, isCurrent, state } from "./state.js";
import { renderMessage } from "./transcript.js";

export async function loadFamily(id, stale) {
  try {
    const family = await api("GET", `${conversationUrl(id)}branches/`);
    if (!stale()) {
      state.family = Array.isArray(family) ? family : [];
      decorate();
    }
  } catch {
    // Without the family the page still works; there is just no switch.
  }
}

function buildSwitch(position, choice) {
  const index = choice.options.findIndex((option) => option.id === choice.current);
  const go = (step) => {
    const target = choice.options[(index + step + choice.options.length) % choice.options.length];
    if (!state.busy && target && target.id !== state.conversation.id) {
      openConversation(target.id, true);
    }
  };
  const button = (label, text, step) =>
    // Disabled while a run of the page goes on (setBusy redraws them when it ends).
    el("button", { type: "button", className: "llm-secondary", "aria-label": label, disabled: state.busy, onclick: () => go(step) }, text);
  return el(
    "nav",
    { className: "llm-branch-switch", "aria-label": `Versions of message ${position + 1}` },
    button("Previous version", "‹", -1),
    el("span", { className: "llm-branch-count" }, `${index + 1} / ${choice.options.length}`),
    button("Next version", "›", 1)
  );
}

const actions = (...buttons) => el("p", { className: "llm-msg-actions" }, ...buttons);

/** The edit and regenerate buttons and the version switches, redrawn after each change. */
export function decorate() {
  ui.transcript.querySelectorAll(".llm-msg-actions, .llm-branch-switch").forEach((node) => node.remove());
  if (!state.conversation || !state.conversation.id) {
    return;
  }
  const articles = [...ui.transcript.querySelectorAll(".llm-msg[data-position]")];
  const switches = branchSwitches(state.family || [], state.conversation.id);
  for (const article of articles) {
    const choice = switches.get(Number(article.dataset.position));
    if (choice && choice.options.length > 1) {
      article.append(buildSwitch(Number(article.dataset.position), choice));
    }
  }
  if (state.busy || state.awaiting) {
    return;
  }
  for (const article of articles) {
    if (article.classList.contains("llm-msg-user") && !article.querySelector("form")) {
      const position = Number(article.dataset.position);
      const edit = () => startEdit(article, position);
      article.append(actions(el("button", { type: "button", className: "llm-secondary", onclick: edit }, "Edit")));
    }
  }
  const last = articles[articles.length - 1];
  if (last && last.classList.contains("llm-msg-assistant")) {
    last.append(actions(el("button", { type: "button", className: "llm-secondary", onclick: regenerate }, "Regenerate")));
  }
}

function startEdit(article, position) {
  const message = state.messages.get(position);
  const box = el("textarea", { className: "llm-edit-box", rows: 3, "aria-label": "Edited message" });
  box.value = (message && message.content) || "";
  const cancel = () => {
    renderMessage(message);
    decorate();
  };
  const form = el(
    "form",
    { className: "llm-edit" },
    box,
    el("button", { type: "submit" }, "Send in a new branch"),
    el("button", { type: "button", className: "llm-secondary", onclick: cancel }, "Cancel")
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (box.value.trim()) {
      branchTurn(`${conversationUrl(state.conversation.id)}messages/${position}/edit/`, { content: box.value });
    }
  });
  article.querySelectorAll(".llm-msg-text, .llm-msg-actions").forEach((node) => node.remove());
  article.append(form);
  box.focus();
}

function regenerate() {
  branchTurn(`${conversationUrl(state.conversation.id)}regenerate/`, undefined);
}

/** The conversation id at the end of an API URL (the ``Location`` of a new branch). */
function idFromApiUrl(url) {
  const parts = new URL(url, window.location.href).pathname.split("/").filter(Boolean);
  return decodeURIComponent(parts[parts.length - 1] || "");
}

/**
 * POST an edit or a regeneration and open the branch it answers in. The
 * server streams the branch's run when it can (its ``Location`` names the
 * branch): the branch opens at once and the answer grows there. Otherwise
 * the JSON answer names the branch.
 */
async function branchTurn(url, body) {
  if (state.busy) {
    return;
  }
  hideError();
  setBusy(true);
  setProgress("Answering in a new branch…");
  let branchId = null;
  let opened = false;
  let result = null;
  try {
    const response = await request("POST", url, body, STREAM_ACCEPT);
    if (response.ok && isEventStream(response) && response.headers.get("Location")) {
      branchId = idFromApiUrl(response.headers.get("Location"));
      opened = true;
      await openConversation(branchId, true);
      result = await followRun(branchId, null, state.lastPosition, response);
    } else {
      result = await readAnswer(response);
      branchId = result.conversation.id;
      if (result.run && result.run.status === "running") {
        // Queued for a worker: follow its events in the branch.
        opened = true;
        await openConversation(branchId, true);
        result = await followRun(branchId, result.run, state.lastPosition);
      }
    }
  } catch (error) {
    showError(error);
  } finally {
    setBusy(false);
  }
  if (!branchId) {
    decorate();
    return;
  }
  if (!opened) {
    await openConversation(branchId, true);
  } else if (isCurrent(branchId)) {
    await openConversation(branchId, false); // the stored answer, with the branch switches
  } else {
    return; // the user went elsewhere meanwhile
  }
  reportRun(result && result.run);
}
