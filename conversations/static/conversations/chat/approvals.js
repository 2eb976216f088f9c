/*
 * Held tool calls: the approvals this user may decide, and the decision.
 *
 * A run waiting for a decision keeps its event stream open, so the page opens
 * it before sending the decision and follows the resumed run live (its
 * answer streams, Stop shows). A decision that leaves another call of the
 * turn waiting does not resume the run; the page then stops following.
 */

import { hideError, setProgress, showError } from "./alerts.js";
import { api, apiRoot, pageItems } from "./api.js";
import { applyComposer, setBusy } from "./composer.js";
import { openConversation } from "./conversation.js";
import { ui } from "./dom.js";
import { follow } from "./follow.js";
import { followRun, progressSince, reportRun } from "./runs.js";
import { isCurrent, state } from "./state.js";
import { renderMessage, renderMessages } from "./transcript.js";

/** The held assistant messages of the open conversation. */
const heldMessages = () =>
  [...state.messages.values()].filter((m) => (m.tool_calls || []).some((c) => c.status === "awaiting_approval"));

/** Read the approvals this user may decide in the open conversation, and redraw held calls. */
export async function loadApprovals() {
  const conversation = state.conversation;
  const held = heldMessages();
  state.approvals = new Map();
  state.awaiting = null;
  if (!conversation || !held.length) {
    applyComposer();
    return;
  }
  // The list is paginated: follow its next links (pages of 100, the most it allows).
  const approvals = [];
  let url = `${apiRoot}approvals/?page_size=100`;
  while (url) {
    const data = await api("GET", url);
    if (!isCurrent(conversation.id)) {
      return;
    }
    approvals.push(...pageItems(data));
    url = data && data.next;
  }
  for (const approval of approvals) {
    if (approval.conversation === conversation.id) {
      state.approvals.set(Number(approval.tool_call.pk), approval);
    }
  }
  held.forEach(renderMessage);
  state.awaiting = state.approvals.size ? "yours" : "reviewer";
  applyComposer();
  setProgress(state.approvals.size ? "Waiting for your approval." : "Waiting for a reviewer.");
}

/** Approve or reject one held call, following the run live once it resumes. */
async function decide(pk, decision, reason) {
  const conversation = state.conversation;
  const approval = state.approvals.get(Number(pk));
  if (state.busy || !conversation || !approval) {
    return;
  }
  hideError();
  setBusy(true);
  setProgress(decision === "approve" ? "Approving…" : "Rejecting…");
  const since = state.lastPosition;
  const held = heldMessages().find((m) => m.tool_calls.some((c) => Number(c.pk) === Number(pk)));
  const stopFollowing = new AbortController();
  const following = follow({
    conversationId: conversation.id,
    run: { id: approval.run, status: "awaiting_approval" },
    heldAt: held ? held.position : undefined,
    signal: stopFollowing.signal,
    progress: (text) => isCurrent(conversation.id) && setProgress(text || progressSince(since)),
  });
  try {
    const body = decision === "reject" && reason.trim() ? { reason: reason.trim() } : undefined;
    const url = `${apiRoot}tool-calls/${encodeURIComponent(pk)}/${decision}/`;
    const answer = await api("POST", url, body).catch((error) => {
      stopFollowing.abort();
      throw error;
    });
    state.awaiting = null;
    applyComposer();
    if (answer && answer.run && answer.run.status === "awaiting_approval") {
      stopFollowing.abort(); // another call of the turn still waits
    }
    const followed = await following;
    let result = followed.ended ? followed : { run: answer && answer.run };
    if (result.run && result.run.status === "running") {
      result = await followRun(conversation.id, result.run, since);
    }
    if (isCurrent(conversation.id)) {
      renderMessages((result && result.messages) || []);
      await openConversation(conversation.id, false);
      reportRun(result && result.run);
    }
  } catch (error) {
    await following.catch(() => null);
    showError(error);
  } finally {
    setBusy(false);
  }
}

ui.transcript.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-decision]");
  const box = button && button.closest(".llm-approval");
  if (box) {
    const reason = box.querySelector(".llm-approval-reason");
    decide(box.dataset.pk, button.dataset.decision, reason ? reason.value : "").catch(showError);
  }
});
