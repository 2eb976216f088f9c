/*
 * Live runs on the chat page of django-llm-conversations (loaded before chat.js).
 *
 * Same safety rule as chat.js: text from a model, a tool or a user only ever
 * enters the page as text (text nodes / textContent), never as HTML.
 *
 * A run is followed over its Server-Sent Events, read with fetch() and a
 * ReadableStream (so the page can send ``Last-Event-ID`` itself):
 * - the message POST asks for ``text/event-stream`` and, when the server
 *   answers with the run's stream, that response is read directly; a server
 *   answering JSON instead (202 for a worker's run) gives the run id, and the
 *   page opens GET runs/ID/events/;
 * - when the connection drops, the page reconnects to GET runs/ID/events/
 *   with the id of the last stored event it saw; the server replays what
 *   came after it, then one ``inflight`` snapshot of the answer being
 *   streamed, then live deltas;
 * - ``text.delta``, ``reasoning.delta`` and ``tool_call.delta`` grow the
 *   in-progress bubble, ``inflight`` replaces it, and the stored
 *   ``assistant_turn`` replaces it with the message as it was saved.
 *
 * While a run is followed a Stop button asks the API to cancel it. A run that
 * ends other than ``completed`` gets a note in the transcript with its
 * reason, after its last message (also after a reload: the page reads the
 * conversation's unsuccessful runs). A run no process has taken yet
 * (``queued``) says so until a worker claims it.
 */
