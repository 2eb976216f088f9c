/*
 * The page's state and its pure transitions: what the composer allows, which
 * live events are shown, how far a run has got, where the version switches
 * go. Nothing here touches the DOM, so the unit tests import it as is.
 */

export const state = {
  conversation: null, // {id, title, profile, ...} of the open conversation; null for a draft
  profiles: new Map(), // slug -> profile
  messages: new Map(), // position -> message, of the open conversation
  results: new Map(), // tool_call_id -> tool message, of the open conversation
  approvals: new Map(), // tool call pk -> pending approval the user may decide
  runs: new Map(), // run id -> run, of the open conversation (those the page has read)
  lastPosition: -1,
  busy: false,
  awaiting: null, // "yours" | "reviewer" while the open conversation's run waits for a decision
  pending: null, // the element showing a user message not stored yet
  nextConversations: null,
  loadToken: 0, // bumped whenever another conversation is opened
  family: [], // the open conversation's family (GET branches/)
};

export const isCurrent = (id) => Boolean(state.conversation) && state.conversation.id === id;

/** Forget the open conversation's messages (another one opens, or a draft starts). */
export function resetConversationState() {
  state.family = [];
  state.messages = new Map();
  state.results = new Map();
  state.runs = new Map();
  state.approvals = new Map();
  state.awaiting = null;
  state.lastPosition = -1;
  state.pending = null;
}

/**
 * What the composer allows: while a run is followed nothing can be sent, and
 * while a run waits for a decision the box itself is disabled with the reason.
 */
export function composerState({ busy, awaiting }) {
  if (awaiting) {
    const reason =
      awaiting === "yours"
        ? "Waiting for approval: approve or reject the held tool call above to continue."
        : "Waiting for approval: a reviewer has to decide the held tool call before you can continue.";
    return { inputDisabled: true, sendDisabled: true, reason };
  }
  return { inputDisabled: false, sendDisabled: Boolean(busy), reason: "" };
}

/** A call's status as shown: a poll may read the call before its result was stored. */
export function callStatus(call, hasResult) {
  const status = call.status || "pending";
  if (hasResult && (status === "pending" || status === "running")) {
    return "answered";
  }
  return status;
}

/**
 * Whether a live event with ``seq`` is newer than what is shown (``shown``).
 * A snapshot (``inflight``) not newer than what was shown while no answer is
 * streaming belongs to an answer whose stored turn already replaced it.
 */
export function acceptsLive({ kind, seq, shown, active }) {
  const number = Number(seq);
  if (!Number.isFinite(number)) {
    return true;
  }
  if (kind === "inflight") {
    return active || number > shown;
  }
  return number > shown;
}

/**
 * Whether an answer may be streaming after the stored ``messages`` (position ->
 * message). A model is asked only after a user message or a tool result, so
 * while the newest stored message is an assistant turn, any delta or snapshot
 * of an answer in flight belongs to the answer that turn already replaced
 * (the rows can be read before the last deltas of the same answer arrive).
 */
export function answerMayStream(messages, lastPosition) {
  const last = messages.get(lastPosition);
  return !last || last.role !== "assistant";
}

/** What the current run has done, from the messages after ``since``. */
export function describeProgress(messages, hasResult, since) {
  const names = [];
  let answered = 0;
  for (const message of messages) {
    if (message.position > since && message.role === "assistant") {
      for (const call of message.tool_calls || []) {
        names.push(call.name);
        answered += hasResult(call.id) ? 1 : 0;
      }
    }
  }
  if (!names.length) {
    return "Waiting for the model…";
  }
  const calls = names.length === 1 ? "1 tool call" : `${names.length} tool calls`;
  return `Working… ${calls} (${names.join(", ")}), ${answered} answered.`;
}

// Branches: an edit or a regeneration answers in a new branch. A branch
// differs from its source from ``forked_at_position + 1`` on (from 0 when
// nothing was copied), which is where the "2 / 3" switch is shown.

const divergence = (conversation) =>
  conversation.forked_at_position === null ? 0 : conversation.forked_at_position + 1;

/** position -> {options, current}: the conversations to switch between at that message. */
export function branchSwitches(family, currentId) {
  const byId = new Map(family.map((member) => [member.id, member]));
  const childrenAt = (parentId, position) =>
    family.filter((member) => member.forked_from === parentId && divergence(member) === position);
  const switches = new Map();
  let member = byId.get(currentId);
  let limit = Infinity; // positions from here on belong to a descendant already seen
  while (member) {
    const parent = member.forked_from ? byId.get(member.forked_from) : undefined;
    const low = parent ? divergence(member) : 0;
    for (const child of family) {
      const position = child.forked_from === member.id ? divergence(child) : -1;
      if (position >= low && position < limit && !switches.has(position)) {
        switches.set(position, { options: [member, ...childrenAt(member.id, position)], current: member.id });
      }
    }
    if (parent && low < limit) {
      const options = [parent, ...childrenAt(parent.id, low)];
      for (const child of childrenAt(member.id, low)) {
        options.push(child);
      }
      switches.set(low, { options, current: member.id });
    }
    limit = Math.min(limit, low);
    member = parent;
  }
  return switches;
}
