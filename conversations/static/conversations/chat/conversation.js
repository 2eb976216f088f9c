/*
 * Opening a conversation (its messages, run notes, family and approvals; a
 * run still going on is followed), starting a draft, and the header with
 * rename and delete.
 */

import { hideError, showError } from "./alerts.js";
import { api, chatUrl, conversationUrl, messagesUrl, pageItems, pageUrl } from "./api.js";
import { loadApprovals } from "./approvals.js";
import { loadFamily } from "./branches.js";
import { applyComposer, setBusy } from "./composer.js";
import { ui } from "./dom.js";
import { showRuns } from "./notes.js";
import { followRun, reportRun } from "./runs.js";
import { closeDrawer, markCurrentInList, profileName, putFirstInList, removeFromList } from "./sidebar.js";
import { isCurrent, state } from "./state.js";
import { renderMessages, resetTranscript, revealMessage } from "./transcript.js";

export function updateHeader() {
  const open = Boolean(state.conversation);
  if (open) {
    ui.title.textContent = state.conversation.title || "Untitled conversation";
    ui.subtitle.textContent = profileName(state.conversation.profile);
    document.title = `${ui.title.textContent} · Chat`;
  } else {
    ui.title.textContent = "New conversation";
    ui.subtitle.textContent = ui.profile.value ? `Profile: ${profileName(ui.profile.value)}` : "";
    document.title = "Chat";
  }
  ui.titleActions.hidden = !open;
}

function closeRename() {
  ui.renameForm.hidden = true;
  ui.title.hidden = false;
}

/** Follow a run that was already running when the conversation was opened. */
async function attachToRun(conversationId, run) {
  setBusy(true);
  const since = state.lastPosition;
  try {
    const result = await followRun(conversationId, run, since);
    if (isCurrent(conversationId)) {
      renderMessages(result.messages);
      reportRun(result.run);
    }
  } catch (error) {
    if (isCurrent(conversationId)) {
      showError(error);
    }
  } finally {
    setBusy(false);
  }
}

/** Open conversation ``id``; ``reveal`` is a message position to bring into view. */
export async function openConversation(id, push, reveal) {
  const token = ++state.loadToken;
  const stale = () => token !== state.loadToken;
  hideError();
  closeRename();
  resetTranscript("Loading messages…");
  applyComposer();
  state.conversation = { id, title: ui.title.textContent, profile: null };
  markCurrentInList();
  closeDrawer();
  if (push) {
    const hash = reveal === undefined ? "" : `#message-${reveal}`;
    window.history.pushState({ conversation: id }, "", `${pageUrl(id)}${hash}`);
  }
  try {
    const conversation = await api("GET", conversationUrl(id));
    if (stale()) {
      return;
    }
    state.conversation = conversation;
    updateHeader();
    let url = messagesUrl(id);
    while (url) {
      const data = await api("GET", url);
      if (stale()) {
        return;
      }
      renderMessages(pageItems(data));
      url = data && data.next;
    }
    if (!state.messages.size) {
      resetTranscript("No messages yet. Ask something below.");
    }
    if (reveal !== undefined) {
      revealMessage(reveal);
    }
    await showRuns(id, stale);
    await loadFamily(id, stale);
    if (stale()) {
      return;
    }
    if (conversation.last_run && conversation.last_run.status === "running" && !state.busy) {
      attachToRun(conversation.id, conversation.last_run); // still being answered
    }
    await loadApprovals().catch(showError); // the transcript stays either way
  } catch (error) {
    if (!stale()) {
      resetTranscript("");
      showError(error);
    }
  }
}

export function startDraft(push) {
  state.loadToken += 1;
  state.conversation = null;
  hideError();
  closeRename();
  resetTranscript("Ask something below: your first message starts the conversation.");
  applyComposer();
  markCurrentInList();
  updateHeader();
  closeDrawer();
  if (push) {
    window.history.pushState({ conversation: null }, "", chatUrl);
  }
  ui.input.focus();
}

export function idFromLocation() {
  const path = window.location.pathname;
  return path.startsWith(chatUrl) ? decodeURIComponent(path.slice(chatUrl.length).replace(/\/$/, "")) : "";
}

/** The message position the address points at (``#message-N``), if any. */
export function positionFromLocation() {
  const match = /^#message-(\d+)$/.exec(window.location.hash);
  return match ? Number(match[1]) : undefined;
}

// Rename and delete --------------------------------------------------------------

ui.renameButton.addEventListener("click", () => {
  ui.renameInput.value = state.conversation.title || "";
  ui.title.hidden = true;
  ui.renameForm.hidden = false;
  ui.renameInput.focus();
  ui.renameInput.select();
});

ui.renameForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const conversation = state.conversation;
  try {
    const changed = await api("PATCH", conversationUrl(conversation.id), { title: ui.renameInput.value.trim() });
    if (isCurrent(conversation.id)) {
      state.conversation = { ...state.conversation, ...changed };
      updateHeader();
      closeRename();
    }
    putFirstInList(changed);
    markCurrentInList();
    ui.renameButton.focus();
  } catch (error) {
    showError(error);
  }
});

ui.renameForm.addEventListener("reset", () => {
  closeRename();
  ui.renameButton.focus();
});

ui.renameInput.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    event.preventDefault();
    ui.renameForm.reset();
  }
});

ui.deleteButton.addEventListener("click", () => {
  ui.deleteDialog.querySelector("[data-title]").textContent = state.conversation.title || "Untitled conversation";
  ui.deleteDialog.showModal();
});

ui.deleteDialog.addEventListener("close", async () => {
  const conversation = state.conversation;
  if (ui.deleteDialog.returnValue !== "delete" || !conversation) {
    return;
  }
  ui.deleteDialog.returnValue = "";
  try {
    await api("DELETE", conversationUrl(conversation.id));
    removeFromList(conversation.id);
    startDraft(true);
  } catch (error) {
    showError(error);
  }
});
