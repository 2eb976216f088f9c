/*
 * Notes for runs that ended other than ``completed``, placed after their last
 * message (also after a reload: the page reads the conversation's unsuccessful
 * runs). Reading a run also gives a stopped answer its token estimate.
 */

import { api, conversationUrl } from "./api.js";
import { el, ui } from "./dom.js";
import { RUN_OUTCOMES, describeRun } from "./format.js";
import { state } from "./state.js";
import { redrawPositions, STOPPED } from "./transcript.js";

const MARKED = Object.keys(RUN_OUTCOMES);

/** Put the note of an unsuccessful ``run`` after its last message (replacing an older note). */
export function markRun(run) {
  if (!run || !run.id) {
    return;
  }
  state.runs.set(run.id, run);
  const messages = [...state.messages.values()];
  const own = messages.filter((message) => message.run === run.id);
  // A stopped answer counts its tokens with its run's figure when it has none of its own.
  redrawPositions(own.filter((m) => m.finish_reason === STOPPED).map((m) => m.position));
  if (!MARKED.includes(run.status)) {
    return;
  }
  ui.transcript.querySelectorAll(".llm-run").forEach((node) => {
    if (node.dataset.runId === run.id) {
      node.remove();
    }
  });
  const note = el(
    "div",
    { className: `llm-run llm-run-${run.status}`, "data-run-id": run.id, "data-status": run.status, role: "note" },
    el("strong", null, RUN_OUTCOMES[run.status]),
    describeRun(run)
  );
  // A run without messages of its own (it failed before storing any) goes by its start.
  const candidates = own.length
    ? own
    : messages.filter((message) => message.created_at && message.created_at <= run.started_at);
  const last = candidates.reduce((a, b) => (a && a.position > b.position ? a : b), null);
  let anchor = last && ui.transcript.querySelector(`.llm-msg[data-position="${last.position}"]`);
  if (!anchor) {
    const first = ui.transcript.querySelector(".llm-msg[data-position]");
    if (first && !own.length && messages.length) {
      first.before(note);
    } else {
      ui.transcript.append(note);
    }
    return;
  }
  while (anchor.nextElementSibling && anchor.nextElementSibling.classList.contains("llm-run")) {
    anchor = anchor.nextElementSibling;
  }
  anchor.after(note);
}

/** Notes for the conversation's unsuccessful runs (after its messages were shown). */
export async function showRuns(conversationId, stale) {
  let url = `${conversationUrl(conversationId)}runs/?status=${MARKED.join(",")}`;
  while (url) {
    const data = await api("GET", url);
    if (stale()) {
      return;
    }
    ((data && data.results) || []).forEach(markRun);
    url = data && data.next;
  }
}
