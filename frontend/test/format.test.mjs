// How statuses, token counts, summaries and dates read on the page.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  callStatusWord,
  dateGroup,
  describeRun,
  groupByDate,
  oneLine,
  tokenNote,
  viewStart,
} from "../../conversations/static/conversations/chat/format.js";

test("statuses read as words and a call of a stopped turn reads as skipped", () => {
  assert.equal(callStatusWord("awaiting_approval"), "Waiting for approval");
  assert.equal(callStatusWord("cancelled"), "Skipped");
  assert.equal(callStatusWord("something_new"), "something new");
});

test("a stopped answer's count reads as an estimate unless the API says it is exact", () => {
  assert.equal(tokenNote({ completion_tokens: 42, total_tokens: 60, estimated: true }, true), "about 42 tokens, stopped");
  assert.equal(tokenNote({ completion_tokens: null, total_tokens: 7 }, true), "about 7 tokens, stopped");
  assert.equal(tokenNote({ completion_tokens: 1, estimated: false }, true), "1 token, stopped");
  assert.equal(tokenNote(null, true), "stopped");
});

test("a whole answer shows its total and none when the API has none", () => {
  assert.equal(tokenNote({ total_tokens: 12 }, false), "12 tokens");
  assert.equal(tokenNote(null, false), "");
});

test("a result sums up in one line, JSON compacted and long text cut", () => {
  assert.equal(oneLine('{\n  "city": "Leipzig"\n}'), '{"city":"Leipzig"}');
  const line = oneLine("word ".repeat(40), 20);
  assert.equal(line.length, 20);
  assert.ok(line.endsWith("…"));
});

test("a stopped run's note gives no error code, a failed one gives code and message", () => {
  assert.equal(describeRun({ status: "cancelled", error_code: "run_cancelled" }), ".");
  assert.equal(describeRun({ status: "failed", error_code: "provider_down", error_message: "no" }), " (provider_down): no");
});

test("conversations group by the local day they were last updated", () => {
  const now = new Date(2026, 11, 1, 12, 0);
  assert.equal(dateGroup(new Date(2026, 11, 1, 0, 5), now), "Today");
  assert.equal(dateGroup(new Date(2026, 10, 30, 23, 59), now), "Yesterday");
  assert.equal(dateGroup(new Date(2026, 10, 26), now), "Previous 7 days");
  assert.equal(dateGroup(new Date(2026, 10, 5), now), "Previous 30 days");
  assert.equal(dateGroup(new Date(2025, 0, 1), now), "Older");
  assert.equal(dateGroup("not a date", now), "Older");
});

test("groups keep the order of the items, newest first", () => {
  const now = new Date(2026, 11, 1, 12, 0);
  const items = [new Date(2026, 11, 1, 9), new Date(2026, 11, 1, 8), new Date(2026, 10, 30, 8)];
  assert.deepEqual(
    groupByDate(items, (d) => d, now).map(([label, list]) => [label, list.length]),
    [["Today", 2], ["Yesterday", 1]]
  );
});

test("the marker where the model's view begins follows the newest answer's recorded view", () => {
  const answer = (position, view) => ({ role: "assistant", position, context_view: view });
  assert.equal(viewStart([]), null);
  assert.equal(viewStart([answer(1, { first_position: 0, summarized: false })]), null);
  assert.deepEqual(viewStart([answer(9, { first_position: 4, summarized: false }), answer(3, null)]), {
    position: 4,
    text: "Earlier messages are not sent to the model",
  });
  assert.deepEqual(
    viewStart([answer(5, { first_position: 2, summarized: false }), answer(9, { first_position: 6, summarized: true })]),
    { position: 6, text: "Earlier messages are summarised for the model" }
  );
  // A user message carries no view; only answers count.
  assert.equal(viewStart([{ role: "user", position: 7, context_view: { first_position: 3 } }]), null);
});
