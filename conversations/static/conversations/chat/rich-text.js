/*
 * Answers as rendered Markdown, with the vendored libraries: marked parses,
 * DOMPurify sanitises (markdown.js holds the rules), highlight.js colours
 * fenced code, and each code block gets a copy button.
 *
 * While an answer streams it is rendered again as it grows; only the blocks
 * that changed are replaced (the others stay the same nodes), so nothing
 * flickers, a selection in an earlier paragraph survives, and the reader's
 * scroll position is kept.
 */

import { Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import hljs from "../vendor/highlight/core.min.js";
import bash from "../vendor/highlight/languages/bash.min.js";
import css from "../vendor/highlight/languages/css.min.js";
import javascript from "../vendor/highlight/languages/javascript.min.js";
import json from "../vendor/highlight/languages/json.min.js";
import python from "../vendor/highlight/languages/python.min.js";
import shell from "../vendor/highlight/languages/shell.min.js";
import sql from "../vendor/highlight/languages/sql.min.js";
import typescript from "../vendor/highlight/languages/typescript.min.js";
import xml from "../vendor/highlight/languages/xml.min.js";
import yaml from "../vendor/highlight/languages/yaml.min.js";
import { el } from "./dom.js";
import { createMarkdown } from "./markdown.js";

const LANGUAGES = { bash, css, javascript, json, python, shell, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) {
  hljs.registerLanguage(name, language);
}
hljs.registerAliases(["js"], { languageName: "javascript" });
hljs.registerAliases(["ts"], { languageName: "typescript" });
hljs.registerAliases(["sh", "console"], { languageName: "bash" });
hljs.registerAliases(["html"], { languageName: "xml" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["yml"], { languageName: "yaml" });

const markdown = createMarkdown({ Marked, purify: DOMPurify });

/** Colour a code block and put it in a frame with its language and a copy button. */
function frameCode(pre) {
  const code = pre.querySelector("code");
  const match = code && /language-([\w+#.-]+)/.exec(code.className);
  const language = match && hljs.getLanguage(match[1]) ? match[1] : "";
  if (language) {
    // highlight.js escapes the text it wraps in its spans.
    code.innerHTML = hljs.highlight(code.textContent, { language, ignoreIllegals: true }).value;
    code.classList.add("hljs");
  }
  const frame = el(
    "div",
    { className: "llm-code" },
    el(
      "div",
      { className: "llm-code-bar" },
      el("span", { className: "llm-code-language" }, match ? match[1] : "code"),
      el("button", { type: "button", className: "llm-secondary llm-copy-code", "data-copy": "code" }, "Copy code")
    )
  );
  pre.replaceWith(frame);
  frame.append(pre);
  // A wide block scrolls by itself; a keyboard user reaches it to scroll it.
  pre.setAttribute("tabindex", "0");
}

/** The rendered nodes of ``text``: sanitised Markdown, code framed, wide tables scrollable. */
function build(text) {
  const template = document.createElement("template");
  template.innerHTML = markdown.toSafeHtml(text);
  const fragment = template.content;
  fragment.querySelectorAll("pre").forEach(frameCode);
  fragment.querySelectorAll("table").forEach((table) => {
    const wrap = el("div", { className: "llm-table", tabindex: "0", role: "group", "aria-label": "Table" });
    table.replaceWith(wrap);
    wrap.append(table);
  });
  // Whitespace between blocks is noise for the comparison below.
  [...fragment.childNodes].forEach((node) => {
    if (node.nodeType === Node.TEXT_NODE && !node.textContent.trim()) {
      node.remove();
    }
  });
  return [...fragment.childNodes];
}

/** Show ``text`` as Markdown in ``container``, replacing only the blocks that changed. */
export function renderMarkdown(container, text) {
  const fresh = build(text);
  const old = [...container.childNodes];
  fresh.forEach((node, index) => {
    const current = old[index];
    if (!current) {
      container.append(node);
    } else if (!current.isEqualNode(node)) {
      current.replaceWith(node);
    }
  });
  old.slice(fresh.length).forEach((node) => node.remove());
  container.classList.add("llm-markdown");
}
