/*
 * The answer being streamed: text, reasoning and tool calls as their deltas
 * arrive, in one bubble after the stored messages. The text is rendered as
 * Markdown at most once a frame; the stored turn replaces the bubble.
 */

import { badge } from "./cards.js";
import { el, keepingScroll, ui } from "./dom.js";
import { renderMarkdown } from "./rich-text.js";
import { acceptsLive } from "./state.js";

export class LiveTurn {
  constructor() {
    this.node = null;
    this.seq = -1;
    this.frame = null;
  }

  get active() {
    return Boolean(this.node);
  }

  build() {
    this.reasoning = el("pre", { className: "llm-reasoning-text" });
    this.reasoningBox = el(
      "details",
      { className: "llm-reasoning", hidden: true },
      el("summary", null, "Reasoning"),
      this.reasoning
    );
    this.value = "";
    this.text = el("div", { className: "llm-msg-text" });
    this.tools = el("div", { className: "llm-tools" });
    this.cards = new Map(); // index -> {card, name, args}
    this.node = el(
      "article",
      { className: "llm-msg llm-msg-assistant llm-live", "aria-busy": "true" },
      el("p", { className: "llm-msg-role" }, "Assistant"),
      this.reasoningBox,
      this.text,
      this.tools
    );
    ui.transcript.append(this.node);
  }

  ensure() {
    if (!this.node || !this.node.isConnected) {
      this.clear();
      this.build();
    }
  }

  /** ``inflight``: the whole answer so far replaces what is shown. */
  replace(snapshot) {
    if (!acceptsLive({ kind: "inflight", seq: snapshot.seq, shown: this.seq, active: this.active })) {
      return;
    }
    this.clear();
    this.build();
    this.seq = Number(snapshot.seq);
    this.appendReasoning(snapshot.reasoning || "");
    this.setText(snapshot.text || "");
    for (const call of snapshot.tool_calls || []) {
      this.appendCall(call);
    }
  }

  /** A delta: appended unless the snapshot already had it. */
  delta(type, data) {
    if (!acceptsLive({ kind: type, seq: data.seq, shown: this.seq, active: this.active })) {
      return;
    }
    const seq = Number(data.seq);
    this.seq = Number.isFinite(seq) ? seq : this.seq;
    this.ensure();
    if (type === "text.delta") {
      this.setText(this.value + (data.text || ""));
    } else if (type === "reasoning.delta") {
      this.appendReasoning(data.text || "");
    } else {
      this.appendCall(data);
    }
  }

  setText(value) {
    this.value = value;
    if (this.frame === null) {
      // Render once per frame however many deltas came; the timer covers a hidden tab.
      const draw = () => {
        window.cancelAnimationFrame(this.frame.raf);
        window.clearTimeout(this.frame.timer);
        this.frame = null;
        this.draw();
      };
      this.frame = { raf: window.requestAnimationFrame(draw), timer: window.setTimeout(draw, 100) };
    }
  }

  draw() {
    if (this.node) {
      keepingScroll(() => renderMarkdown(this.text, this.value));
    }
  }

  appendReasoning(text) {
    if (text) {
      this.reasoning.append(text);
      this.reasoningBox.hidden = false;
    }
  }

  /** A tool call fragment: its card appears with the first one and fills in. */
  appendCall(fragment) {
    const index = Number(fragment.index) || 0;
    let entry = this.cards.get(index);
    if (!entry) {
      const name = el("code", { className: "llm-tool-name" });
      const args = el("pre", { className: "llm-tool-arguments" });
      const card = el(
        "details",
        { className: "llm-tool llm-tool-live", "data-status": "streaming", "data-index": index, open: true },
        el("summary", null, el("span", { className: "llm-tool-kind" }, "Tool call"), " ", name, " ", badge("streaming")),
        el("div", { className: "llm-tool-body" }, el("h3", null, "Arguments"), args)
      );
      entry = { card, name, args };
      this.cards.set(index, entry);
      this.tools.append(card);
    }
    if (fragment.id) {
      entry.card.dataset.callId = fragment.id;
    }
    if (fragment.name) {
      entry.name.textContent = fragment.name;
    }
    entry.args.append(fragment.arguments || "");
  }

  clear() {
    if (this.frame) {
      window.cancelAnimationFrame(this.frame.raf);
      window.clearTimeout(this.frame.timer);
      this.frame = null;
    }
    if (this.node) {
      this.node.remove();
    }
    this.node = null;
  }
}
