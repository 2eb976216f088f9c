/*
 * The sidebar: profiles for a new conversation, the user's conversations
 * grouped by date (Today, Yesterday, ...), and, under 768 px, the drawer it
 * lives in.
 */

import { showError } from "./alerts.js";
import { api, apiRoot, pageItems, pageUrl } from "./api.js";
import { el, ui } from "./dom.js";
import { groupByDate } from "./format.js";
import { isCurrent, state } from "./state.js";

const NARROW = window.matchMedia("(max-width: 767.98px)");
let listed = []; // the conversations shown, newest first

function profileLabel(profile) {
  let label = profile.name || profile.slug;
  if (profile.model) {
    label += ` — ${profile.model}`;
  }
  if (profile.adapter === "demo" && !/offline/i.test(label)) {
    label += " (offline demo)";
  }
  return label;
}

export function profileName(slug) {
  const profile = slug && state.profiles.get(slug);
  return profile ? profile.name : slug || "";
}

export async function loadProfiles() {
  let profiles;
  try {
    profiles = pageItems(await api("GET", `${apiRoot}profiles/`));
  } catch (error) {
    ui.profile.replaceChildren(el("option", { value: "" }, "Profiles could not be loaded"));
    showError(error);
    return;
  }
  state.profiles = new Map(profiles.map((profile) => [profile.slug, profile]));
  ui.profile.disabled = !profiles.length;
  ui.profile.replaceChildren(
    ...(profiles.length
      ? profiles.map((profile) =>
          el("option", { value: profile.slug, selected: Boolean(profile.is_default) }, profileLabel(profile))
        )
      : [el("option", { value: "" }, "No profiles yet: add one in the admin")])
  );
}

const updatedAt = (conversation) => conversation.updated_at || conversation.created_at;

function conversationItem(conversation) {
  const when = updatedAt(conversation);
  const date = when ? new Date(when) : null;
  return el(
    "li",
    null,
    el(
      "a",
      { href: pageUrl(conversation.id), "data-id": conversation.id, "aria-current": isCurrent(conversation.id) ? "page" : null },
      el("span", { className: "llm-conv-title" }, conversation.title || "Untitled conversation"),
      el(
        "span",
        { className: "llm-conv-meta" },
        conversation.profile ? `${profileName(conversation.profile)} · ` : "",
        date && el("time", { datetime: when }, isNaN(date) ? when : date.toLocaleString())
      )
    )
  );
}

/** Draw ``listed`` as date groups, each a heading and a list. */
function drawList() {
  if (!listed.length) {
    ui.conversations.replaceChildren(el("p", { className: "llm-empty-list" }, "No conversations yet."));
    return;
  }
  ui.conversations.replaceChildren(
    ...groupByDate(listed, updatedAt).map(([label, items]) =>
      el(
        "section",
        { className: "llm-conv-group" },
        el("h3", { className: "llm-conv-group-title" }, label),
        el("ul", { className: "llm-conversations" }, ...items.map(conversationItem))
      )
    )
  );
}

export async function loadConversations(url, append) {
  let data;
  try {
    data = await api("GET", url || `${apiRoot}conversations/`);
  } catch (error) {
    showError(error); // the list the server rendered stays
    return;
  }
  listed = append ? [...listed, ...pageItems(data)] : pageItems(data);
  drawList();
  state.nextConversations = (data && data.next) || null;
  ui.more.hidden = !state.nextConversations;
}

export function putFirstInList(conversation) {
  listed = [
    { ...conversation, updated_at: new Date().toISOString() },
    ...listed.filter((item) => String(item.id) !== String(conversation.id)),
  ];
  drawList();
}

export function removeFromList(id) {
  listed = listed.filter((item) => String(item.id) !== String(id));
  drawList();
}

export function markCurrentInList() {
  for (const link of ui.conversations.querySelectorAll("a[data-id]")) {
    if (isCurrent(link.dataset.id)) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
}

// The drawer (narrow screens) ------------------------------------------------------

export function openDrawer() {
  document.body.classList.add("llm-drawer-open");
  ui.drawerToggle.setAttribute("aria-expanded", "true");
  ui.backdrop.hidden = false;
  const first = ui.sidebar.querySelector("a[aria-current], select, a, button");
  if (first) {
    first.focus();
  }
}

export function closeDrawer() {
  if (!document.body.classList.contains("llm-drawer-open")) {
    return;
  }
  document.body.classList.remove("llm-drawer-open");
  ui.drawerToggle.setAttribute("aria-expanded", "false");
  ui.backdrop.hidden = true;
  if (NARROW.matches) {
    ui.drawerToggle.focus();
  }
}

ui.drawerToggle.addEventListener("click", () => {
  if (document.body.classList.contains("llm-drawer-open")) {
    closeDrawer();
  } else {
    openDrawer();
  }
});
ui.backdrop.addEventListener("click", closeDrawer);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("llm-drawer-open")) {
    event.preventDefault();
    closeDrawer();
  }
});
NARROW.addEventListener("change", () => closeDrawer());

ui.more.addEventListener("click", () => {
  if (state.nextConversations) {
    loadConversations(state.nextConversations, true);
  }
});
