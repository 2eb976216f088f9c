// Rendering into the page: code framed and highlighted, and a growing answer
// re-rendered without replacing the blocks that did not change (no flicker).
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { JSDOM } from "jsdom";

let renderMarkdown;
let document;

before(async () => {
  const { window } = new JSDOM("<!DOCTYPE html><body></body>");
  // The page's modules run in a browser; these are the globals they use.
  Object.assign(globalThis, { window, document: window.document, Node: window.Node });
  document = window.document;
  ({ renderMarkdown } = await import("../../conversations/static/conversations/chat/rich-text.js"));
});

test("a growing answer keeps the nodes of the blocks that did not change", () => {
  const container = document.createElement("div");
  renderMarkdown(container, "First paragraph.\n\nSecond");
  const [first, second] = container.children;
  renderMarkdown(container, "First paragraph.\n\nSecond paragraph, longer.\n\n- a list");
  assert.equal(container.children[0], first);
  assert.notEqual(container.children[1], second);
  assert.equal(container.children[1].textContent, "Second paragraph, longer.");
  assert.equal(container.children[2].tagName, "UL");
});

test("a shorter text drops the blocks that are gone", () => {
  const container = document.createElement("div");
  renderMarkdown(container, "one\n\ntwo\n\nthree");
  renderMarkdown(container, "one");
  assert.equal(container.children.length, 1);
});

test("fenced code is highlighted and framed with its language and a copy button", () => {
  const container = document.createElement("div");
  renderMarkdown(container, "```python\ndef f():\n    return '<b>'\n```");
  const frame = container.querySelector(".llm-code");
  assert.equal(frame.querySelector(".llm-code-language").textContent, "python");
  assert.equal(frame.querySelector("button[data-copy=code]").textContent, "Copy code");
  assert.equal(frame.querySelector(".hljs-keyword").textContent, "def");
  assert.equal(frame.querySelector("pre").textContent, "def f():\n    return '<b>'\n");
  assert.equal(frame.querySelectorAll("b").length, 0);
});

test("a table is wrapped so that a wide one scrolls by itself", () => {
  const container = document.createElement("div");
  renderMarkdown(container, "| a | b |\n| - | - |\n| 1 | 2 |");
  assert.equal(container.firstElementChild.className, "llm-table");
  assert.equal(container.querySelector(".llm-table > table").rows.length, 2);
});
