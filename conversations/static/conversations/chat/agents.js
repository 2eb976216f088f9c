/*
 * An agent's work inside the card of the call that started it: a nested,
 * collapsible transcript. While the caller's run goes on, the agent's
 * progress (the ``agent.*`` events of the run's stream) fills it live; once
 * the call is stored with its ``agent_conversation``, opening it reads that
 * conversation's messages. The state lives here, by call id, so a card that
 * is drawn again (its result arrived) keeps what it showed.
 */

import { api, messagesUrl, pageItems } from "./api.js";
import { oneLine } from "./format.js";
import { el } from "./dom.js";

const byCall = new Map(); // call id -> {run, conversation, profile, status, text, tools, open}
const callOfRun = new Map(); // agent run id -> call id
const transcripts = new Map(); // conversation id -> its messages, once read

/** Forget every agent the page has seen (another conversation opens). */
export function resetAgents() {
  byCall.clear();
  callOfRun.clear();
}

/**
 * Take in one ``agent.*`` event; returns the call id whose card should be drawn
 * again, or null. Events of agents further down (their call is not on this page)
 * are kept but change no card.
 */
export function agentEvent(type, data) {
  const kind = type.slice("agent.".length);
  if (!data || typeof data.run !== "string") {
    return null;
  }
  if (kind === "started" && data.call_id) {
    callOfRun.set(data.run, data.call_id);
    byCall.set(data.call_id, {
      run: data.run,
      conversation: data.conversation,
      profile: data.profile,
      status: "running",
      text: "",
      tools: [],
      open: true,
    });
    return data.call_id;
  }
  const callId = callOfRun.get(data.run);
  const agent = callId && byCall.get(callId);
  if (!agent) {
    return null;
  }
  if (kind === "text.delta" && typeof data.text === "string") {
    agent.text += data.text;
  } else if (kind === "tool_call.delta" && data.name) {
    agent.tools.push(data.name);
  } else if (kind === "finished") {
    agent.status = data.status || agent.status;
  } else {
    return null;
  }
  return callId;
}

/** The nested transcript of ``call``'s agent, or null when the call started none. */
export function buildAgent(call) {
  const agent = byCall.get(call.id);
  const conversation = call.agent_conversation || (agent && agent.conversation);
  if (!agent && !conversation) {
    return null;
  }
  const profile = agent ? agent.profile : call.name.replace(/^agent_/, "");
  const body = el("div", { className: "llm-agent-transcript" });
  const details = el(
    "details",
    {
      className: "llm-agent",
      "data-conversation": conversation || "",
      open: Boolean(agent && agent.open),
    },
    el(
      "summary",
      null,
      "Agent ",
      el("code", null, profile),
      agent ? ` · ${statusWord(agent.status)}` : ""
    ),
    body
  );
  const stored = conversation && transcripts.get(conversation);
  if (stored) {
    fillStored(body, stored);
  } else if (agent) {
    fillLive(body, agent);
  }
  details.addEventListener("toggle", () => {
    if (agent) {
      agent.open = details.open;
    }
    if (details.open && conversation && !transcripts.has(conversation) && (!agent || agent.status !== "running")) {
      load(conversation, body);
    }
  });
  return details;
}

function fillLive(body, agent) {
  body.replaceChildren(
    ...agent.tools.map((name) => el("p", { className: "llm-agent-tool" }, "Calls ", el("code", null, name))),
    el("p", { className: "llm-agent-text" }, agent.text || (agent.status === "running" ? "…" : ""))
  );
}

function fillStored(body, messages) {
  body.replaceChildren(...messages.map(line));
}

/** One message of an agent's conversation, as one short line. */
function line(message) {
  const calls = (message.tool_calls || []).map((c) => c.name).join(", ");
  const text =
    message.role === "tool"
      ? oneLine(message.content || "")
      : message.content || (calls ? `Calls ${calls}` : "");
  return el(
    "p",
    { className: `llm-agent-line llm-agent-${message.role}`, "data-role": message.role },
    el("span", { className: "llm-agent-role" }, roleWord(message.role)),
    " ",
    el("span", { className: "llm-agent-content" }, text)
  );
}

const statusWord = (status) =>
  ({ running: "working…", completed: "done" })[status] || String(status).replace(/_/g, " ");

const roleWord = (role) => ({ user: "Task", assistant: "Agent", tool: "Result", system: "System" })[role] || role;

async function load(conversation, body) {
  body.replaceChildren(el("p", { className: "llm-help" }, "Loading the agent’s transcript…"));
  try {
    const messages = pageItems(await api("GET", messagesUrl(conversation)));
    transcripts.set(conversation, messages);
    fillStored(body, messages);
  } catch {
    body.replaceChildren(el("p", { className: "llm-help" }, "The agent’s transcript could not be read."));
  }
}
