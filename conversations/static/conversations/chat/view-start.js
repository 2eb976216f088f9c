/*
 * The marker where the model's view of the conversation begins: placed before
 * the first message the newest answer's model call was sent, when it was not
 * sent the whole history (the stored history itself is always whole).
 */

import { el, ui } from "./dom.js";
import { viewStart } from "./format.js";
import { state } from "./state.js";

/** Put the marker where the newest answer's view began (or take it away). */
export function markViewStart() {
  ui.transcript.querySelectorAll(".llm-view-start").forEach((node) => node.remove());
  const start = viewStart(state.messages.values());
  const first = start && ui.transcript.querySelector(`.llm-msg[data-position="${start.position}"]`);
  if (!first) {
    return;
  }
  const note = el(
    "div",
    { className: "llm-view-start", role: "note", "data-first-position": start.position },
    start.text
  );
  first.before(note);
}
