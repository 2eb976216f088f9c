/*
 * The page's elements and the one way this script creates elements. Text from
 * a model, a tool or a user enters the page as text nodes; the only HTML is
 * the sanitised Markdown of answers (see rich-text.js).
 */

export const $ = (id) => document.getElementById(id);

export const root = $("llm-chat");

export const ui = {
  alert: $("llm-alert"),
  alertText: $("llm-alert-text"),
  alertClose: $("llm-alert-close"),
  composer: $("llm-composer"),
  composerReason: $("llm-composer-reason"),
  conversations: $("llm-conversations"),
  deleteButton: $("llm-delete"),
  deleteDialog: $("llm-delete-dialog"),
  drawerToggle: $("llm-drawer-toggle"),
  backdrop: $("llm-backdrop"),
  input: $("llm-message"),
  more: $("llm-more"),
  newForm: $("llm-new"),
  profile: $("llm-profile"),
  progress: $("llm-progress"),
  renameButton: $("llm-rename"),
  renameForm: $("llm-rename-form"),
  renameInput: $("llm-rename-input"),
  searchForm: $("llm-search"),
  searchInput: $("llm-search-input"),
  searchResults: $("llm-search-results"),
  send: $("llm-send"),
  sidebar: $("llm-sidebar"),
  stop: $("llm-stop"),
  subtitle: $("llm-subtitle"),
  title: $("llm-title"),
  titleActions: $("llm-title-actions"),
  transcript: $("llm-transcript"),
};

/** An element with attributes and children; strings become text nodes, never HTML. */
export function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (name === "className") {
      node.className = value;
    } else if (name === "onclick" && typeof value === "function") {
      node.addEventListener("click", value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(typeof child === "object" ? child : String(child));
    }
  }
  return node;
}

/** Whether the transcript is scrolled to (nearly) its end: new text then keeps it there. */
export function atEnd() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 48;
}

export function scrollToEnd() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

/** Run ``change()``; keep following the end if the reader was there, else keep their place. */
export function keepingScroll(change) {
  const following = atEnd();
  const top = ui.transcript.scrollTop;
  change();
  if (following) {
    scrollToEnd();
  } else {
    ui.transcript.scrollTop = top;
  }
}

/** Copy ``text`` and say so on ``button`` for a moment. */
export async function copyText(button, text) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  window.setTimeout(() => {
    button.textContent = label;
  }, 1500);
}
