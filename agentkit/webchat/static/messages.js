// The conversation as people read it: messages, tool calls with their descriptions,
// notifications (each with a button opening the sub-agents it names), the end of a
// round that did not answer (stopped or failed, in words), and the empty state.
// Live events and a reloaded conversation go through the same functions, so a
// reload looks as the live page did. Untrusted text: textContent or renderMarkdown.
import { $, el } from "./common.js";
import { renderMarkdown, visibleControls } from "./markdown.js";

const NOTIFIED = /(?:子智能体\s*|Sub-agent )(\d+) \(/g;
const MAX_OUTPUT = 8000;

export function messagesBox() {
  return $("messages");
}

function scrollEnd(node) {
  node.scrollIntoView({ block: "end" });
}

/** Append one message (role: user, assistant, notification, notice, error). */
export function addMessage(role, text, extra = {}, box = messagesBox()) {
  const main = box === messagesBox();
  if (main) hideEmpty();
  const node = el("article", { class: `message ${role}`, "data-testid": "message", "data-role": role, ...extra });
  const body = el("div", { class: "body" });
  if (role === "assistant") body.append(renderMarkdown(text));
  else body.textContent = visibleControls(text);
  node.append(body);
  box.append(node);
  if (main) scrollEnd(node);
  return node;
}

/** The first user message shown with ``text`` and one of the classes in ``which``
 * (".pending", ".queued"), or null. */
export function shownUser(text, which) {
  const nodes = messagesBox().querySelectorAll(`.message.user:is(${which})`);
  return [...nodes].find((n) => n.textContent === visibleControls(text)) || null;
}

/** The agent ids a notification text names (spec §3 templates, both languages). */
export function notifiedIds(text) {
  return [...String(text).matchAll(NOTIFIED)].map((m) => Number(m[1]));
}

/** A sub-agent's completion announced to the model; buttons open each one named. */
export function addNotification(text, agentIds, openAgent) {
  const node = addMessage("notification", text);
  const ids = agentIds?.length ? agentIds : notifiedIds(text);
  if (ids.length && openAgent) {
    const bar = el("div", { class: "actions" });
    for (const id of ids) {
      const open = el("button", { type: "button", class: "link", "data-testid": "open-subagent", "data-agent-id": String(id) },
        `Open sub-agent ${id}'s results`);
      open.addEventListener("click", () => openAgent(id));
      bar.append(open);
    }
    node.append(bar);
  }
  return node;
}

/** A round that ended without an answer: stopped (a notice) or failed (an error
 * naming what failed and what to do: ``explanation`` from the server). */
export function addRoundEnd(status, error, explanation, background = []) {
  if (status === "cancelled") {
    const going = background.length
      ? ` Sub-agents ${background.map((i) => `#${i}`).join(", ")} keep working in the background.`
      : "";
    return addMessage("notice", `Round stopped.${going} Send a message to go on.`, { "data-status": status });
  }
  if (status === "interrupted") {
    return addMessage("notice", "This round was interrupted (the server stopped). Send a message to go on.", { "data-status": status });
  }
  return addMessage("error", explanation || `The round failed: ${error || "no reason given"}. Send a message to try again.`,
    { "data-status": status });
}

/** A tool call as a <details>: its description (the last_action words), then the
 * arguments and the output. */
export function addToolCall(page, e, box = messagesBox()) {
  if (box === messagesBox()) hideEmpty();
  const args = e.arguments == null ? "" : typeof e.arguments === "string" ? e.arguments : JSON.stringify(e.arguments, null, 2);
  const node = el("details", { class: "tool", "data-testid": "tool-call", "data-tool": e.name || "" });
  const summary = el("summary", {});
  // The words, then the tool's name once (never the name twice when words are missing).
  const words = e.last_action && e.last_action !== e.name ? e.last_action : "";
  summary.append(
    el("span", { class: "what" }, visibleControls(words)),
    el("code", { class: "name" }, e.name || (words ? "" : "a tool call")),
    el("span", { class: "result" }, ""),
  );
  node.append(summary, el("pre", { class: "args" }, visibleControls(args)), el("pre", { class: "output" }, "…"));
  if (page) page.tools.set(e.call_id, node);
  box.append(node);
  return node;
}

export function finishToolCall(node, e) {
  if (!node) return;
  const out = visibleControls(e.output || "");
  node.querySelector(".output").textContent = out.length > MAX_OUTPUT ? `${out.slice(0, MAX_OUTPUT)}\n… (${out.length} characters)` : out;
  node.classList.add(e.ok ? "ok" : "failed");
  node.querySelector(".result").textContent = e.ok ? "✓" : "✕ failed";
}

/** One stored message (GET /api/conversations/{id}: its ``kind``). */
export function showStored(page, message, openAgent) {
  const text = typeof message.content === "string" ? message.content : "";
  if (message.kind === "user") addMessage("user", text);
  else if (message.kind === "notification") addNotification(text, null, openAgent);
  else if (message.kind === "assistant") {
    if (text) addMessage("assistant", text);
    for (const call of message.tool_calls || []) {
      let args = call.function?.arguments;
      try { args = JSON.parse(args); } catch { /* shown as sent */ }
      addToolCall(page, { call_id: call.id, name: call.function?.name, arguments: args, last_action: message.actions?.[call.id] || "" });
    }
  } else if (message.kind === "tool") {
    finishToolCall(page.tools.get(message.tool_call_id), { ok: !text.startsWith("Error:"), output: text });
  }
}

// ---------------------------------------------------------------- streaming
export function streamDelta(page, text) {
  if (!page.streaming) {
    page.streaming = { node: addMessage("assistant", "", { "data-streaming": "1" }), text: "", queued: false };
  }
  page.streaming.text += text;
  if (!page.streaming.queued) {
    page.streaming.queued = true;
    const current = page.streaming;
    requestAnimationFrame(() => {
      current.queued = false;
      current.node.querySelector(".body").replaceChildren(renderMarkdown(current.text));
      scrollEnd(current.node);
    });
  }
}

export function endAssistant(page, content) {
  const current = page.streaming;
  page.streaming = null;
  if (current) {
    current.text = content ?? current.text;
    current.node.removeAttribute("data-streaming");
    if (!current.text) current.node.remove();
    else current.node.querySelector(".body").replaceChildren(renderMarkdown(current.text));
  } else if (content) addMessage("assistant", content);
}

// -------------------------------------------------------------- empty state
/** The empty conversation: where the agent works, with which model, and one line on
 * sub-agents. ``info``: GET /api/info. */
export function showEmpty(info) {
  const box = messagesBox();
  let card = $("empty");
  if (!card) {
    card = el("div", { id: "empty", class: "empty-card", "data-testid": "empty-state" });
    box.prepend(card);
  }
  const rows = [
    ["Workspace", info?.workspace || "…"],
    ["Model", info ? `${info.model || "(none)"} at ${info.base_url || "the default endpoint"}` : "…"],
  ];
  const list = el("dl");
  for (const [name, value] of rows) list.append(el("dt", {}, name), el("dd", {}, value));
  card.replaceChildren(
    el("h2", {}, info?.demo ? "A scripted demo: ask anything" : "Start a conversation"),
    list,
    el("p", {}, "The main agent can start sub-agents: helpers that work in parallel, each in its own process, "
      + "and report back when done. Ask for work (for example “review this project in the background”) "
      + "and watch them in the Agents panel."),
  );
  card.hidden = box.querySelector("[data-testid=message], [data-testid=tool-call]") !== null;
}

function hideEmpty() {
  const card = $("empty");
  if (card) card.hidden = true;
}
