// The agentkit web chat page: conversations, the streamed conversation, sub-agents.
// All untrusted text (model, tool and file output) goes through textContent or the
// safe Markdown renderer; nothing is ever assigned to innerHTML.
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const COUNTERS = ["files_read", "searches", "web_pages", "commands"];
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

async function api(path, { method = "GET", body } = {}) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body ?? {});
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

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
  for (const message of detail.messages) showStored(message);
  page.agents.clear();
  $("subagents").replaceChildren();
  for (const info of detail.subagent_rows) upsertAgent(info);
  closeAgentDetail();
  setState(detail.state);
  setWork(detail.state === "waiting_for_subagents" ? "background work still running" : "");
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
  StateChanged: (e) => setState(e.state),
  SubAgentStarted: (e) => upsertAgent(e.info),
  SubAgentProgress: (e) => upsertAgent(e.info),
  SubAgentFinished: (e) => upsertAgent(e.info),
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

// ----------------------------------------------------------------- sub-agents
function upsertAgent(info) {
  let entry = page.agents.get(info.agent_id);
  if (!entry) {
    const row = el("li", { "data-testid": "subagent", class: "subagent" });
    row.append(
      el("div", { class: "line" }),
      el("div", { class: "counters" }),
      el("div", { class: "last" }),
    );
    const stop = el("button", { type: "button", "data-testid": "subagent-stop", class: "stop" }, "Stop");
    stop.addEventListener("click", (ev) => {
      ev.stopPropagation();
      api(`/api/conversations/${page.current}/subagents/${info.agent_id}/terminate`, { method: "POST" })
        .catch((e) => showError(e.message));
    });
    row.append(stop);
    row.addEventListener("click", () => openAgentDetail(info.agent_id));
    entry = { row, info, at: performance.now() };
    page.agents.set(info.agent_id, entry);
    $("subagents").append(row);
  }
  entry.info = info;
  entry.at = performance.now();
  const { row } = entry;
  row.setAttribute("data-agent-id", String(info.agent_id));
  row.setAttribute("data-status", info.status);
  row.className = `subagent ${info.status}`;
  row.querySelector(".line").replaceChildren(
    el("b", {}, `#${info.agent_id} `),
    el("span", { class: "summary" }, info.summary || ""),
    el("span", { class: "status" }, ` ${info.status} `),
    el("span", { class: "runtime" }, runtime(entry)),
  );
  row.querySelector(".counters").replaceChildren(
    ...COUNTERS.map((name) => el("span", { "data-counter": name, title: name }, `${name.replace("_", " ")} ${info[name] ?? 0}`)),
  );
  row.querySelector(".last").textContent = info.last_action || "";
  row.querySelector(".stop").hidden = info.status !== "running";
  if (page.openAgent === info.agent_id && info.status !== "running") openAgentDetail(info.agent_id);
}

function runtime(entry) {
  let seconds = Number(entry.info.runtime_seconds || 0);
  if (entry.info.status === "running") seconds += (performance.now() - entry.at) / 1000;
  return `${seconds.toFixed(0)} s`;
}

setInterval(() => {
  for (const entry of page.agents.values()) {
    if (entry.info.status === "running") entry.row.querySelector(".runtime").textContent = runtime(entry);
  }
}, 1000);

function closeAgentDetail() {
  page.openAgent = null;
  $("agent-detail").hidden = true;
}

async function openAgentDetail(agentId) {
  page.openAgent = agentId;
  const base = `/api/conversations/${page.current}/subagents/${agentId}`;
  $("agent-detail").hidden = false;
  $("agent-detail-title").textContent = `Sub-agent ${agentId}`;
  $("agent-file").hidden = true;
  const files = $("agent-files");
  const transcript = $("agent-transcript");
  try {
    const listing = await api(`${base}/files`);
    files.replaceChildren(...listing.files.map((f) => {
      const item = el("li");
      const open = el("button", { type: "button", "data-testid": "deliverable" }, `${f.path} (${f.size} B)`);
      open.addEventListener("click", () => showFile(base, f.path));
      item.append(open);
      return item;
    }));
    if (!listing.files.length) files.replaceChildren(el("li", {}, "(no files yet)"));
  } catch (e) { files.replaceChildren(el("li", {}, e.message)); }
  try {
    const record = await api(`${base}/transcript`);
    transcript.replaceChildren(...(record.messages || []).filter((m) => m.role !== "system").map((m) => {
      const text = typeof m.content === "string" ? m.content : "";
      const calls = (m.tool_calls || []).map((c) => `⚙ ${c.function?.name}(${c.function?.arguments})`).join("\n");
      return el("div", { class: `turn ${m.role}` }, `${m.role}: ${[text, calls].filter(Boolean).join("\n")}`.slice(0, 4000));
    }));
  } catch (e) { transcript.replaceChildren(el("div", {}, e.message)); }
}

async function showFile(base, path) {
  const view = $("agent-file");
  view.hidden = false;
  try {
    const file = await api(`${base}/files/${path.split("/").map(encodeURIComponent).join("/")}`);
    view.textContent = file.binary
      ? `${file.path}: binary, ${file.type}, ${file.size} bytes`
      : file.text + (file.truncated ? `\n… (cut; ${file.size} bytes in all)` : "");
  } catch (e) { view.textContent = e.message; }
}

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
$("agent-detail-close").addEventListener("click", closeAgentDetail);

(async () => {
  try {
    const conversations = await loadConversations();
    const wanted = location.hash.slice(1);
    const start = conversations.find((c) => c.id === wanted) || conversations[0];
    await switchTo(start ? start.id : null);
  } catch (e) { showError(e.message); }
})();
