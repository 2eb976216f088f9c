/*
 * Pure text helpers of the chat page: how statuses, durations, token counts
 * and dates read. No DOM here, so the unit tests import this module as is.
 */

/** Tool call statuses as words (the API's values stay in ``data-status``). */
export const CALL_STATUS_WORDS = {
  pending: "Pending",
  running: "Running",
  streaming: "Streaming",
  answered: "Answered",
  succeeded: "Succeeded",
  failed: "Failed",
  rejected: "Rejected",
  interrupted: "Interrupted",
  // A call of a stopped turn never ran.
  cancelled: "Skipped",
  awaiting_approval: "Waiting for approval",
  timed_out: "Timed out",
};

/** Run statuses the transcript marks with a note, and how the note starts. */
export const RUN_OUTCOMES = {
  failed: "Run failed",
  cancelled: "Stopped",
  interrupted: "Run interrupted",
  budget_exhausted: "Run stopped: a budget is used up",
  max_iterations: "Run stopped at its iteration limit",
};

/** Run statuses as words, for the status line and the conversation header. */
export const RUN_STATUS_WORDS = {
  running: "Running",
  completed: "Completed",
  awaiting_approval: "Waiting for approval",
  ...RUN_OUTCOMES,
};

export const callStatusWord = (status) => CALL_STATUS_WORDS[status] || String(status).replace(/_/g, " ");

export function formatDuration(ms) {
  if (ms === null || ms === undefined) {
    return "";
  }
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** JSON objects and arrays pretty-printed; any other text as it is. */
export function prettyJson(text) {
  try {
    const value = JSON.parse(text);
    if (value !== null && typeof value === "object") {
      return JSON.stringify(value, null, 2);
    }
  } catch {
    // Not JSON.
  }
  return text;
}

/** One line of at most ``length`` characters: a tool result in a collapsed card. */
export function oneLine(text, length = 80) {
  let flat = String(text || "");
  try {
    flat = JSON.stringify(JSON.parse(flat));
  } catch {
    // Not JSON: its own words.
  }
  flat = flat.replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}

/** Why the run ended, after its outcome: "(after 5 iterations, code): message". */
export function describeRun(run) {
  const parts = [];
  if (run.status === "max_iterations" && run.max_iterations) {
    parts.push(`after ${run.max_iterations} iterations`);
  }
  if (run.error_code && run.status !== "cancelled") {
    parts.push(run.error_code);
  }
  const reason = parts.length ? ` (${parts.join(", ")})` : "";
  return run.error_message && run.status !== "cancelled" ? `${reason}: ${run.error_message}` : `${reason}.`;
}

const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

/**
 * The meta line's token part. A stopped answer's count is an estimate unless
 * the API says otherwise (``usage.estimated`` false): "about 42 tokens, stopped".
 */
export function tokenNote(usage, stopped) {
  const count = usage ? (usage.completion_tokens ?? usage.total_tokens) : null;
  const shown = stopped ? count : usage && usage.total_tokens;
  if (shown === null || shown === undefined) {
    return stopped ? "stopped" : "";
  }
  if (!stopped) {
    return plural(shown, "token");
  }
  const about = usage.estimated === false ? "" : "about ";
  return `${about}${plural(shown, "token")}, stopped`;
}

/** A conversation title from the first line of its first message. */
export function titleFrom(content, length = 80) {
  const line = content.trim().split("\n")[0].trim();
  return line.length > length ? `${line.slice(0, length - 1)}…` : line;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const startOfDay = (date) => new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();

/** The sidebar group of a conversation updated at ``when`` (local time), seen at ``now``. */
export function dateGroup(when, now = new Date()) {
  const date = new Date(when);
  if (Number.isNaN(date.getTime())) {
    return "Older";
  }
  const days = Math.round((startOfDay(now) - startOfDay(date)) / DAY_MS);
  if (days <= 0) {
    return "Today";
  }
  if (days === 1) {
    return "Yesterday";
  }
  if (days < 7) {
    return "Previous 7 days";
  }
  if (days < 30) {
    return "Previous 30 days";
  }
  return "Older";
}

/** Items grouped in order of appearance: [[label, [items...]], ...] (items come newest first). */
export function groupByDate(items, dateOf, now = new Date()) {
  const groups = new Map();
  for (const item of items) {
    const label = dateGroup(dateOf(item), now);
    if (!groups.has(label)) {
      groups.set(label, []);
    }
    groups.get(label).push(item);
  }
  return [...groups.entries()];
}

/** The marker before the first message the model is sent, when earlier ones are left out. */
export const VIEW_NOTES = {
  cut: "Earlier messages are not sent to the model",
  summarized: "Earlier messages are summarised for the model",
};

/**
 * Where the model's view begins, from the newest answer whose call recorded its view
 * (``context_view``): its first position and the note's words, or null when the model was
 * sent the whole history.
 */
export function viewStart(messages) {
  let latest = null;
  for (const message of messages) {
    if (message.role === "assistant" && message.context_view && (!latest || message.position > latest.position)) {
      latest = message;
    }
  }
  const view = latest && latest.context_view;
  if (!view || !view.first_position) {
    return null;
  }
  return { position: view.first_position, text: view.summarized ? VIEW_NOTES.summarized : VIEW_NOTES.cut };
}
