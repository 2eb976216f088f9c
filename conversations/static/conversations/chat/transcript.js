/*
 * The transcript: one article per stored message, in position order. Answers
 * are rendered Markdown; what users typed and what tools returned stay text.
 */

import { resetAgents } from "./agents.js";
import { attachmentList } from "./attachments.js";
import { decorate } from "./branches.js";
import { buildCard, refreshCard } from "./cards.js";
import { $, el, keepingScroll, scrollToEnd, ui } from "./dom.js";
import { prettyJson, tokenNote } from "./format.js";
import { renderMarkdown } from "./rich-text.js";
import { buildProviderTools, buildSources } from "./sources.js";
import { resetConversationState, state } from "./state.js";
import { markViewStart } from "./view-start.js";

const ROLE_LABELS = { user: "You", assistant: "Assistant", system: "System", tool: "Tool result" };
export const STOPPED = "cancelled"; // the finish reason of an answer cut short by Stop

/** The usage a stopped answer is counted with: its own, else its run's (the ledger's figure). */
function stoppedUsage(message) {
  const own = message.usage;
  if (own && (own.completion_tokens || own.total_tokens)) {
    return own;
  }
  const run = message.run && state.runs.get(message.run);
  return (run && run.usage) || own;
}

function buildFooter(message) {
  const stopped = message.finish_reason === STOPPED;
  const parts = [];
  if (message.model) {
    parts.push(message.model);
  }
  const tokens = tokenNote(stopped ? stoppedUsage(message) : message.usage, stopped);
  if (tokens) {
    parts.push(tokens);
  }
  return el(
    "div",
    { className: "llm-msg-footer" },
    parts.length && el("p", { className: "llm-msg-meta" }, parts.join(" · ")),
    message.content &&
      el("button", { type: "button", className: "llm-secondary llm-copy", "data-copy": "answer" }, "Copy answer")
  );
}

function buildMessage(message, previous) {
  const article = el(
    "article",
    {
      className: `llm-msg llm-msg-${message.role}`,
      id: `message-${message.position}`,
      tabindex: "-1",
      "data-position": message.position,
      "data-finish": message.finish_reason || null,
    },
    el("p", { className: "llm-msg-role" }, ROLE_LABELS[message.role] || message.role)
  );
  if (message.role === "tool") {
    // A result whose call is not on the page (should not happen): still shown.
    article.append(el("pre", { className: "llm-tool-result" }, prettyJson(message.content || "")));
    return article;
  }
  if (message.content) {
    const text = el("div", { className: "llm-msg-text" });
    if (message.role === "assistant") {
      renderMarkdown(text, message.content);
    } else {
      text.textContent = message.content;
    }
    article.append(text);
  }
  const files = attachmentList(message.attachments);
  if (files) {
    article.append(files);
  }
  const ran = buildProviderTools(message);
  const sources = buildSources(message);
  if (ran) {
    article.append(ran);
  }
  if (sources) {
    article.append(sources);
  }
  const calls = message.tool_calls || [];
  if (calls.length) {
    // Redrawing keeps the cards the reader opened open.
    const open = new Set(
      previous
        ? [...previous.querySelectorAll(".llm-tool[open]:not([data-auto-open])")].map((c) => c.dataset.callId)
        : []
    );
    article.append(el("div", { className: "llm-tools" }, ...calls.map((call) => buildCard(call, open.has(call.id)))));
  }
  if (message.role === "assistant") {
    article.append(buildFooter(message));
  }
  return article;
}

function insertInOrder(node, position) {
  const later = [...ui.transcript.querySelectorAll(".llm-msg[data-position]")].find(
    (other) => Number(other.dataset.position) > position
  );
  if (later) {
    ui.transcript.insertBefore(node, later);
  } else if (state.pending && state.pending.isConnected) {
    ui.transcript.insertBefore(node, state.pending); // the pending message stays last
  } else {
    ui.transcript.append(node);
  }
}

/** Show ``message`` (new, or a newer state of one on the page). */
export function renderMessage(message) {
  const position = Number(message.position);
  state.messages.set(position, message);
  state.lastPosition = Math.max(state.lastPosition, position);
  if (message.role === "user" && state.pending) {
    state.pending.remove();
    state.pending = null;
  }
  if (message.role === "tool" && message.tool_call_id) {
    state.results.set(message.tool_call_id, message);
    if (refreshCard(message.tool_call_id)) {
      return;
    }
  }
  const previous = ui.transcript.querySelector(`.llm-msg[data-position="${position}"]`);
  const node = buildMessage(message, previous);
  if (previous) {
    previous.replaceWith(node);
  } else {
    insertInOrder(node, position);
  }
}

export function renderMessages(messages) {
  if (messages.length) {
    const placeholder = $("llm-placeholder");
    if (placeholder) {
      placeholder.remove();
    }
  }
  keepingScroll(() => {
    [...messages].sort((a, b) => a.position - b.position).forEach(renderMessage);
    decorate();
    markViewStart();
  });
}

/** A message's own redraw (its run's usage arrived, a stopped answer's estimate). */
export function redrawPositions(positions) {
  positions.forEach((position) => {
    const message = state.messages.get(position);
    if (message) {
      renderMessage(message);
    }
  });
  decorate();
}

export function resetTranscript(text) {
  resetConversationState();
  resetAgents();
  ui.transcript.replaceChildren();
  if (text) {
    ui.transcript.append(el("p", { id: "llm-placeholder", className: "llm-placeholder" }, text));
  }
}

export function showPending(content) {
  const placeholder = $("llm-placeholder");
  if (placeholder) {
    placeholder.remove();
  }
  state.pending = el(
    "article",
    { className: "llm-msg llm-msg-user llm-pending" },
    el("p", { className: "llm-msg-role" }, "You"),
    el("div", { className: "llm-msg-text" }, content)
  );
  ui.transcript.append(state.pending);
  scrollToEnd();
}

export function dropPending() {
  if (state.pending) {
    state.pending.remove();
    state.pending = null;
  }
}

/** Bring message ``position`` into view and mark it (a search result opened it). */
export function revealMessage(position) {
  const article = ui.transcript.querySelector(`.llm-msg[data-position="${position}"]`);
  if (!article) {
    return false;
  }
  ui.transcript.querySelectorAll(".llm-found").forEach((node) => node.classList.remove("llm-found"));
  article.classList.add("llm-found");
  article.scrollIntoView({ block: "center" });
  article.focus({ preventScroll: true });
  return true;
}
