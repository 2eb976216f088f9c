/*
 * What the provider did itself for an answer: a card per tool it ran (a web
 * search, a piece of code) and the numbered sources the answer cites. Every
 * value enters the page as text; a source becomes a link only when its
 * address is http(s), and opens in a new tab without access to this page.
 */

import { el } from "./dom.js";

const KIND_LABELS = { web_search: "Web search", code_execution: "Code run", file_search: "File search" };

const isWeb = (url) => /^https?:\/\//i.test(url || "");

/** The host name of ``url`` (``""`` when it is not an address). */
function host(url) {
  try {
    return new URL(url).hostname;
  } catch {
    return "";
  }
}

/** One card per tool the provider ran for ``message`` (none: ``null``). */
export function buildProviderTools(message) {
  const calls = message.provider_tool_calls || [];
  if (!calls.length) {
    return null;
  }
  return el(
    "div",
    { className: "llm-tools llm-provider-tools" },
    ...calls.map((call) =>
      el(
        "details",
        { className: "llm-tool llm-provider-tool", "data-kind": call.kind, "data-status": call.status },
        el(
          "summary",
          null,
          el("span", { className: "llm-tool-kind" }, KIND_LABELS[call.kind] || call.kind),
          " ",
          call.query && el("q", { className: "llm-provider-query" }, call.query),
          call.query && " ",
          el("span", { className: `llm-badge llm-badge-${call.status}` }, call.status),
          call.result_summary && " ",
          call.result_summary && el("span", { className: "llm-tool-summary" }, call.result_summary)
        ),
        el(
          "div",
          { className: "llm-tool-body" },
          el("p", { className: "llm-help" }, `Run by the provider${call.id ? ` (${call.id})` : ""}.`),
          call.code && el("h3", null, "Code"),
          call.code && el("pre", { className: "llm-tool-arguments" }, call.code),
          call.result_summary && el("h3", null, "Result"),
          call.result_summary && el("pre", { className: "llm-tool-result" }, call.result_summary)
        )
      )
    )
  );
}

/** The distinct sources ``message`` cites, numbered in the order they are first cited. */
export function numberedSources(message) {
  const byUrl = new Map();
  for (const citation of message.citations || []) {
    if (!byUrl.has(citation.url)) {
      byUrl.set(citation.url, { number: byUrl.size + 1, url: citation.url, title: citation.title });
    }
  }
  return [...byUrl.values()];
}

/** The numbered list of sources under an answer (none: ``null``). */
export function buildSources(message) {
  const sources = numberedSources(message);
  if (!sources.length) {
    return null;
  }
  // A labelled list rather than a landmark: every answer with sources has one.
  return el(
    "div",
    { className: "llm-sources" },
    el("h3", { className: "llm-sources-title" }, "Sources"),
    el(
      "ol",
      { "aria-label": "Sources" },
      ...sources.map((source) => {
        const label = source.title || host(source.url) || source.url;
        const site = host(source.url);
        return el(
          "li",
          { "data-number": source.number },
          isWeb(source.url)
            ? el(
                "a",
                { href: source.url, target: "_blank", rel: "noopener noreferrer nofollow" },
                `[${source.number}] ${label}`
              )
            : el("span", null, `[${source.number}] ${label}`),
          site && site !== label && el("span", { className: "llm-source-host" }, ` ${site}`)
        );
      })
    )
  );
}
