// The agentkit web chat page: conversations, the streamed conversation, sub-agents.
// All untrusted text (model, tool and file output) goes through textContent or the
// safe Markdown renderer; nothing is ever assigned to innerHTML.
import { $, api, el } from "./common.js";
import { closeAgentDetail, tickRuntimes, upsertAgent } from "./agents.js";
import { renderMarkdown } from "./markdown.js";

const page = {
  current: null, // conversation id
  source: null, // EventSource
  lastSeq: 0,
  streaming: null, // {node, text} of the assistant message being streamed
  tools: new Map(), // call_id -> details element
  agents: new Map(), // agent_id -> {row, info, at}
  openAgent: null,
};
// For tests and debugging: every seq received, in order (duplicates included).
window.agentkitDebug = { seqs: [], resets: 0, connections: 0 };

function showError(message) {
  addMessage("error", message);
}

// ------------------------------------------------------------ conversations
async function loadConversations() {
  const { conversations } = await api("/api/conversations");
  const list = $("conversations");
  list.replaceChildren();
  for (const c of conversations) {
    const item = el("li", { "data-testid": "conversation", "data-id": c.id });
    if (c.id === page.current) {
      item.classList.add("current");
      $("title").textContent = c.title;
    }
    const name = el("button", { class: "name", type: "button", title: c.id }, c.title);
    name.addEventListener("click", () => switchTo(c.id));
    const rename = el("button", { class: "icon", type: "button", title: "Rename" }, "✎");
    rename.addEventListener("click", () => startRename(item, c));
    const del = el("button", { class: "icon", type: "button", title: "Delete" }, "✕");
    del.addEventListener("click", () => confirmDelete(del, c.id));
    const badge = el("span", { class: `badge ${c.state}` }, c.subagents_running ? `${c.subagents_running}⚙` : "");
    item.append(name, badge, rename, del);
    list.append(item);
  }
  return conversations;
}

function startRename(item, c) {
  const input = el("input", { value: c.title, "data-testid": "rename-input" });
  item.replaceChildren(input);
  input.focus();
  input.select();
  const done = async (save) => {
    if (save && input.value.trim()) {
      try { await api(`/api/conversations/${c.id}`, { method: "PATCH", body: { title: input.value } }); }
      catch (e) { showError(e.message); }
      if (c.id === page.current) $("title").textContent = input.value.trim();
    }
    loadConversations();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") done(true);
    if (e.key === "Escape") done(false);
  });
  input.addEventListener("blur", () => done(true), { once: true });
}

function confirmDelete(button, id) {
  if (button.dataset.armed !== "1") {
    button.dataset.armed = "1";
    button.textContent = "delete?";
    setTimeout(() => { button.dataset.armed = ""; button.textContent = "✕"; }, 3000);
    return;
  }
  api(`/api/conversations/${id}`, { method: "DELETE" })
    .then(async () => {
      if (id === page.current) {
        page.current = null;
        await switchTo(null);
      } else loadConversations();
    })
    .catch((e) => showError(e.message));
}

async function switchTo(id) {
  if (id && id === page.current) return;
  const leaving = page.current;
  closeStream();
  let detail;
  try {
    detail = await api("/api/switch", { method: "POST", body: { leaving, to: id } });
  } catch (e) {
    showError(e.message);
    return;
  }
  page.current = detail.id;
  history.replaceState(null, "", `#${detail.id}`);
  showConversation(detail);
  openStream();
  loadConversations();
}

async function reloadConversation() {
  closeStream();
  const detail = await api(`/api/conversations/${page.current}`);
  showConversation(detail);
  openStream();
}

function showConversation(detail) {
  $("title").textContent = detail.title;
  $("messages").replaceChildren();
  page.tools.clear();
  page.streaming = null;
  page.lastSeq = detail.last_seq;
  for (const message of detail.messages) {
    // One message that cannot be shown must not hide the ones after it.
    try { showStored(message); } catch (e) {
      console.error("agentkit: a stored message could not be shown", e);
      addMessage("error", `a message could not be shown: ${e.message}`);
    }
  }
  page.agents.clear();
  $("subagents").replaceChildren();
  for (const info of detail.subagent_rows) upsertAgent(page, info, showError);
  closeAgentDetail(page);
  setState(detail.state);
  // The same words as live: "all done" once an idle conversation has been answered.
  const answered = detail.messages.some((m) => m.kind === "assistant");
  setWork(detail.state === "waiting_for_subagents" ? "background work still running"
    : detail.state === "idle" && answered ? "all done" : "");
}

function showStored(message) {
  const text = typeof message.content === "string" ? message.content : "";
  if (message.kind === "user") addMessage("user", text);
  else if (message.kind === "notification") addMessage("notification", text);
  else if (message.kind === "assistant") {
    if (text) addMessage("assistant", text);
    for (const call of message.tool_calls || []) {
      let args = call.function?.arguments;
      try { args = JSON.parse(args); } catch { /* shown as sent */ }
      toolStarted({ call_id: call.id, name: call.function?.name, arguments: args, last_action: "" });
    }
  } else if (message.kind === "tool") {
    toolFinished({ call_id: message.tool_call_id, ok: !text.startsWith("Error:"), output: text });
  }
}

// ------------------------------------------------------------------ messages
function addMessage(role, text, extra = {}) {
  const node = el("article", { class: `message ${role}`, "data-testid": "message", "data-role": role, ...extra });
  const body = el("div", { class: "body" });
  if (role === "assistant") body.append(renderMarkdown(text));
  else body.textContent = text;
  node.append(body);
  $("messages").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function streamDelta(text) {
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
      current.node.scrollIntoView({ block: "end" });
    });
  }
}

