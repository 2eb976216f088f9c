// Pure transitions of the page's state: composer, live events, progress, version switches.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  acceptsLive,
  answerMayStream,
  branchSwitches,
  callStatus,
  composerState,
  describeProgress,
} from "../../conversations/static/conversations/chat/state.js";

test("the composer is free when nothing runs and only Send is off while a run is followed", () => {
  assert.deepEqual(composerState({ busy: false, awaiting: null }), { inputDisabled: false, sendDisabled: false, reason: "" });
  assert.deepEqual(composerState({ busy: true, awaiting: null }), { inputDisabled: false, sendDisabled: true, reason: "" });
});

test("a run waiting for a decision disables the whole composer and says why", () => {
  const mine = composerState({ busy: false, awaiting: "yours" });
  assert.equal(mine.inputDisabled, true);
  assert.equal(mine.sendDisabled, true);
  assert.match(mine.reason, /^Waiting for approval: approve or reject/);
  assert.match(composerState({ busy: false, awaiting: "reviewer" }).reason, /a reviewer has to decide/);
});

test("a delta is shown only when it is newer than what is shown", () => {
  assert.equal(acceptsLive({ kind: "text.delta", seq: 3, shown: 2, active: true }), true);
  assert.equal(acceptsLive({ kind: "text.delta", seq: 2, shown: 2, active: true }), false);
  assert.equal(acceptsLive({ kind: "text.delta", seq: undefined, shown: 9, active: false }), true);
});

test("a snapshot no newer than the stored turn that replaced the bubble is not shown again", () => {
  assert.equal(acceptsLive({ kind: "inflight", seq: 5, shown: 5, active: false }), false);
  assert.equal(acceptsLive({ kind: "inflight", seq: 5, shown: 5, active: true }), true);
  assert.equal(acceptsLive({ kind: "inflight", seq: 6, shown: 5, active: false }), true);
});

test("a snapshot arriving while a stored answer is the newest message is not an answer", () => {
  const user = { role: "user" };
  const answer = { role: "assistant" };
  const result = { role: "tool" };
  assert.equal(answerMayStream(new Map(), -1), true);
  assert.equal(answerMayStream(new Map([[0, user]]), 0), true);
  assert.equal(answerMayStream(new Map([[0, user], [1, answer]]), 1), false);
  assert.equal(answerMayStream(new Map([[0, user], [1, answer], [2, result]]), 2), true);
});

test("a call whose result arrived before its status reads as answered", () => {
  assert.equal(callStatus({ status: "running" }, true), "answered");
  assert.equal(callStatus({ status: "running" }, false), "running");
  assert.equal(callStatus({ status: "failed" }, true), "failed");
  assert.equal(callStatus({}, false), "pending");
});

test("progress names the calls made after the run's start and counts their results", () => {
  const messages = [
    { position: 0, role: "assistant", tool_calls: [{ id: "old", name: "ignored" }] },
    { position: 2, role: "assistant", tool_calls: [{ id: "a", name: "get_weather" }, { id: "b", name: "get_time" }] },
  ];
  assert.equal(describeProgress(messages, (id) => id === "a", 1), "Working… 2 tool calls (get_weather, get_time), 1 answered.");
  assert.equal(describeProgress(messages, () => false, 5), "Waiting for the model…");
});

test("a branch and its source switch at the first message they differ in", () => {
  const family = [
    { id: "root", forked_from: null, forked_at_position: null },
    { id: "edit", forked_from: "root", forked_at_position: 0 },
  ];
  const fromRoot = branchSwitches(family, "root");
  assert.deepEqual([...fromRoot.keys()], [1]);
  assert.deepEqual(fromRoot.get(1).options.map((m) => m.id), ["root", "edit"]);
  assert.equal(branchSwitches(family, "edit").get(1).current, "edit");
});
