/*
 * Search over the user's messages (GET search/?q=): the results list under
 * the search box; choosing one opens its conversation at that message.
 */

import { showError } from "./alerts.js";
import { api, apiRoot, pageUrl } from "./api.js";
import { openConversation } from "./conversation.js";
import { el, ui } from "./dom.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";

const ROLES = { user: "You", assistant: "Assistant", tool: "Tool result", system: "System" };

/** The snippet is escaped text with the matches in <mark>; nothing else is kept. */
function snippet(html) {
  const node = el("span", { className: "llm-search-snippet" });
  node.append(DOMPurify.sanitize(html, { ALLOWED_TAGS: ["mark"], ALLOWED_ATTR: [], RETURN_DOM_FRAGMENT: true }));
  return node;
}

function resultItem(result) {
  const href = `${pageUrl(result.conversation.id)}#message-${result.position}`;
  return el(
    "li",
    null,
    el(
      "a",
      { href, "data-id": result.conversation.id, "data-position": result.position },
      el("span", { className: "llm-conv-title" }, result.conversation.title || "Untitled conversation"),
      el("span", { className: "llm-conv-meta" }, `${ROLES[result.role] || result.role} · message ${result.position + 1}`),
      snippet(result.snippet || "")
    )
  );
}

async function search(query) {
  const data = await api("GET", `${apiRoot}search/?q=${encodeURIComponent(query)}`);
  const results = (data && data.results) || [];
  ui.searchResults.replaceChildren(
    el("p", { className: "llm-help", role: "status" }, results.length ? `${results.length} found` : "Nothing found."),
    el("ul", { className: "llm-conversations" }, ...results.map(resultItem))
  );
  ui.searchResults.hidden = false;
}

function clear() {
  ui.searchResults.hidden = true;
  ui.searchResults.replaceChildren();
}

ui.searchForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const query = ui.searchInput.value.trim();
  if (query) {
    search(query).catch(showError);
  } else {
    clear();
  }
});

ui.searchForm.addEventListener("reset", clear);

ui.searchResults.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-id]");
  if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return;
  }
  event.preventDefault();
  openConversation(link.dataset.id, true, Number(link.dataset.position));
});
