/*
 * Following a run over its Server-Sent Events (GET runs/ID/events/, or the
 * stream a POST answered with). When the connection drops, the page
 * reconnects with the id of the last stored event it saw; the server replays
 * what came after it, then one ``inflight`` snapshot of the answer being
 * streamed, then live deltas. While a run is followed, Stop asks the API to
 * cancel it. A run no process has taken yet (``queued``) says so until a
 * worker claims it.
 */

import { setProgress, showError } from "./alerts.js";
import { agentEvent } from "./agents.js";
import { api, runUrl } from "./api.js";
import { refreshCard } from "./cards.js";
import { updateCall } from "./runs.js";
import { renderMessages } from "./transcript.js";
import { isEventStream, readEventStream } from "./sse.js";
import { answerMayStream, isCurrent, state } from "./state.js";
import { LiveTurn } from "./live.js";
import { ui } from "./dom.js";

const RETRY_MS = 1000;
const MAX_FAILURES = 5; // consecutive failed (re)connections before giving up on the stream
const QUEUE_POLL_MS = 1500;
const STOP_ATTEMPTS = 3;

const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));
const live = new LiveTurn();
let following = null; // {run, conversationId, lastId, progress} of the run followed now
let queueTimer = null;

function watchQueue(run) {
  window.clearTimeout(queueTimer);
  if (!run || !run.queued || run.status !== "running") {
    return;
  }
  setProgress("Queued: waiting for a worker to take the run…");
  queueTimer = window.setTimeout(async () => {
    if (!following || following.run.id !== run.id) {
      return;
    }
    try {
      setRun(await api("GET", runUrl(run.id)));
    } catch {
      watchQueue(run); // try again; the stream reports what matters
    }
  }, QUEUE_POLL_MS);
}

function setRun(run) {
  if (!following || !run || !run.id) {
    return;
  }
  const waited = Boolean(following.run.queued);
  following.run = { ...following.run, ...run };
  ui.stop.hidden = !(following.run.status === "running" && isCurrent(following.conversationId));
  // Waiting is not working: no spinner while no process has the run.
  ui.progress.classList.toggle("llm-progress-queued", Boolean(following.run.queued));
  if (following.run.queued) {
    watchQueue(following.run);
  } else {
    window.clearTimeout(queueTimer);
    if (waited) {
      following.progress(live.active ? "Answering…" : ""); // a worker took it
    }
  }
}

/** Ask the API to stop the followed run (Stop, or the Escape key). */
export async function stop() {
  const run = following && following.run;
  if (!run || !run.id || ui.stop.hidden || ui.stop.disabled) {
    return;
  }
  ui.stop.disabled = true;
  setProgress("Stopping…");
  // Asking twice is harmless, so a transient failure is tried again before it is reported.
  for (let attempt = 1; ; attempt += 1) {
    try {
      setRun(await api("POST", `${runUrl(run.id)}cancel/`));
      return;
    } catch (error) {
      if (error.code === "run_not_running") {
        return; // it ended meanwhile: its events tell how
      }
      const transient = error.status === 0 || error.status >= 500;
      if (!transient || attempt >= STOP_ATTEMPTS) {
        ui.stop.disabled = false;
        throw error;
      }
    }
    await sleep(RETRY_MS / 2);
  }
}

