// The Markdown wrapper with the vendored marked and DOMPurify (on a jsdom window).
import assert from "node:assert/strict";
import { test } from "node:test";
import { JSDOM } from "jsdom";
import { Marked } from "../../conversations/static/conversations/vendor/marked/marked.esm.js";
import DOMPurify from "../../conversations/static/conversations/vendor/dompurify/purify.es.mjs";
import { createMarkdown } from "../../conversations/static/conversations/chat/markdown.js";

const { window } = new JSDOM("");
const markdown = createMarkdown({ Marked, purify: DOMPurify(window) });

function render(text) {
  const node = window.document.createElement("div");
  node.innerHTML = markdown.toSafeHtml(text);
  return node;
}

test("headings, lists, emphasis and tables render", () => {
  const node = render("# Title\n\n- one\n- **two**\n\n_em_\n\n| a | b |\n| - | - |\n| 1 | 2 |");
  assert.equal(node.querySelector("h1").textContent, "Title");
  assert.equal(node.querySelectorAll("ul li").length, 2);
  assert.equal(node.querySelector("strong").textContent, "two");
  assert.equal(node.querySelector("em").textContent, "em");
  assert.deepEqual([...node.querySelectorAll("td")].map((td) => td.textContent), ["1", "2"]);
});

test("fenced code keeps its language class and its text as text", () => {
  const code = render("```python\nif a < b:\n    print('<b>')\n```").querySelector("pre code");
  assert.equal(code.className, "language-python");
  assert.equal(code.textContent, "if a < b:\n    print('<b>')\n");
  assert.equal(code.children.length, 0);
});

test("links open in a new tab without access to the page", () => {
  const link = render("[docs](https://example.org/)").querySelector("a");
  assert.equal(link.getAttribute("href"), "https://example.org/");
  assert.equal(link.getAttribute("target"), "_blank");
  assert.equal(link.getAttribute("rel"), "noopener noreferrer");
});

test("javascript: and data: links lose their target", () => {
  for (const href of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,<script>alert(1)</script>"]) {
    const link = render(`[x](${href})`).querySelector("a");
    assert.equal(link && link.hasAttribute("href"), false, href);
  }
});

test("raw HTML in an answer shows as text", () => {
  const node = render('<img src=x onerror="alert(1)"> <script>alert(2)</script> <b onclick="x()">b</b>');
  assert.equal(node.querySelectorAll("img, script, b").length, 0);
  assert.match(node.textContent, /<img src=x onerror="alert\(1\)">/);
});

test("an image becomes a link: an answer cannot make the page load anything", () => {
  const node = render('![a cat](https://example.org/cat.png "onerror=alert(1)")');
  assert.equal(node.querySelectorAll("img").length, 0);
  assert.equal(node.querySelector("a").textContent, "a cat");
});

test("only a code element's language class survives", () => {
  const html = markdown.toSafeHtml("```js\nx\n```");
  assert.match(html, /class="language-js"/);
  assert.doesNotMatch(markdown.toSafeHtml("para"), /class=/);
});
