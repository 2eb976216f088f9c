/*
 * Waiting for a run to end: live over its events when they can be read, else
 * by polling; then reading what it stored and saying how it ended.
 */

import { setProgress, showError } from "./alerts.js";
import { loadApprovals } from "./approvals.js";
import { api, conversationUrl, messagesUrl, pageItems, runUrl } from "./api.js";
import { follow } from "./follow.js";
import { markRun } from "./notes.js";
import { describeProgress, isCurrent, state } from "./state.js";
import { renderMessage, renderMessages } from "./transcript.js";

const POLL_MS = 700;
const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

/** The status line's text for a run that started after message ``since``. */
export const progressSince = (since) =>
  describeProgress([...state.messages.values()], (id) => state.results.has(id), since);

/** Poll new messages of ``id`` until ``stop()``, which resolves once no poll is in flight. */
export function startPolling(id, since) {
  let active = true;
  let timer = null;
  let inFlight = Promise.resolve();
  const tick = () => {
    inFlight = (async () => {
      try {
        const data = await api("GET", messagesUrl(id, state.lastPosition));
        if (active && isCurrent(id)) {
          renderMessages(pageItems(data));
          setProgress(progressSince(since));
        }
      } catch {
        // Progress is a nicety: the POST reports what matters.
      }
      if (active) {
        timer = window.setTimeout(tick, POLL_MS);
      }
    })();
  };
  timer = window.setTimeout(tick, POLL_MS);
  return {
    stop() {
      active = false;
      window.clearTimeout(timer);
      return inFlight;
    },
  };
}

/** Polling fallback: wait for the run to end, showing new messages meanwhile. */
async function pollRun(conversationId, run, since) {
  while (run.status === "running") {
    await sleep(POLL_MS);
    run = await api("GET", runUrl(run.id));
    if (isCurrent(conversationId)) {
      renderMessages(pageItems(await api("GET", messagesUrl(conversationId, state.lastPosition))));
      setProgress(progressSince(since));
    }
  }
  return run;
}

/** A newer state of one call (from an event): update it in its assistant message. */
export function updateCall(call, position) {
  let message = position !== undefined ? state.messages.get(Number(position)) : undefined;
  if (!message) {
    message = [...state.messages.values()].find((m) => (m.tool_calls || []).some((c) => c.id === call.id));
  }
  if (!message) {
    return;
  }
  // An event's copy of a call may not name its agent's conversation: the stored one keeps it.
  const merged = (c) => ({ ...call, agent_conversation: call.agent_conversation || c.agent_conversation });
  message.tool_calls = (message.tool_calls || []).map((c) => (c.id === call.id ? merged(c) : c));
  renderMessage(message);
}

/** Wait for a run to end, live when its events can be read; then read what it stored. */
export async function followRun(conversationId, run, since, response) {
  const progress = (text) => isCurrent(conversationId) && setProgress(text || progressSince(since));
  let followed = await follow({ conversationId, run, response, progress });
  if (!followed.ended) {
    let known = followed.run;
    if (!known.id) {
      known = (await api("GET", conversationUrl(conversationId))).last_run || { status: "completed" };
    }
    followed = { run: known.status === "running" ? await pollRun(conversationId, known, since) : known };
  }
  const data = await api("GET", messagesUrl(conversationId, since));
  return { run: followed.run, messages: pageItems(data) };
}

/** Say how a run ended: a note for an unsuccessful one, the decision for a held one. */
export function reportRun(run) {
  if (!run) {
    return;
  }
  if (run.id && run.status !== "running") {
    markRun(run);
  }
  if (run.status === "completed" || run.status === "running") {
    return;
  }
  if (run.status === "awaiting_approval") {
    loadApprovals().catch(showError);
    return;
  }
  if (run.status === "cancelled") {
    return; // asked for: the note in the transcript says it
  }
  // Worded as the API's error answer of a failed run: its message, then [its code].
  showError({
    detail: run.error_message || `The run ended with status “${run.status}”.`,
    code: run.error_code || "",
  });
}