window.LLMChatStream = (() => {
  "use strict";

  const RETRY_MS = 1000;
  const MAX_FAILURES = 5; // consecutive failed (re)connections before giving up on the stream
  const QUEUE_POLL_MS = 1500;
  const STOP_ATTEMPTS = 3;

  /** Statuses a run ends with that the transcript marks, and how they read. */
  const OUTCOMES = {
    failed: "Run failed",
    cancelled: "Run cancelled",
    interrupted: "Run interrupted",
    budget_exhausted: "Run stopped: a budget is used up",
    max_iterations: "Run stopped at its iteration limit",
  };
  const MARKED = Object.keys(OUTCOMES);

  const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

  const isEventStream = (response) =>
    (response.headers.get("Content-Type") || "").includes("text/event-stream");

  /**
   * Read a ``text/event-stream`` body; ``onEvent({id, type, data})`` gets each
   * event (``data`` as text) and returns true to stop reading. Resolves when
   * the body ended or reading was stopped.
   */
  async function readEventStream(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let event = { id: null, type: "message", data: [] };
    const line = (text) => {
      if (text === "") {
        const complete = event;
        event = { id: null, type: "message", data: [] };
        return complete.data.length
          ? onEvent({ id: complete.id, type: complete.type, data: complete.data.join("\n") })
          : false;
      }
      if (text.startsWith(":")) {
        return false; // a comment (keep-alive)
      }
      const colon = text.indexOf(":");
      const field = colon < 0 ? text : text.slice(0, colon);
      let value = colon < 0 ? "" : text.slice(colon + 1);
      if (value.startsWith(" ")) {
        value = value.slice(1);
      }
      if (field === "data") {
        event.data.push(value);
      } else if (field === "event") {
        event.type = value;
      } else if (field === "id") {
        event.id = value;
      }
      return false;
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const text = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line(text)) {
          reader.cancel().catch(() => {});
          return;
        }
      }
    }
  }

  /** The in-progress answer: text, reasoning and tool calls as they stream. */
  class LiveTurn {
    constructor(page) {
      this.page = page;
      this.node = null;
      this.seq = -1;
    }

    get active() {
      return Boolean(this.node);
    }

    build() {
      const { el } = this.page;
      this.reasoning = el("pre", { className: "llm-reasoning-text" });
      this.reasoningBox = el(
        "details",
        { className: "llm-reasoning", hidden: true },
        el("summary", null, "Reasoning"),
        this.reasoning
      );
      this.text = el("div", { className: "llm-msg-text" });
      this.tools = el("div", { className: "llm-tools" });
      this.cards = new Map(); // index -> {card, name, arguments}
      this.node = el(
        "article",
        { className: "llm-msg llm-msg-assistant llm-live", "aria-busy": "true" },
        el("p", { className: "llm-msg-role" }, "Assistant"),
        this.reasoningBox,
        this.text,
        this.tools
      );
      this.page.transcript.append(this.node);
    }

    ensure() {
      if (!this.node || !this.node.isConnected) {
        this.clear();
        this.build();
      }
    }

    /** ``inflight``: the whole answer so far replaces what is shown. */
    replace(snapshot) {
      const seq = Number(snapshot.seq);
      if (!this.active && Number.isFinite(seq) && seq <= this.seq) {
        // Not newer than what was shown, and no answer is streaming: the
        // snapshot of an answer whose stored turn has already replaced it
        // (read before the loop forgot it). Showing it would leave a copy.
        return;
      }
      this.clear();
      this.build();
      this.seq = seq;
      this.appendReasoning(snapshot.reasoning || "");
      this.text.textContent = snapshot.text || "";
      for (const call of snapshot.tool_calls || []) {
        this.appendCall(call);
      }
    }

    /** A delta: appended unless the snapshot already had it. */
    delta(type, data) {
      const seq = Number(data.seq);
      if (Number.isFinite(seq) && seq <= this.seq) {
        return;
      }
      this.seq = Number.isFinite(seq) ? seq : this.seq;
      this.ensure();
      if (type === "text.delta") {
        this.text.append(data.text || "");
      } else if (type === "reasoning.delta") {
        this.appendReasoning(data.text || "");
      } else {
        this.appendCall(data);
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
      const { el } = this.page;
      const index = Number(fragment.index) || 0;
      let entry = this.cards.get(index);
      if (!entry) {
        const name = el("code", { className: "llm-tool-name" });
        const args = el("pre", { className: "llm-tool-arguments" });
        const card = el(
          "details",
          { className: "llm-tool llm-tool-live", "data-status": "streaming", "data-index": index, open: true },
          el(
            "summary",
            null,
            el("span", { className: "llm-tool-kind" }, "Tool call"),
            " ",
            name,
            " ",
            el("span", { className: "llm-badge llm-badge-streaming" }, "streaming")
          ),
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
      if (this.node) {
        this.node.remove();
      }
      this.node = null;
    }
  }

  /**
   * The live part of the page. ``page`` gives what chat.js owns: ``el``,
   * ``transcript``, ``stopButton``, ``progress`` (the status line), ``api(method, url)``, ``apiRoot``,
   * ``isCurrent(conversationId)``, ``messages()`` (the messages shown),
   * ``renderMessages(list)``, ``updateCall(call, position)`` and
   * ``setProgress(text)``.
   */
  function createLive(page) {
    const runUrl = (id) => `${page.apiRoot}runs/${encodeURIComponent(id)}/`;
    const live = new LiveTurn(page);
    let following = null; // {run, conversationId} of the run followed now

    // Run notes ------------------------------------------------------------------

    function describeRun(run) {
      const parts = [];
      if (run.status === "max_iterations" && run.max_iterations) {
        parts.push(`after ${run.max_iterations} iterations`);
      }
      if (run.error_code) {
        parts.push(run.error_code);
      }
      const reason = parts.length ? ` (${parts.join(", ")})` : "";
      return run.error_message ? `${reason}: ${run.error_message}` : `${reason}.`;
    }

    /** Put the note of an unsuccessful ``run`` after its last message (replacing an older note). */
    function markRun(run) {
      if (!run || !MARKED.includes(run.status)) {
        return;
      }
      const { el, transcript } = page;
      transcript.querySelectorAll(".llm-run").forEach((node) => {
        if (node.dataset.runId === run.id) {
          node.remove();
        }
      });
      const note = el(
        "div",
        { className: `llm-run llm-run-${run.status}`, "data-run-id": run.id, "data-status": run.status, role: "note" },
        el("strong", null, OUTCOMES[run.status]),
        describeRun(run)
      );
      const messages = page.messages();
      const own = messages.filter((message) => message.run === run.id);
      // A run without messages of its own (it failed before storing any) goes by its start.
      const candidates = own.length
        ? own
        : messages.filter((message) => message.created_at && message.created_at <= run.started_at);
      const last = candidates.reduce((a, b) => (a && a.position > b.position ? a : b), null);
      let anchor = last && transcript.querySelector(`.llm-msg[data-position="${last.position}"]`);
      if (!anchor) {
        const first = transcript.querySelector(".llm-msg[data-position]");
        if (first && !own.length && messages.length) {
          first.before(note);
        } else {
          transcript.append(note);
        }
        return;
      }
      while (anchor.nextElementSibling && anchor.nextElementSibling.classList.contains("llm-run")) {
        anchor = anchor.nextElementSibling;
      }
      anchor.after(note);
    }

    /** Notes for the conversation's unsuccessful runs (after its messages were shown). */
    async function showRuns(conversationId, stale) {
      let url = `${page.apiRoot}conversations/${encodeURIComponent(conversationId)}/runs/?status=${MARKED.join(",")}`;
      while (url) {
        const data = await page.api("GET", url);
        if (stale()) {
          return;
        }
        ((data && data.results) || []).forEach(markRun);
        url = data && data.next;
      }
    }

    // Stop and queued ------------------------------------------------------------

    let queueTimer = null;

    function watchQueue(run) {
      window.clearTimeout(queueTimer);
      if (!run || !run.queued || run.status !== "running") {
        return;
      }
      page.setProgress("Queued: waiting for a worker to take the run…");
      queueTimer = window.setTimeout(async () => {
        if (!following || following.run.id !== run.id) {
          return;
        }
        try {
          setRun(await page.api("GET", runUrl(run.id)));
        } catch {
          watchQueue(run); // try again; the stream reports what matters
        }
      }, QUEUE_POLL_MS);
    }

    function setRun(run) {
      if (!following || !run || !run.id) {
        return;
      }
      const waited = Boolean(following.run.queued);
      following.run = { ...following.run, ...run };
      page.stopButton.hidden = !(following.run.status === "running" && page.isCurrent(following.conversationId));
      // Waiting is not working: no spinner while no process has the run.
      page.progress.classList.toggle("llm-progress-queued", Boolean(following.run.queued));
      if (following.run.queued) {
        watchQueue(following.run);
      } else {
        window.clearTimeout(queueTimer);
        if (waited) {
          following.progress(live.active ? "Answering…" : ""); // a worker took it
        }
      }
    }

    async function stop() {
      const run = following && following.run;
      if (!run || !run.id) {
        return;
      }
      page.stopButton.disabled = true;
      page.setProgress("Stopping…");
      // Asking twice is harmless, so a transient failure (the server busy, the
      // network gone for a moment) is tried again before it is reported.
      for (let attempt = 1; ; attempt += 1) {
        try {
          setRun(await page.api("POST", `${runUrl(run.id)}cancel/`));
          return;
        } catch (error) {
          if (error.code === "run_not_running") {
            return; // it ended meanwhile: its events tell how
          }
          const transient = error.status === 0 || error.status >= 500;
          if (!transient || attempt >= STOP_ATTEMPTS) {
            page.stopButton.disabled = false;
            throw error;
          }
        }
        await sleep(RETRY_MS / 2);
      }
    }

    // Following ------------------------------------------------------------------

    /** Handle one event; a value other than ``undefined`` ends the follow with it. */
    function dispatch(event) {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return undefined;
      }
      if (event.id !== null && event.id !== "" && following) {
        following.lastId = event.id;
      }
      const type = event.type;
      if (type === "run_finished") {
        live.clear();
        setRun(data.run);
        return data.run;
      }
      if (type === "approval.requested" && !(data.approval && data.approval.decision)) {
        // A replayed request of a turn decided before (its decision is set) is history.
        live.clear();
        return { ...following.run, status: "awaiting_approval" };
      }
      if (type === "run_started") {
        setRun(data.run);
      } else if (following.run.queued && type !== "approval.decided") {
        setRun({ queued: false }); // something happened: a process has the run
      }
      if (!page.isCurrent(following.conversationId)) {
        return undefined;
      }
      if (type === "text.delta" || type === "reasoning.delta" || type === "tool_call.delta") {
        live.delta(type, data);
      } else if (type === "inflight") {
        live.replace(data);
      } else if (type === "run_started") {
        if (data.message) {
          page.renderMessages([data.message]);
        }
      } else if (type === "assistant_turn") {
        live.clear();
        page.renderMessages([data.message]);
      } else if (type === "tool_call_started") {
        page.updateCall(data.call, data.position);
      } else if (type === "tool_call_finished") {
        page.updateCall(data.call);
        page.renderMessages([data.message]);
      }
      if (live.active) {
        if (live.node.nextElementSibling) {
          // Keep the bubble last: stored messages may have been appended after it.
          page.transcript.append(live.node);
        }
        page.transcript.scrollTop = page.transcript.scrollHeight;
      }
      if (!following.run.queued) {
        following.progress(live.active ? "Answering…" : "");
      }
      return undefined;
    }

    async function connect() {
      const headers = { Accept: "text/event-stream" };
      if (following.lastId !== null) {
        headers["Last-Event-ID"] = following.lastId;
      }
      return fetch(`${runUrl(following.run.id)}events/`, { headers, credentials: "same-origin" });
    }

    /**
     * Follow a run until it ends or waits for an approval; resolves with
     * ``{run, ended}``: ``ended`` is false when its events could not be read
     * (``run`` is then what is known of it, ``{}`` at worst: the caller polls).
     * ``response`` is an open event stream of the run (the POST's), ``run``
     * what is known of it; at least one of them is needed. ``progress(text)``
     * reports progress (an empty text: whatever the caller shows by default).
     */
    async function follow({ conversationId, run, response, progress }) {
      following = { conversationId, run: run || {}, lastId: null, progress };
      live.seq = -1; // a run's deltas count from its start
      page.stopButton.disabled = false;
      setRun(run);
      let failures = 0;
      try {
        for (;;) {
          let outcome;
          try {
            if (!response) {
              if (!following.run.id) {
                return { run: following.run, ended: false };
              }
              response = await connect();
            }
            if (response.status === 204) {
              // Nothing left to send: the run ended and its events were all seen.
              return { run: await page.api("GET", runUrl(following.run.id)), ended: true };
            }
            if (response.ok && isEventStream(response)) {
              await readEventStream(response, (event) => {
                outcome = dispatch(event);
                failures = 0;
                return outcome !== undefined;
              });
            } else if (response.status < 500 && response.status !== 429) {
              // Refused (404, 403, ...): polling will tell what is going on.
              return { run: following.run, ended: false };
            }
          } catch {
            // A network error: reconnect as below.
          }
          if (outcome !== undefined) {
            return { run: outcome, ended: true };
          }
          response = null;
          failures += 1;
          if (failures > MAX_FAILURES) {
            return { run: following.run, ended: false };
          }
          await sleep(RETRY_MS * failures);
        }
      } finally {
        window.clearTimeout(queueTimer);
        live.clear();
        page.stopButton.hidden = true;
        page.progress.classList.remove("llm-progress-queued");
        following = null;
      }
    }

    page.stopButton.addEventListener("click", () => {
      stop().catch((error) => page.showError(error));
    });

    return {
      follow,
      markRun,
      showRuns,
      isEventStream,
    };
  }

  return { createLive, readEventStream, OUTCOMES };
})();