/** Handle one event; a value other than ``undefined`` ends the follow with it. */
function dispatch(event) {
  let data;
  try {
    data = JSON.parse(event.data);
  } catch {
    return undefined;
  }
  if (event.id !== null && event.id !== "" && following) {
    following.lastId = event.id;
  }
  const type = event.type;
  if (type === "run_finished") {
    live.clear();
    setRun(data.run);
    return data.run;
  }
  const deciding = following.heldAt !== undefined && Number(data.position) === following.heldAt;
  if (type === "approval.requested" && !(data.approval && data.approval.decision) && !deciding) {
    // A replayed request of a turn decided before (its decision is set) is history, and
    // so is the request of the turn the user is deciding now (the page follows its resumption).
    live.clear();
    return { ...following.run, status: "awaiting_approval" };
  }
  if (type === "run_started") {
    setRun(data.run);
  } else if (following.run.queued && type !== "approval.decided") {
    setRun({ queued: false }); // something happened: a process has the run
  }
  if (!isCurrent(following.conversationId)) {
    return undefined;
  }
  const streaming = type === "text.delta" || type === "reasoning.delta" || type === "tool_call.delta";
  if ((streaming || type === "inflight") && !answerMayStream(state.messages, state.lastPosition)) {
    // Late: the stored turn that replaced this answer's bubble was read first.
  } else if (streaming) {
    live.delta(type, data);
  } else if (type === "inflight") {
    live.replace(data);
  } else if (type === "run_started") {
    if (data.message) {
      renderMessages([data.message]);
    }
  } else if (type === "assistant_turn") {
    live.clear();
    renderMessages([data.message]);
  } else if (type === "tool_call_started") {
    updateCall(data.call, data.position);
  } else if (type === "tool_call_finished") {
    updateCall(data.call);
    renderMessages([data.message]);
  } else if (type.startsWith("agent.")) {
    const callId = agentEvent(type, data);
    if (callId) {
      refreshCard(callId);
    }
  }
  if (type === "approval.decided") {
    ui.stop.hidden = !isCurrent(following.conversationId);
  }
  if (live.active && live.node.nextElementSibling) {
    // Keep the bubble last: stored messages may have been appended after it.
    ui.transcript.append(live.node);
  }
  if (!following.run.queued) {
    following.progress(live.active ? "Answering…" : "");
  }
  return undefined;
}

function connect() {
  const headers = { Accept: "text/event-stream" };
  if (following.lastId !== null) {
    headers["Last-Event-ID"] = following.lastId;
  }
  const init = { headers, credentials: "same-origin", signal: following.signal };
  return fetch(`${runUrl(following.run.id)}events/`, init);
}

/**
 * Follow a run until it ends or waits for an approval; resolves with
 * ``{run, ended}``: ``ended`` is false when its events could not be read
 * (``run`` is then what is known of it, ``{}`` at worst: the caller polls).
 * ``response`` is an open event stream of the run (the POST's), ``run`` what
 * is known of it; at least one of them is needed. ``progress(text)`` reports
 * progress (an empty text: whatever the caller shows by default).
 *
 * While the user decides the turn held at position ``heldAt``, its requests
 * do not end the follow; ``signal`` ends it (the decision did not resume the
 * run: another call of the turn still waits).
 */
export async function follow({ conversationId, run, response, progress, heldAt, signal }) {
  following = { conversationId, run: run || {}, lastId: null, progress, heldAt, signal };
  live.seq = -1; // a run's deltas count from its start
  ui.stop.disabled = false;
  setRun(run);
  let failures = 0;
  try {
    for (;;) {
      let outcome;
      try {
        if (!response) {
          if (!following.run.id) {
            return { run: following.run, ended: false };
          }
          response = await connect();
        }
        if (response.status === 204) {
          // Nothing left to send: the run ended and its events were all seen.
          return { run: await api("GET", runUrl(following.run.id)), ended: true };
        }
        if (response.ok && isEventStream(response)) {
          await readEventStream(response, (event) => {
            outcome = dispatch(event);
            failures = 0;
            return outcome !== undefined;
          });
        } else if (response.status < 500 && response.status !== 429) {
          // Refused (404, 403, ...): polling will tell what is going on.
          return { run: following.run, ended: false };
        }
      } catch {
        // A network error: reconnect as below.
      }
      if (signal && signal.aborted) {
        return { run: { ...following.run, status: "awaiting_approval" }, ended: true };
      }
      if (outcome !== undefined) {
        return { run: outcome, ended: true };
      }
      response = null;
      failures += 1;
      if (failures > MAX_FAILURES) {
        return { run: following.run, ended: false };
      }
      await sleep(RETRY_MS * failures);
    }
  } finally {
    window.clearTimeout(queueTimer);
    live.clear();
    ui.stop.hidden = true;
    ui.progress.classList.remove("llm-progress-queued");
    following = null;
  }
}

ui.stop.addEventListener("click", () => {
  stop().catch(showError);
});
