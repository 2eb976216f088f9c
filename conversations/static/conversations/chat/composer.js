/*
 * The composer: sending a message and following the run that answers it.
 *
 * The POST asks for the run's event stream; a server that answers JSON
 * instead either ran the whole loop (201: the page polled GET
 * messages/?after=N meanwhile) or queued it for a worker (202: the page
 * follows GET runs/ID/events/). While a run goes on nothing else can be
 * sent; while one waits for a decision the box itself says why it is off.
 */

import { hideError, setProgress, showError } from "./alerts.js";
import { api, apiRoot, messagesUrl, pageItems, pageUrl, readAnswer, request, STREAM_ACCEPT } from "./api.js";
import { attachmentIds, clearFiles, hasFiles } from "./attachments.js";
import { decorate } from "./branches.js";
import { foldCards } from "./cards.js";
import { markCurrentInList, putFirstInList } from "./sidebar.js";
import { updateHeader } from "./conversation.js";
import { ui } from "./dom.js";
import { titleFrom } from "./format.js";
import { showRuns } from "./notes.js";
import { followRun, progressSince, reportRun, startPolling } from "./runs.js";
import { isEventStream } from "./sse.js";
import { composerState, isCurrent, state } from "./state.js";
import { dropPending, renderMessages, showPending } from "./transcript.js";

/** Enable or disable the composer from the state, with the reason shown under the box. */
export function applyComposer() {
  const view = composerState(state);
  ui.input.disabled = view.inputDisabled;
  ui.send.disabled = view.sendDisabled;
  ui.composerReason.textContent = view.reason;
  ui.composerReason.hidden = !view.reason;
  ui.composer.classList.toggle("llm-composer-locked", view.inputDisabled);
}

export function setBusy(busy) {
  state.busy = busy;
  ui.transcript.setAttribute("aria-busy", String(busy));
  applyComposer();
  if (!busy) {
    setProgress(state.awaiting ? ui.progress.textContent : "");
    foldCards(); // the run ended: its cards fold to one line each
  }
  decorate(); // no edit or regenerate while a run goes on
}

/** The open conversation, or a new one (titled after the message) for a draft. */
async function ensureConversation(content) {
  if (state.conversation) {
    return state.conversation;
  }
  const body = { title: titleFrom(content) };
  if (ui.profile.value) {
    body.profile = ui.profile.value;
  }
  const conversation = await api("POST", `${apiRoot}conversations/`, body);
  state.loadToken += 1;
  state.conversation = conversation;
  window.history.pushState({ conversation: conversation.id }, "", pageUrl(conversation.id));
  putFirstInList(conversation);
  markCurrentInList();
  updateHeader();
  return conversation;
}

export async function send(content) {
  const withFiles = hasFiles();
  if (state.busy || state.awaiting || (!content.trim() && !withFiles)) {
    return;
  }
  hideError();
  setBusy(true);
  setProgress(withFiles ? "Uploading files…" : "Sending…");
  const attachments = withFiles ? await attachmentIds() : [];
  if (!content.trim() && !attachments.length) {
    setBusy(false); // every file was refused; the alert says why
    return;
  }
  setProgress("Sending…");
  showPending(content);
  ui.input.value = "";
  const since = state.lastPosition;
  let conversation = null;
  try {
    conversation = await ensureConversation(content.trim() ? content : "Files");
    setProgress(progressSince(since));
    // Until the answer starts (the stream's headers, or the whole JSON of a
    // server that runs the loop before answering), polls show the progress.
    const poller = startPolling(conversation.id, since);
    let response;
    try {
      const body = attachments.length ? { content, attachments } : { content };
      response = await request("POST", messagesUrl(conversation.id), body, STREAM_ACCEPT);
      if (response.ok) {
        clearFiles(); // stored with the message
      }
    } finally {
      // Let a poll in flight land first, so it cannot overwrite the final state.
      await poller.stop();
    }
    let result;
    if (response.ok && isEventStream(response)) {
      result = await followRun(conversation.id, null, since, response);
    } else {
      result = await readAnswer(response);
    }
    if (result && result.run && result.run.status === "running") {
      // Answer 202: a worker runs the loop; follow its events.
      if (isCurrent(conversation.id)) {
        renderMessages(result.messages || []);
      }
      result = await followRun(conversation.id, result.run, since);
    }
    if (isCurrent(conversation.id)) {
      renderMessages((result && result.messages) || []);
      reportRun(result && result.run);
      if (state.pending) {
        // The answer did not include the user's message: read what is stored.
        renderMessages(pageItems(await api("GET", messagesUrl(conversation.id, since))));
        dropPending();
      }
    }
    putFirstInList(conversation);
    markCurrentInList();
  } catch (error) {
    showError(error);
    dropPending();
    await recover(conversation, since, content);
  } finally {
    setBusy(false);
    if (!ui.input.disabled) {
      ui.input.focus();
    }
  }
}

/**
 * After a failed send, show what is stored (a provider error can come after
 * the user's message was saved) and give the text back when it was not.
 */
async function recover(conversation, since, content) {
  if (conversation && isCurrent(conversation.id)) {
    try {
      renderMessages(pageItems(await api("GET", messagesUrl(conversation.id, since))));
      await showRuns(conversation.id, () => !isCurrent(conversation.id));
    } catch {
      // The alert already tells what went wrong.
    }
  }
  const stored = [...state.messages.values()].some((message) => message.position > since && message.role === "user");
  if (!stored && !ui.input.value) {
    ui.input.value = content;
  }
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send(ui.input.value);
});

ui.input.addEventListener("keydown", (event) => {
  // Enter sends; Shift+Enter (and Enter while an input method composes) adds a line.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send(ui.input.value);
  }
});
