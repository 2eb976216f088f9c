// The event-stream parser: events split across chunks, comments, ids, stopping.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createEventParser } from "../../conversations/static/conversations/chat/sse.js";

function parse(chunks, stopAt) {
  const events = [];
  const parser = createEventParser((event) => {
    events.push(event);
    return event.type === stopAt;
  });
  const stopped = chunks.map((chunk) => parser.feed(chunk));
  return { events, stopped };
}

test("an event split across chunks arrives once, whole", () => {
  const { events } = parse(["id: 7\nevent: text.del", 'ta\ndata: {"text":', ' "Hi"}\n', "\n"]);
  assert.deepEqual(events, [{ id: "7", type: "text.delta", data: '{"text": "Hi"}' }]);
});

test("comments are skipped and data lines are joined with newlines", () => {
  const { events } = parse([": keep-alive\n\ndata: one\ndata: two\n\n"]);
  assert.deepEqual(events, [{ id: null, type: "message", data: "one\ntwo" }]);
});

test("carriage returns end lines too, and only one leading space is dropped", () => {
  const { events } = parse(["event: x\r\ndata:  padded\r\n\r\n"]);
  assert.deepEqual(events, [{ id: null, type: "x", data: " padded" }]);
});

test("an event without data is not delivered", () => {
  assert.deepEqual(parse(["event: ping\nid: 3\n\n"]).events, []);
});

test("the parser stops at the event the caller asks it to and reads no further", () => {
  const { events, stopped } = parse(["event: a\ndata: 1\n\nevent: end\ndata: 2\n\nevent: b\ndata: 3\n\n", "data: 4\n\n"], "end");
  assert.deepEqual(
    events.map((event) => event.type),
    ["a", "end"]
  );
  assert.deepEqual(stopped, [true, true]);
});
