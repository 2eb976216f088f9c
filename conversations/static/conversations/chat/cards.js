/*
 * Tool call cards: the call (name, arguments) with its result, and the
 * decision of a held call. While a run goes on, the cards of its calls stay
 * open so their results show as they come; once it ended they fold to one
 * line that sums the result up.
 */

import { buildAgent } from "./agents.js";
import { attachmentList } from "./attachments.js";
import { callStatusWord, formatDuration, oneLine, prettyJson } from "./format.js";
import { el, ui } from "./dom.js";
import { callStatus, state } from "./state.js";

const hasRawArguments = (call) =>
  call.raw_arguments !== null && call.raw_arguments !== undefined && call.raw_arguments !== "";

export const badge = (status) =>
  el("span", { className: `llm-badge llm-badge-${status}`, "data-status": status }, callStatusWord(status));

/** A card pairing one call with its result; ``open`` keeps a card the reader opened open. */
export function buildCard(call, open) {
  const result = state.results.get(call.id);
  const status = callStatus(call, Boolean(result));
  const duration = formatDuration(call.duration_ms);
  // A held call is open: its decision is what the user has to do next.
  const held = status === "awaiting_approval";
  const auto = !open && !held && state.busy && (status === "running" || status === "pending" || status === "answered");
  const summary = result && !state.busy ? oneLine(result.content) : "";
  return el(
    "details",
    {
      className: "llm-tool",
      "data-call-id": call.id,
      "data-call-pk": call.pk,
      "data-status": status,
      "data-auto-open": auto,
      open: open || held || auto,
    },
    el(
      "summary",
      null,
      // The spaces keep the summary readable as text (screen readers, copying).
      el("span", { className: "llm-tool-kind" }, "Tool call"),
      " ",
      el("code", { className: "llm-tool-name" }, call.name),
      " ",
      badge(status),
      duration && " ",
      duration && el("span", { className: "llm-tool-duration" }, duration),
      summary && " ",
      summary && el("span", { className: "llm-tool-summary" }, summary)
    ),
    el(
      "div",
      { className: "llm-tool-body" },
      el("h3", null, "Arguments"),
      hasRawArguments(call) && el("p", { className: "llm-help" }, "Not a JSON object, so the tool was not run:"),
      el(
        "pre",
        { className: "llm-tool-arguments" },
        hasRawArguments(call) ? call.raw_arguments : JSON.stringify(call.arguments || {}, null, 2)
      ),
      buildAgent(call),
      held && buildApproval(call),
      el("h3", null, "Result"),
      result
        ? el("pre", { className: "llm-tool-result" }, prettyJson(result.content || ""))
        : el(
            "p",
            { className: "llm-tool-waiting" },
            status === "cancelled" ? "Not run: the answer was stopped." : "Waiting for the result…"
          ),
      result && attachmentList(result.attachments)
    )
  );
}

/** The decision part of a held call: buttons when this user may decide it. */
function buildApproval(call) {
  const approval = state.approvals.get(call.pk);
  if (!approval) {
    return el("p", { className: "llm-approval llm-help" }, "Waiting for a reviewer’s decision on this turn.");
  }
  const reasonId = `llm-reason-${call.pk}`;
  return el(
    "div",
    { className: "llm-approval", "data-pk": call.pk },
    el("p", { className: "llm-help" }, "This call waits for your approval."),
    el("label", { for: reasonId, className: "llm-approval-label" }, "Reason for a rejection"),
    el("input", {
      id: reasonId,
      className: "llm-approval-reason",
      type: "text",
      maxLength: 2000,
      placeholder: "Optional; the model reads it",
    }),
    el(
      "div",
      { className: "llm-approval-buttons" },
      el("button", { type: "button", className: "llm-approve", "data-decision": "approve" }, "Approve"),
      el("button", { type: "button", className: "llm-reject llm-danger", "data-decision": "reject" }, "Reject")
    )
  );
}

export function findCard(callId) {
  return [...ui.transcript.querySelectorAll(".llm-tool")].find((card) => card.dataset.callId === callId);
}

/** Redraw the card of ``callId`` (its result arrived); false when it is not on the page. */
export function refreshCard(callId) {
  const card = findCard(callId);
  if (!card || !card.closest(".llm-msg[data-position]")) {
    return false;
  }
  const message = state.messages.get(Number(card.closest(".llm-msg").dataset.position));
  const call = (message.tool_calls || []).find((c) => c.id === callId);
  card.replaceWith(buildCard(call, card.open && !card.dataset.autoOpen));
  return true;
}

/** After a run: fold the cards it opened and show their one-line summaries. */
export function foldCards() {
  ui.transcript.querySelectorAll(".llm-tool[data-call-id]").forEach((card) => {
    if (card.closest(".llm-msg[data-position]")) {
      refreshCard(card.dataset.callId);
    }
  });
}