function endAssistant(content) {
  const current = page.streaming;
  page.streaming = null;
  if (current) {
    current.text = content ?? current.text;
    current.node.removeAttribute("data-streaming");
    if (!current.text) current.node.remove();
    else current.node.querySelector(".body").replaceChildren(renderMarkdown(current.text));
  } else if (content) addMessage("assistant", content);
}

function toolStarted(e) {
  const box = el("details", { class: "tool", "data-testid": "tool-call" });
  const args = e.arguments == null ? "" : typeof e.arguments === "string" ? e.arguments : JSON.stringify(e.arguments, null, 2);
  box.append(
    el("summary", {}, `⚙ ${e.name}${e.last_action ? ` — ${e.last_action}` : ""}`),
    el("pre", { class: "args" }, args),
    el("pre", { class: "output" }, "…"),
  );
  page.tools.set(e.call_id, box);
  $("messages").append(box);
}

function toolFinished(e) {
  const box = page.tools.get(e.call_id);
  if (!box) return;
  const out = e.output || "";
  box.querySelector(".output").textContent = out.length > 8000 ? `${out.slice(0, 8000)}\n… (${out.length} characters)` : out;
  box.classList.add(e.ok ? "ok" : "failed");
}

function setState(state) {
  $("state").textContent = state;
  $("state").className = `state ${state}`;
  $("cancel").hidden = state !== "running";
}

function setWork(text) {
  $("work").textContent = text;
}

// --------------------------------------------------------------- the stream
function closeStream() {
  if (page.source) page.source.close();
  page.source = null;
}

function openStream() {
  const id = page.current;
  const source = new EventSource(`/api/conversations/${id}/events?after=${page.lastSeq}`);
  page.source = source;
  source.onopen = () => { window.agentkitDebug.connections++; };
  source.onmessage = () => {};
  source.onerror = () => {
    // Refused for good (e.g. 409: the server restarted and the conversation is no
    // longer open): open it again once, with a POST, and follow its new stream.
    if (source.readyState !== EventSource.CLOSED || page.source !== source) return;
    page.source = null;
    api("/api/switch", { method: "POST", body: { leaving: null, to: id } })
      .then((detail) => { if (page.current === id) { showConversation(detail); openStream(); } })
      .catch((e) => showError(e.message));
  };
  source.addEventListener("reset", () => {
    window.agentkitDebug.resets++;
    reloadConversation().catch((e) => showError(e.message));
  });
  for (const type of Object.keys(HANDLERS)) {
    source.addEventListener(type, (message) => {
      if (page.source !== source) return;
      const event = JSON.parse(message.data);
      window.agentkitDebug.seqs.push(event.seq);
      if (event.seq <= page.lastSeq) return; // already shown
      page.lastSeq = event.seq;
      HANDLERS[type](event);
    });
  }
}

const HANDLERS = {
  RoundStarted: () => { setState("running"); setWork(""); },
  UserMessage: (e) => {
    const waiting = [...document.querySelectorAll(".message.user.queued")].find((n) => n.textContent === e.text);
    if (waiting) waiting.classList.remove("queued");
    else addMessage("user", e.text);
  },
  MessageQueued: (e) => { endAssistant(); addMessage("user", e.text).classList.add("queued"); },
  Notification: (e) => { endAssistant(); addMessage("notification", e.text); },
  TextDelta: (e) => streamDelta(e.text),
  RetryScheduled: () => { if (page.streaming) { page.streaming.text = ""; } },
  AssistantMessage: (e) => endAssistant(e.content),
  ToolCallStarted: (e) => { endAssistant(); toolStarted(e); },
  ToolCallFinished: toolFinished,
  ContextCompacted: () => {},
  RunStarted: () => {}, // Agent.run only; listed so every seq is counted
  RunFinished: () => {},
  StateChanged: (e) => setState(e.state),
  SubAgentStarted: (e) => upsertAgent(page, e.info, showError),
  SubAgentProgress: (e) => upsertAgent(page, e.info, showError),
  SubAgentFinished: (e) => upsertAgent(page, e.info, showError),
  RoundFinished: (e) => {
    endAssistant();
    if (e.error) addMessage("error", `${e.status}: ${e.error}`);
    // AllWorkDone comes before RoundFinished when the round leaves nothing running.
    const idle = $("state").textContent === "idle";
    setWork(e.background.length ? "background work still running" : idle ? "all done" : "");
    loadConversations();
  },
  AllWorkDone: () => { setState("idle"); setWork("all done"); loadConversations(); },
};

// ---------------------------------------------------------------- composer
async function send() {
  const box = $("composer");
  const text = box.value;
  if (!text.trim() || !page.current) return;
  box.value = "";
  try {
    await api(`/api/conversations/${page.current}/messages`, { method: "POST", body: { text } });
  } catch (e) {
    box.value = text;
    showError(e.message);
  }
}

$("composer-form").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("composer").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
$("new").addEventListener("click", () => switchTo(null));
$("cancel").addEventListener("click", () => {
  api(`/api/conversations/${page.current}/cancel`, { method: "POST" }).catch((e) => showError(e.message));
});
$("agent-detail-close").addEventListener("click", () => closeAgentDetail(page));
setInterval(() => tickRuntimes(page), 1000);

(async () => {
  try {
    const conversations = await loadConversations();
    const wanted = location.hash.slice(1);
    const start = conversations.find((c) => c.id === wanted) || conversations[0];
    await switchTo(start ? start.id : null);
  } catch (e) { showError(e.message); }
})();
