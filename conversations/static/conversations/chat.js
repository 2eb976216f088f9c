/*
 * The chat page of django-llm-conversations: plain JavaScript over the REST API.
 *
 * Safety rule of this file: text that comes from a model, a tool or a user is
 * only ever put into the page as text (text nodes / textContent), never as
 * HTML, so a model cannot inject markup or script.
 *
 * While a message is being answered, the page follows the run live (see
 * chat-stream.js, loaded first): the POST asks for the run's event stream;
 * a server that answers JSON instead either ran the whole loop (201: the
 * page polled GET messages/?after=N meanwhile) or queued it for a worker
 * (202: the page follows GET runs/ID/events/). When no stream can be read,
 * the page polls the run. A conversation opened while one of its runs is
 * still running is followed the same way.
 *
 * A call held for a human decision shows approve and reject buttons when the
 * user may decide it (GET approvals/ lists those); deciding the last one of a
 * turn resumes the run, and the page then shows what it stored.
 */
(() => {
  "use strict";

  const POLL_MS = 700;
  // The run's event stream when the server offers it for a POST, else its JSON answer.
  const STREAM_ACCEPT = "text/event-stream, application/json;q=0.9";
  const TITLE_LENGTH = 80;
  const NARROW = "(max-width: 760px)";

  const root = document.getElementById("llm-chat");
  if (!root) {
    return;
  }
  const apiRoot = root.dataset.apiRoot || "/api/";
  const chatUrl = root.dataset.chatUrl || "/chat/";

  const $ = (id) => document.getElementById(id);
  const ui = {
    alert: $("llm-alert"),
    alertText: $("llm-alert-text"),
    alertClose: $("llm-alert-close"),
    composer: $("llm-composer"),
    conversations: $("llm-conversations"),
    history: $("llm-history"),
    input: $("llm-message"),
    more: $("llm-more"),
    newForm: $("llm-new"),
    profile: $("llm-profile"),
    progress: $("llm-progress"),
    send: $("llm-send"),
    stop: $("llm-stop"),
    subtitle: $("llm-subtitle"),
    title: $("llm-title"),
    transcript: $("llm-transcript"),
  };

  const state = {
    conversation: null, // {id, title, profile, ...} of the open conversation; null for a draft
    profiles: new Map(), // slug -> profile
    messages: new Map(), // position -> message, of the open conversation
    results: new Map(), // tool_call_id -> tool message, of the open conversation
    approvals: new Map(), // tool call pk -> pending approval the user may decide
    lastPosition: -1,
    busy: false,
    pending: null, // the element showing a user message not stored yet
    nextConversations: null,
    loadToken: 0, // bumped whenever another conversation is opened
    family: [], // the open conversation's family (GET branches/)
  };

  const isCurrent = (id) => Boolean(state.conversation) && state.conversation.id === id;
  const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

  // DOM helpers ------------------------------------------------------------------

  /** An element with attributes and children; strings become text nodes, never HTML. */
  function el(tag, attributes, ...children) {
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

  function scrollToEnd() {
    ui.transcript.scrollTop = ui.transcript.scrollHeight;
  }

  // The API ----------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, detail, errors) {
      super(detail);
      this.name = "ApiError";
      this.status = status;
      this.code = code;
      this.detail = detail;
      this.errors = errors;
    }
  }

  function csrfToken() {
    // The form's token works even with CSRF_COOKIE_HTTPONLY or CSRF_USE_SESSIONS.
    const field = ui.composer.querySelector("input[name=csrfmiddlewaretoken]");
    if (field && field.value) {
      return field.value;
    }
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  /** A short text for the API's ``errors`` (items {code, detail, pointer}) or DRF's field errors. */
  function describeErrors(errors) {
    if (!errors) {
      return "";
    }
    if (Array.isArray(errors)) {
      return errors
        .map((item) => {
          if (item && typeof item === "object" && item.detail) {
            return item.pointer ? `${item.pointer}: ${item.detail}` : String(item.detail);
          }
          return describeErrors(item);
        })
        .filter(Boolean)
        .join("; ");
    }
    if (typeof errors === "object") {
      return Object.entries(errors)
        .map(([key, value]) => {
          const text = describeErrors(value);
          return text ? `${key}: ${text}` : "";
        })
        .filter(Boolean)
        .join("; ");
    }
    return String(errors);
  }

  async function api(method, url, body) {
    return readAnswer(await request(method, url, body));
  }

  /** Send a request (``accept``: the media types wanted); a network failure is an ApiError. */
  async function request(method, url, body, accept = "application/json") {
    const headers = { Accept: accept };
    const init = { method, headers, credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    if (!["GET", "HEAD", "OPTIONS"].includes(method)) {
      headers["X-CSRFToken"] = csrfToken();
    }
    try {
      return await fetch(url, init);
    } catch {
      throw new ApiError(
        0,
        "network_error",
        "The server could not be reached; check the connection and try again."
      );
    }
  }

  /** The JSON of a successful answer; an ApiError for any other. */
  async function readAnswer(response) {
    let data = null;
    if ((response.headers.get("Content-Type") || "").includes("json")) {
      data = await response.json().catch(() => null);
    }
    if (response.ok) {
      return data;
    }
    let detail = data && data.detail ? String(data.detail) : "";
    // The API's shape is {code, detail, errors}; a plain DRF error is {field: [...]}.
    const extra = data ? describeErrors(data.code || data.detail ? data.errors : data) : "";
    if (!detail) {
      detail = `The server answered ${response.status} ${response.statusText || ""}`.trim() + ".";
    }
    if (extra && extra !== detail && !extra.endsWith(detail)) {
      detail += ` (${extra})`;
    }
    throw new ApiError(
      response.status,
      (data && data.code) || `http_${response.status}`,
      detail,
      data && data.errors
    );
  }

  const conversationUrl = (id) => `${apiRoot}conversations/${encodeURIComponent(id)}/`;
  const messagesUrl = (id, after = -1) =>
    `${conversationUrl(id)}messages/` + (after >= 0 ? `?after=${encodeURIComponent(after)}` : "");
  const pageItems = (data) => (Array.isArray(data) ? data : (data && data.results) || []);

  // Alerts and progress ------------------------------------------------------------

  function showError(error) {
    let text = (error && (error.detail || error.message)) || String(error);
    const code = error && error.code;
    if (code && !code.startsWith("http_") && code !== "network_error") {
      text += ` [${code}]`;
    }
    ui.alertText.textContent = text;
    ui.alert.hidden = false;
    if (!(error instanceof ApiError)) {
      console.error(error); // a bug of this script: keep the stack for whoever debugs it
    }
  }

  function hideError() {
    ui.alert.hidden = true;
    ui.alertText.textContent = "";
  }

  function setProgress(text) {
    ui.progress.textContent = text || "";
    ui.progress.hidden = !text;
  }

  function setBusy(busy) {
    state.busy = busy;
    ui.send.disabled = busy;
    ui.transcript.setAttribute("aria-busy", String(busy));
    if (!busy) {
      setProgress("");
    }
    decorate(); // no edit or regenerate while a run goes on
  }

  /** What the current run has done so far, from the messages after ``since``. */
  function describeProgress(since) {
    const names = [];
    let answered = 0;
    for (const message of state.messages.values()) {
      if (message.position > since && message.role === "assistant") {
        for (const call of message.tool_calls || []) {
          names.push(call.name);
          answered += state.results.has(call.id) ? 1 : 0;
        }
      }
    }
    if (!names.length) {
      return "Waiting for the model…";
    }
    const calls = names.length === 1 ? "1 tool call" : `${names.length} tool calls`;
    return `Working… ${calls} (${names.join(", ")}), ${answered} answered.`;
  }

  // Rendering the transcript ----------------------------------------------------------

  function formatDuration(ms) {
    if (ms === null || ms === undefined) {
      return "";
    }
    return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
  }

  /** JSON objects and arrays pretty-printed; any other text as it is. */
  function prettyJson(text) {
    try {
      const value = JSON.parse(text);
      if (value !== null && typeof value === "object") {
        return JSON.stringify(value, null, 2);
      }
    } catch {
      // Not JSON.
    }
    return text;
  }

  const hasRawArguments = (call) =>
    call.raw_arguments !== null && call.raw_arguments !== undefined && call.raw_arguments !== "";

  function callStatus(call) {
    const status = call.status || "pending";
    // A poll may have read the call before its result was stored.
    if (state.results.has(call.id) && (status === "pending" || status === "running")) {
      return "answered";
    }
    return status;
  }

  /** A card pairing one call (name, arguments) with its result; collapsed unless ``open``. */
  function buildCard(call, open) {
    const status = callStatus(call);
    const duration = formatDuration(call.duration_ms);
    const result = state.results.get(call.id);
    return el(
      "details",
      {
        className: "llm-tool",
        "data-call-id": call.id,
        "data-status": status,
        // A held call is shown open: its decision is what the user has to do next.
        open: open || status === "awaiting_approval",
      },
      el(
        "summary",
        null,
        // The spaces keep the summary readable as text (screen readers, copying).
        el("span", { className: "llm-tool-kind" }, "Tool call"),
        " ",
        el("code", { className: "llm-tool-name" }, call.name),
        " ",
        el("span", { className: `llm-badge llm-badge-${status}` }, status),
        duration && " ",
        duration && el("span", { className: "llm-tool-duration" }, duration)
      ),
      el(
        "div",
        { className: "llm-tool-body" },
        el("h3", null, "Arguments"),
        hasRawArguments(call) &&
          el("p", { className: "llm-help" }, "Not a JSON object, so the tool was not run:"),
        el(
          "pre",
          { className: "llm-tool-arguments" },
          hasRawArguments(call) ? call.raw_arguments : JSON.stringify(call.arguments || {}, null, 2)
        ),
        status === "awaiting_approval" && buildApproval(call),
        el("h3", null, "Result"),
        result
          ? el("pre", { className: "llm-tool-result" }, prettyJson(result.content || ""))
          : el("p", { className: "llm-tool-waiting" }, "Waiting for the result…")
      )
    );
  }

  /** The decision part of a held call: buttons when this user may decide it. */
  function buildApproval(call) {
    const approval = state.approvals.get(call.pk);
    if (!approval) {
      return el("p", { className: "llm-approval llm-help" }, "Waiting for a reviewer’s decision on this turn.");
    }
    return el(
      "div",
      { className: "llm-approval", "data-pk": call.pk },
      el("p", { className: "llm-help" }, "This call waits for your approval."),
      el("input", {
        className: "llm-approval-reason",
        type: "text",
        maxLength: 2000,
        placeholder: "Reason for a rejection (optional; the model reads it)",
        "aria-label": "Reason for a rejection",
      }),
      el("button", { type: "button", className: "llm-approve", "data-decision": "approve" }, "Approve"),
      " ",
      el("button", { type: "button", className: "llm-reject", "data-decision": "reject" }, "Reject")
    );
  }

  /** Read the approvals this user may decide in the open conversation, and redraw held calls. */
  async function loadApprovals() {
    const conversation = state.conversation;
    const held = [...state.messages.values()].filter((m) =>
      (m.tool_calls || []).some((c) => c.status === "awaiting_approval")
    );
    state.approvals = new Map();
    if (!conversation || !held.length) {
      return;
    }
    const approvals = await api("GET", `${apiRoot}approvals/`);
    if (!isCurrent(conversation.id)) {
      return;
    }
    for (const approval of approvals || []) {
      if (approval.conversation === conversation.id) {
        state.approvals.set(approval.tool_call.pk, approval);
      }
    }
    held.forEach(renderMessage);
    setProgress(state.approvals.size ? "Waiting for your approval." : "Waiting for a reviewer.");
  }

  /** Approve or reject one held call; once the run resumed, show what it stored. */
  async function decide(pk, decision, reason) {
    const conversation = state.conversation;
    if (state.busy || !conversation) {
      return;
    }
    hideError();
    setBusy(true);
    setProgress(decision === "approve" ? "Approving…" : "Rejecting…");
    const since = state.lastPosition;
    try {
      const body = decision === "reject" && reason.trim() ? { reason: reason.trim() } : undefined;
      let result = await api("POST", `${apiRoot}tool-calls/${encodeURIComponent(pk)}/${decision}/`, body);
      if (result && result.run && result.run.status === "running") {
        result = await followRun(conversation.id, result.run, since);
      }
      if (isCurrent(conversation.id)) {
        await openConversation(conversation.id, false);
        reportRun(result && result.run);
      }
    } catch (error) {
      showError(error);
    } finally {
      setBusy(false);
    }
  }

  function findCard(callId) {
    return [...ui.transcript.querySelectorAll(".llm-tool")].find(
      (card) => card.dataset.callId === callId
    );
  }

  /** Redraw the card of ``callId`` (its result arrived); false when it is not on the page. */
  function refreshCard(callId) {
    const card = findCard(callId);
    if (!card) {
      return false;
    }
    const message = state.messages.get(Number(card.closest(".llm-msg").dataset.position));
    const call = (message.tool_calls || []).find((c) => c.id === callId);
    card.replaceWith(buildCard(call, card.open));
    return true;
  }

  const ROLE_LABELS = { user: "You", assistant: "Assistant", system: "System", tool: "Tool result" };

  function buildMeta(message) {
    const parts = [];
    if (message.model) {
      parts.push(message.model);
    }
    const total = message.usage && message.usage.total_tokens;
    if (total !== null && total !== undefined) {
      parts.push(`${total} tokens`);
    }
    return parts.length ? el("p", { className: "llm-msg-meta" }, parts.join(" · ")) : null;
  }

  function buildMessage(message, previous) {
    const article = el(
      "article",
      { className: `llm-msg llm-msg-${message.role}`, "data-position": message.position },
      el("p", { className: "llm-msg-role" }, ROLE_LABELS[message.role] || message.role)
    );
    if (message.role === "tool") {
      // A result whose call is not on the page (should not happen): still shown.
      article.append(el("pre", { className: "llm-tool-result" }, prettyJson(message.content || "")));
      return article;
    }
    if (message.content) {
      article.append(el("div", { className: "llm-msg-text" }, message.content));
    }
    const calls = message.tool_calls || [];
    if (calls.length) {
      // Redrawing keeps the cards the user opened open.
      const open = new Set(
        previous ? [...previous.querySelectorAll(".llm-tool[open]")].map((c) => c.dataset.callId) : []
      );
      article.append(
        el("div", { className: "llm-tools" }, ...calls.map((call) => buildCard(call, open.has(call.id))))
      );
    }
    const meta = message.role === "assistant" && buildMeta(message);
    if (meta) {
      article.append(meta);
    }
    return article;
  }

  function insertInOrder(node, position) {
    const later = [...ui.transcript.querySelectorAll(".llm-msg[data-position]")].find(
      (other) => Number(other.dataset.position) > position
    );
    if (later) {
      ui.transcript.insertBefore(node, later);
    } else if (state.pending && state.pending.isConnected) {
      ui.transcript.insertBefore(node, state.pending); // the pending message stays last
    } else {
      ui.transcript.append(node);
    }
  }

  /** Show ``message`` (new, or a newer state of one on the page). */
  function renderMessage(message) {
    const position = Number(message.position);
    state.messages.set(position, message);
    state.lastPosition = Math.max(state.lastPosition, position);
    if (message.role === "user" && state.pending) {
      state.pending.remove();
      state.pending = null;
    }
    if (message.role === "tool" && message.tool_call_id) {
      state.results.set(message.tool_call_id, message);
      if (refreshCard(message.tool_call_id)) {
        return;
      }
    }
    const previous = ui.transcript.querySelector(`.llm-msg[data-position="${position}"]`);
    const node = buildMessage(message, previous);
    if (previous) {
      previous.replaceWith(node);
    } else {
      insertInOrder(node, position);
    }
  }

  function renderMessages(messages) {
    if (messages.length) {
      const placeholder = $("llm-placeholder");
      if (placeholder) {
        placeholder.remove();
      }
    }
    [...messages].sort((a, b) => a.position - b.position).forEach(renderMessage);
    decorate();
    scrollToEnd();
  }

  function resetTranscript(text) {
    state.family = [];
    state.messages = new Map();
    state.results = new Map();
    state.lastPosition = -1;
    state.pending = null;
    ui.transcript.replaceChildren();
    if (text) {
      ui.transcript.append(el("p", { id: "llm-placeholder", className: "llm-placeholder" }, text));
    }
  }

  function showPending(content) {
    const placeholder = $("llm-placeholder");
    if (placeholder) {
      placeholder.remove();
    }
    state.pending = el(
      "article",
      { className: "llm-msg llm-msg-user llm-pending" },
      el("p", { className: "llm-msg-role" }, "You"),
      el("div", { className: "llm-msg-text" }, content)
    );
    ui.transcript.append(state.pending);
    scrollToEnd();
  }

  function dropPending() {
    if (state.pending) {
      state.pending.remove();
      state.pending = null;
    }
  }

  // Profiles and the conversation list ------------------------------------------------

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

  function profileName(slug) {
    const profile = slug && state.profiles.get(slug);
    return profile ? profile.name : slug || "";
  }

  async function loadProfiles() {
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

  function conversationItem(conversation) {
    const when = conversation.updated_at || conversation.created_at;
    const date = when ? new Date(when) : null;
    return el(
      "li",
      null,
      el(
        "a",
        {
          href: `${chatUrl}${encodeURIComponent(conversation.id)}/`,
          "data-id": conversation.id,
          "aria-current": isCurrent(conversation.id) ? "page" : null,
        },
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

  function showEmptyList() {
    if (!ui.conversations.querySelector("li")) {
      ui.conversations.append(el("li", { className: "llm-empty-list" }, "No conversations yet."));
    }
  }

  async function loadConversations(url, append) {
    let data;
    try {
      data = await api("GET", url || `${apiRoot}conversations/`);
    } catch (error) {
      showError(error); // the list the server rendered stays
      return;
    }
    const items = pageItems(data).map(conversationItem);
    if (append) {
      ui.conversations.append(...items);
    } else {
      ui.conversations.replaceChildren(...items);
    }
    showEmptyList();
    state.nextConversations = (data && data.next) || null;
    ui.more.hidden = !state.nextConversations;
  }

  function putFirstInList(conversation) {
    for (const link of ui.conversations.querySelectorAll("a[data-id]")) {
      if (link.dataset.id === String(conversation.id)) {
        link.closest("li").remove();
      }
    }
    const empty = ui.conversations.querySelector(".llm-empty-list");
    if (empty) {
      empty.remove();
    }
    ui.conversations.prepend(
      conversationItem({ ...conversation, updated_at: new Date().toISOString() })
    );
  }

  function markCurrentInList() {
    for (const link of ui.conversations.querySelectorAll("a[data-id]")) {
      if (isCurrent(link.dataset.id)) {
        link.setAttribute("aria-current", "page");
      } else {
        link.removeAttribute("aria-current");
      }
    }
  }

  function updateHeader() {
    if (state.conversation) {
      ui.title.textContent = state.conversation.title || "Untitled conversation";
      ui.subtitle.textContent = profileName(state.conversation.profile);
      document.title = `${ui.title.textContent} · Chat`;
    } else {
      ui.title.textContent = "New conversation";
      ui.subtitle.textContent = ui.profile.value ? `Profile: ${profileName(ui.profile.value)}` : "";
      document.title = "Chat";
    }
  }

  // Opening conversations -----------------------------------------------------------

  async function openConversation(id, push) {
    const token = ++state.loadToken;
    const stale = () => token !== state.loadToken;
    hideError();
    resetTranscript("Loading messages…");
    state.conversation = { id, title: ui.title.textContent, profile: null };
    markCurrentInList();
    if (push) {
      window.history.pushState({ conversation: id }, "", `${chatUrl}${encodeURIComponent(id)}/`);
    }
    try {
      const conversation = await api("GET", conversationUrl(id));
      if (stale()) {
        return;
      }
      state.conversation = conversation;
      updateHeader();
      let url = messagesUrl(id);
      while (url) {
        const data = await api("GET", url);
        if (stale()) {
          return;
        }
        renderMessages(pageItems(data));
        url = data && data.next;
      }
      if (!state.messages.size) {
        resetTranscript("No messages yet. Ask something below.");
      }
      await live.showRuns(id, stale);
      await loadFamily(id, stale);
      if (stale()) {
        return;
      }
      if (conversation.last_run && conversation.last_run.status === "running" && !state.busy) {
        attachToRun(conversation.id, conversation.last_run); // still being answered
      }
      await loadApprovals().catch(showError); // the transcript stays either way
    } catch (error) {
      if (!stale()) {
        resetTranscript("");
        showError(error);
      }
    }
  }

  function startDraft(push) {
    state.loadToken += 1;
    state.conversation = null;
    hideError();
    resetTranscript("Ask something below: your first message starts the conversation.");
    markCurrentInList();
    updateHeader();
    if (push) {
      window.history.pushState({ conversation: null }, "", chatUrl);
    }
    ui.input.focus();
  }

  function idFromLocation() {
    const path = window.location.pathname;
    return path.startsWith(chatUrl) ? decodeURIComponent(path.slice(chatUrl.length).replace(/\/$/, "")) : "";
  }

  // Sending a message ---------------------------------------------------------------

  function titleFrom(content) {
    const line = content.trim().split("\n")[0].trim();
    return line.length > TITLE_LENGTH ? `${line.slice(0, TITLE_LENGTH - 1)}…` : line;
  }

  /** Poll new messages of ``id`` until ``stop()``, which resolves once no poll is in flight. */
  function startPolling(id, since) {
    let active = true;
    let timer = null;
    let inFlight = Promise.resolve();
    const tick = () => {
      inFlight = (async () => {
        try {
          const data = await api("GET", messagesUrl(id, state.lastPosition));
          if (active && isCurrent(id)) {
            renderMessages(pageItems(data));
            setProgress(describeProgress(since));
          }
        } catch {
          // Progress is a nicety: the POST reports what matters.
        }
        if (active) {
          timer = window.setTimeout(tick, POLL_MS);
        }
      })();
    };
    timer = window.setTimeout(tick, POLL_MS);
    return {
      stop() {
        active = false;
        window.clearTimeout(timer);
        return inFlight;
      },
    };
  }

  const runUrl = (id) => `${apiRoot}runs/${encodeURIComponent(id)}/`;

  const live = window.LLMChatStream.createLive({
    el,
    api,
    apiRoot,
    isCurrent,
    renderMessages,
    updateCall,
    setProgress,
    showError,
    transcript: ui.transcript,
    stopButton: ui.stop,
    progress: ui.progress,
    messages: () => [...state.messages.values()],
  });

  /** Polling fallback: wait for the run to end, showing new messages meanwhile. */
  async function pollRun(conversationId, run, since) {
    while (run.status === "running") {
      await sleep(POLL_MS);
      run = await api("GET", runUrl(run.id));
      if (isCurrent(conversationId)) {
        renderMessages(pageItems(await api("GET", messagesUrl(conversationId, state.lastPosition))));
        setProgress(describeProgress(since));
      }
    }
    return run;
  }

  /** A newer state of one call (from an event): update it in its assistant message. */
  function updateCall(call, position) {
    let message = position !== undefined ? state.messages.get(Number(position)) : undefined;
    if (!message) {
      message = [...state.messages.values()].find((m) =>
        (m.tool_calls || []).some((c) => c.id === call.id)
      );
    }
    if (!message) {
      return;
    }
    message.tool_calls = (message.tool_calls || []).map((c) => (c.id === call.id ? call : c));
    renderMessage(message);
  }

  /** Wait for a run to end, live when its events can be read; then read what it stored. */
  async function followRun(conversationId, run, since, response) {
    const progress = (text) => isCurrent(conversationId) && setProgress(text || describeProgress(since));
    let followed = await live.follow({ conversationId, run, response, progress });
    if (!followed.ended) {
      let known = followed.run;
      if (!known.id) {
        known = (await api("GET", conversationUrl(conversationId))).last_run || { status: "completed" };
      }
      followed = { run: known.status === "running" ? await pollRun(conversationId, known, since) : known };
    }
    const data = await api("GET", messagesUrl(conversationId, since));
    return { run: followed.run, messages: pageItems(data) };
  }

  function reportRun(run) {
    if (!run || run.status === "completed") {
      return;
    }
    if (run.status === "awaiting_approval") {
      loadApprovals().catch(showError);
      return;
    }
    live.markRun(run);
    if (run.status === "cancelled") {
      return; // asked for: the note in the transcript says it
    }
    // Worded as the API's error answer of a failed run: its message, then [its code].
    showError({
      detail: run.error_message || `The run ended with status “${run.status}”.`,
      code: run.error_code || "",
    });
  }

  /** The open conversation, or a new one (titled after the message) for a draft. */
  async function ensureConversation(content) {
    if (state.conversation) {
      return state.conversation;
    }
    const body = { title: titleFrom(content) };
    if (ui.profile.value) {
      body.profile = ui.profile.value;
    }
    const conversation = await api("POST", `${apiRoot}conversations/`, body);
    state.loadToken += 1;
    state.conversation = conversation;
    window.history.pushState(
      { conversation: conversation.id },
      "",
      `${chatUrl}${encodeURIComponent(conversation.id)}/`
    );
    putFirstInList(conversation);
    markCurrentInList();
    updateHeader();
    return conversation;
  }

  async function send(content) {
    if (state.busy || !content.trim()) {
      return;
    }
    hideError();
    setBusy(true);
    setProgress("Sending…");
    showPending(content);
    ui.input.value = "";
    const since = state.lastPosition;
    let conversation = null;
    try {
      conversation = await ensureConversation(content);
      setProgress(describeProgress(since));
      // Until the answer starts (the stream's headers, or the whole JSON of a
      // server that runs the loop before answering), polls show the progress.
      const poller = startPolling(conversation.id, since);
      let response;
      try {
        response = await request("POST", messagesUrl(conversation.id), { content }, STREAM_ACCEPT);
      } finally {
        // Let a poll in flight land first, so it cannot overwrite the final state.
        await poller.stop();
      }
      let result;
      if (response.ok && live.isEventStream(response)) {
        result = await followRun(conversation.id, null, since, response);
      } else {
        result = await readAnswer(response);
      }
      if (result && result.run && result.run.status === "running") {
        // Answer 202: a worker runs the loop; follow its events.
        if (isCurrent(conversation.id)) {
          renderMessages(result.messages || []);
        }
        result = await followRun(conversation.id, result.run, since);
      }
      if (isCurrent(conversation.id)) {
        renderMessages((result && result.messages) || []);
        reportRun(result && result.run);
        if (state.pending) {
          // The answer did not include the user's message: read what is stored.
          renderMessages(pageItems(await api("GET", messagesUrl(conversation.id, since))));
          dropPending();
        }
      }
      putFirstInList(conversation);
      markCurrentInList();
    } catch (error) {
      showError(error);
      dropPending();
      await recover(conversation, since, content);
    } finally {
      setBusy(false);
      ui.input.focus();
    }
  }

  /** Follow a run that was already running when the conversation was opened. */
  async function attachToRun(conversationId, run) {
    setBusy(true);
    const since = state.lastPosition;
    try {
      const result = await followRun(conversationId, run, since);
      if (isCurrent(conversationId)) {
        renderMessages(result.messages);
        reportRun(result.run);
      }
    } catch (error) {
      if (isCurrent(conversationId)) {
        showError(error);
      }
    } finally {
      setBusy(false);
    }
  }

  /**
   * After a failed send, show what is stored (a provider error can come after
   * the user's message was saved) and give the text back when it was not.
   */
  async function recover(conversation, since, content) {
    if (conversation && isCurrent(conversation.id)) {
      try {
        renderMessages(pageItems(await api("GET", messagesUrl(conversation.id, since))));
        await live.showRuns(conversation.id, () => !isCurrent(conversation.id));
      } catch {
        // The alert already tells what went wrong.
      }
    }
    const stored = [...state.messages.values()].some(
      (message) => message.position > since && message.role === "user"
    );
    if (!stored && !ui.input.value) {
      ui.input.value = content;
    }
  }

  // Branches: edit, regenerate, switch -------------------------------------------------
  //
  // An edit or a regeneration never changes a conversation: the API copies the
  // start of it into a new branch and answers there, and the page opens the
  // branch. The family (GET branches/) gives each member's source and cut; a
  // branch differs from its source from ``forked_at_position + 1`` on (from 0
  // when nothing was copied), which is where the "2 / 3" switch is shown.

  const divergence = (conversation) =>
    conversation.forked_at_position === null ? 0 : conversation.forked_at_position + 1;

  /** position -> {options, current}: the conversations to switch between at that message. */
  function branchSwitches(family, currentId) {
    const byId = new Map(family.map((member) => [member.id, member]));
    const childrenAt = (parentId, position) =>
      family.filter((member) => member.forked_from === parentId && divergence(member) === position);
    const switches = new Map();
    let member = byId.get(currentId);
    let limit = Infinity; // positions from here on belong to a descendant already seen
    while (member) {
      const parent = member.forked_from ? byId.get(member.forked_from) : undefined;
      const low = parent ? divergence(member) : 0;
      for (const child of family) {
        const position = child.forked_from === member.id ? divergence(child) : -1;
        if (position >= low && position < limit && !switches.has(position)) {
          switches.set(position, { options: [member, ...childrenAt(member.id, position)], current: member.id });
        }
      }
      if (parent && low < limit) {
        const options = [parent, ...childrenAt(parent.id, low)];
        for (const child of childrenAt(member.id, low)) {
          options.push(child);
        }
        switches.set(low, { options, current: member.id });
      }
      limit = Math.min(limit, low);
      member = parent;
    }
    return switches;
  }

  async function loadFamily(id, stale) {
    try {
      const family = await api("GET", `${conversationUrl(id)}branches/`);
      if (!stale()) {
        state.family = Array.isArray(family) ? family : [];
        decorate();
      }
    } catch {
      // Without the family the page still works; there is just no switch.
    }
  }

  function buildSwitch(position, choice) {
    const index = choice.options.findIndex((option) => option.id === choice.current);
    const go = (step) => {
      const target = choice.options[(index + step + choice.options.length) % choice.options.length];
      if (!state.busy && target && target.id !== state.conversation.id) {
        openConversation(target.id, true);
      }
    };
    return el(
      "nav",
      { className: "llm-branch-switch", "aria-label": `Versions of message ${position + 1}` },
      // Disabled while a run of the page goes on (setBusy redraws them when it ends).
      el("button", { type: "button", className: "llm-secondary", "aria-label": "Previous version", disabled: state.busy, onclick: () => go(-1) }, "‹"),
      el("span", { className: "llm-branch-count" }, `${index + 1} / ${choice.options.length}`),
      el("button", { type: "button", className: "llm-secondary", "aria-label": "Next version", disabled: state.busy, onclick: () => go(1) }, "›")
    );
  }

  /** The edit and regenerate buttons and the version switches, redrawn after each change. */
  function decorate() {
    ui.transcript.querySelectorAll(".llm-msg-actions, .llm-branch-switch").forEach((node) => node.remove());
    if (!state.conversation || !state.conversation.id) {
      return;
    }
    const articles = [...ui.transcript.querySelectorAll(".llm-msg[data-position]")];
    const switches = branchSwitches(state.family || [], state.conversation.id);
    for (const article of articles) {
      const choice = switches.get(Number(article.dataset.position));
      if (choice && choice.options.length > 1) {
        article.append(buildSwitch(Number(article.dataset.position), choice));
      }
    }
    if (state.busy) {
      return;
    }
    for (const article of articles) {
      if (article.classList.contains("llm-msg-user") && !article.querySelector("form")) {
        const position = Number(article.dataset.position);
        article.append(
          el(
            "p",
            { className: "llm-msg-actions" },
            el("button", { type: "button", className: "llm-secondary", onclick: () => startEdit(article, position) }, "Edit")
          )
        );
      }
    }
    const last = articles[articles.length - 1];
    if (last && last.classList.contains("llm-msg-assistant")) {
      last.append(
        el(
          "p",
          { className: "llm-msg-actions" },
          el("button", { type: "button", className: "llm-secondary", onclick: regenerate }, "Regenerate")
        )
      );
    }
  }

  function startEdit(article, position) {
    const message = state.messages.get(position);
    const box = el("textarea", { className: "llm-edit-box", rows: 3, "aria-label": "Edited message" });
    box.value = (message && message.content) || "";
    const form = el(
      "form",
      { className: "llm-edit" },
      box,
      el("button", { type: "submit" }, "Send in a new branch"),
      el("button", { type: "button", className: "llm-secondary", onclick: () => renderMessage(message) }, "Cancel")
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (box.value.trim()) {
        branchTurn(`${conversationUrl(state.conversation.id)}messages/${position}/edit/`, { content: box.value });
      }
    });
    article.querySelectorAll(".llm-msg-text, .llm-msg-actions").forEach((node) => node.remove());
    article.append(form);
    box.focus();
  }

  function regenerate() {
    branchTurn(`${conversationUrl(state.conversation.id)}regenerate/`, undefined);
  }

  /** The conversation id at the end of an API URL (the ``Location`` of a new branch). */
  function idFromApiUrl(url) {
    const parts = new URL(url, window.location.href).pathname.split("/").filter(Boolean);
    return decodeURIComponent(parts[parts.length - 1] || "");
  }

  /**
   * POST an edit or a regeneration and open the branch it answers in.
   *
   * The server streams the branch's run when it can (its ``Location`` names the
   * branch): the branch opens at once and the answer grows there as it does
   * after sending a message. Otherwise the JSON answer names the branch.
   */
  async function branchTurn(url, body) {
    if (state.busy) {
      return;
    }
    hideError();
    setBusy(true);
    setProgress("Answering in a new branch…");
    let branchId = null;
    let opened = false;
    let result = null;
    try {
      const response = await request("POST", url, body, STREAM_ACCEPT);
      if (response.ok && live.isEventStream(response) && response.headers.get("Location")) {
        branchId = idFromApiUrl(response.headers.get("Location"));
        opened = true;
        await openConversation(branchId, true);
        result = await followRun(branchId, null, state.lastPosition, response);
      } else {
        result = await readAnswer(response);
        branchId = result.conversation.id;
        if (result.run && result.run.status === "running") {
          // Queued for a worker: follow its events in the branch.
          opened = true;
          await openConversation(branchId, true);
          result = await followRun(branchId, result.run, state.lastPosition);
        }
      }
    } catch (error) {
      showError(error);
    } finally {
      setBusy(false);
    }
    if (!branchId) {
      decorate();
      return;
    }
    if (!opened) {
      await openConversation(branchId, true);
    } else if (isCurrent(branchId)) {
      await openConversation(branchId, false); // the stored answer, with the branch switches
    } else {
      return; // the user went elsewhere meanwhile
    }
    reportRun(result && result.run);
  }

  // Wiring ---------------------------------------------------------------------------

  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send(ui.input.value);
  });

  ui.input.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter (and Enter while an input method composes) adds a line.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send(ui.input.value);
    }
  });

  ui.newForm.addEventListener("submit", (event) => {
    event.preventDefault();
    startDraft(true);
  });

  ui.profile.addEventListener("change", () => {
    if (!state.conversation) {
      updateHeader();
    }
  });

  ui.alertClose.addEventListener("click", hideError);

  ui.transcript.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-decision]");
    const box = button && button.closest(".llm-approval");
    if (box) {
      const reason = box.querySelector(".llm-approval-reason");
      decide(box.dataset.pk, button.dataset.decision, reason ? reason.value : "");
    }
  });

  ui.more.addEventListener("click", () => {
    if (state.nextConversations) {
      loadConversations(state.nextConversations, true);
    }
  });

  ui.conversations.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-id]");
    if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return; // let the browser open it (new tab, ...)
    }
    event.preventDefault();
    if (window.matchMedia(NARROW).matches) {
      ui.history.open = false;
    }
    openConversation(link.dataset.id, true);
  });

  window.addEventListener("popstate", () => {
    const id = idFromLocation();
    if (id) {
      openConversation(id, false);
    } else {
      startDraft(false);
    }
  });

  // Start -----------------------------------------------------------------------------

  if (window.matchMedia(NARROW).matches) {
    ui.history.open = false; // on a phone the list folds away above the chat
  }
  const initial = root.dataset.conversation;
  if (initial) {
    state.conversation = { id: initial, title: ui.title.textContent, profile: null };
  }
  (async () => {
    await loadProfiles();
    await loadConversations(null, false);
    if (initial) {
      await openConversation(initial, false);
    } else {
      updateHeader();
    }
  })();
})();
