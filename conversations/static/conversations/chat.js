/*
 * The chat page of django-llm-conversations: ES modules over the REST API,
 * no build step. This module wires the page together and starts it; each
 * concern lives in its own module under chat/ (api, sse, state, rendering,
 * composer, sidebar, search, ...).
 *
 * Keyboard: Ctrl+Shift+O (⌘⇧O) starts a new conversation, "/" puts the
 * cursor in the message box, Escape stops the answer being written.
 */

import { hideError } from "./chat/alerts.js";
import { applyComposer } from "./chat/composer.js";
import { idFromLocation, openConversation, positionFromLocation, startDraft, updateHeader } from "./chat/conversation.js";
import { copyText, root, ui } from "./chat/dom.js";
import { stop } from "./chat/follow.js";
import { closeDrawer, loadConversations, loadProfiles } from "./chat/sidebar.js";
import { state } from "./chat/state.js";
import "./chat/feedback.js";
import "./chat/search.js";

ui.newForm.addEventListener("submit", (event) => {
  event.preventDefault();
  startDraft(true);
});

ui.profile.addEventListener("change", () => {
  if (!state.conversation) {
    updateHeader();
  }
});

ui.alertClose.addEventListener("click", hideError);

ui.conversations.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-id]");
  if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return; // let the browser open it (new tab, ...)
  }
  event.preventDefault();
  closeDrawer();
  openConversation(link.dataset.id, true);
});

// Copy an answer (its Markdown) or one code block (its text).
ui.transcript.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) {
    return;
  }
  if (button.dataset.copy === "code") {
    copyText(button, button.closest(".llm-code").querySelector("pre").textContent);
  } else {
    const article = button.closest(".llm-msg[data-position]");
    const message = article && state.messages.get(Number(article.dataset.position));
    copyText(button, (message && message.content) || "");
  }
});

const typing = (target) => target.closest("input, textarea, select, [contenteditable=true]");

document.addEventListener("keydown", (event) => {
  const modifier = event.ctrlKey || event.metaKey;
  if (modifier && event.shiftKey && event.key.toLowerCase() === "o") {
    event.preventDefault();
    startDraft(true);
  } else if (event.key === "/" && !modifier && !event.altKey && !typing(event.target)) {
    event.preventDefault();
    ui.input.focus();
  } else if (event.key === "Escape" && !ui.stop.hidden && !event.defaultPrevented && !event.target.closest("dialog")) {
    event.preventDefault();
    stop().catch(() => {});
  }
});

window.addEventListener("popstate", () => {
  const id = idFromLocation();
  if (id) {
    openConversation(id, false, positionFromLocation());
  } else {
    startDraft(false);
  }
});

const initial = root.dataset.conversation;
if (initial) {
  state.conversation = { id: initial, title: ui.title.textContent, profile: null };
}
applyComposer();
(async () => {
  await loadProfiles();
  await loadConversations(null, false);
  if (initial) {
    await openConversation(initial, false, positionFromLocation());
  } else {
    updateHeader();
  }
})();
