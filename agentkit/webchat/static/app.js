// The agentkit web chat page: conversations, the streamed conversation, the agents.
// All untrusted text (model, tool and file output) goes through textContent or the
// safe Markdown renderer; nothing is ever assigned to innerHTML. Modules: common.js
// (API, elements, words), layout.js (drawers, shortcuts), sidebar.js (the
// conversations list), messages.js (the conversation), agents.js (the agent tree, a
// sub-agent's detail), control.js (a sub-agent's question, the conversation's cost),
// approvals.js (approval requests' cards), cards.js (the slot for cards waiting for
// the person), markdown.js (the renderer), switching.js (which conversation is shown,
// and what a refused switch or a change in another tab does), composer.js (the message
// box), notices.js (what happened to the page itself).
import { $, api, isGone, showLanguage, stateWords, usageText } from "./common.js";
import {
  clearAgents, openAgentDetail, runningCount, selectTab, setMainAgent, tickRuntimes, upsertAgent,
  closeAgentDetail,
} from "./agents.js";
import { approvalHandlers, showApprovals } from "./approvals.js";
import { clearCards } from "./cards.js";
import { send, setupComposer } from "./composer.js";
import { controlHandlers, showCosts } from "./control.js";
import { reveal, setupLayout, isDesktop } from "./layout.js";
import { loadConversations, setTitle, setupSidebar } from "./sidebar.js";
import { conversationGone, reopen, setupSwitching, startPage, streamRefused, switchTo } from "./switching.js";
import * as view from "./messages.js";

const page = {
  current: null, // conversation id
  title: "",
  state: "idle",
  source: null, // EventSource
  lastSeq: 0,
  streaming: null, // {node, text} of the assistant message being streamed
  tools: new Map(), // call_id -> details element
  agents: new Map(), // agent_id -> {row, info, at}
  openAgent: null,
  detailStatus: null,
  lastEnd: null, // the last round's status
  armedDelete: null, // the conversation whose delete button asks "delete?"
  conversations: [],
  info: null, // GET /api/info
  ready: false, // the conversation is shown, open and followed (false while switching)
  closed: false, // shown, but closed on the server (by another tab or window): not followed
  switching: null, // the last switch asked and not done: messages typed now are for it
  requests: new Set(), // switches not done yet
  switches: Promise.resolve(), // switches run one after another, in the order asked
  posting: Promise.resolve(), // posts go one after another, in the order sent
};
// For tests and debugging: every seq received, in order (duplicates included).
window.agentkitDebug = { seqs: [], resets: 0, connections: 0, settled: 0 };

/** Show an error (text, or an Error from api()) in the conversation; a 404 "no
 * conversation" means another tab or window deleted that one (switching.js says so). */
function showError(error) {
  if (isGone(error) && error.conversation) return conversationGone(error.conversation);
  view.addMessage("error", typeof error === "string" ? error : error.message);
}

// ------------------------------------------------------------------ the server
async function loadInfo(polls = 0) {
  try {
    page.info = await api("/api/info");
  } catch (e) {
    $("endpoint").textContent = `the server did not answer: ${e.message}`;
    return;
  }
  const info = page.info;
  $("demo-badge").hidden = !info.demo;
  $("about-workspace").textContent = `Workspace: ${info.workspace}`;
  showEndpoint(info.endpoint, info);
  showStartNotices(info.notices || []);
  if (!$("messages").querySelector("[data-testid=message]")) view.showEmpty(info);
  if (info.endpoint?.status === "checking" && polls < 30) setTimeout(() => loadInfo(polls + 1), 1000);
}

/** The start notices (the sandbox is off, a cost cap that cannot trip) in the header,
 * as plain text. */
function showStartNotices(notices) {
  const box = $("start-notices");
  box.replaceChildren(...notices.map((text) => {
    const line = document.createElement("p");
    line.textContent = `⚠ ${text}`;
    return line;
  }));
  box.hidden = notices.length === 0;
  // On a phone they show as one cut line (style.css); a tap or Enter shows them all.
  box.tabIndex = 0;
  box.setAttribute("role", "button");
  box.setAttribute("aria-expanded", String(box.classList.contains("open")));
  box.title = "Show or fold the notices";
  box.onclick = box.onkeydown = (ev) => {
    if (ev.type === "keydown" && ev.key !== "Enter" && ev.key !== " ") return;
    ev.preventDefault();
    box.classList.toggle("open");
    box.setAttribute("aria-expanded", String(box.classList.contains("open")));
  };
}

function showEndpoint(endpoint, info) {
  const box = $("endpoint");
  box.dataset.status = endpoint?.status || "checking";
  box.textContent = endpoint?.message || "checking the model endpoint…";
  box.title = `${info.model} at ${info.base_url}`;
}

async function reloadConversation() {
  closeStream();
  const detail = await api(`/api/conversations/${page.current}`);
  showConversation(detail);
  openStream();
}

function showConversation(detail) {
  setTitle(detail.title);
  showLanguage(detail.language);
  $("messages").replaceChildren();
  clearCards();
  page.tools.clear();
  page.streaming = null;
  page.lastSeq = detail.last_seq;
  page.lastEnd = null;
  const ends = [...(detail.round_ends || [])];
  const endsAt = (count) => {
    while (ends.length && ends[0].after <= count) {
      const end = ends.shift();
      view.addRoundEnd(end.status, end.error, end.explanation, end.background || []);
      page.lastEnd = end.status;
    }
  };
  detail.messages.forEach((message, index) => {
    endsAt(index);
    // One message that cannot be shown must not hide the ones after it.
    try { view.showStored(page, message, openAgent); } catch (e) {
      console.error("agentkit: a stored message could not be shown", e);
      view.addMessage("error", `a message could not be shown: ${e.message}`);
    }
    if (message.kind === "assistant" && message.content) page.lastEnd = "done";
  });
  endsAt(Infinity);
  // Accepted but not yet taken by a round (saved with the conversation).
  for (const text of detail.queued || []) view.addMessage("user", text).classList.add("queued");
  clearAgents(page);
  for (const info of detail.subagent_rows) upsertAgent(page, info, showError);
  showApprovals(page, detail.approvals, showError); // after the rows: a sub-agent's goes on its row too
  setState(detail.state);
  setWork(detail.state === "waiting_for_subagents" ? "background work still running" : detail.state === "idle" ? endWords() : "");
  showUsage(detail.usage, detail.stats);
  showCosts(page);
  view.showEmpty(page.info);
}

function endWords() {
  if (page.lastEnd === "done") return "all done";
  if (page.lastEnd === "cancelled") return "round stopped";
  if (page.lastEnd === "failed") return "the last round failed (see above)";
  return "";
}

async function refreshUsage() {
  const id = page.current;
  try {
    const summary = await api(`/api/conversations/${id}/summary`);
    if (id === page.current) showUsage(summary.usage, summary.stats);
  } catch { /* the header keeps its last figures */ }
}

function showUsage(usage, stats) {
  $("usage").textContent = usageText(usage ? { total_tokens: usage.total_tokens, cost_usd: usage.cost_usd } : null);
  setMainAgent(stateWords(page.state, runningCount(page)), undefined, usageText(stats));
}

function openAgent(agentId) {
  reveal("agents");
  openAgentDetail(page, agentId);
}

// ------------------------------------------------------------ state in words
function setState(state) {
  page.state = state;
  const running = runningCount(page);
  const words = stateWords(state, running);
  const pill = $("state");
  pill.textContent = words;
  pill.dataset.state = state;
  pill.className = `state ${state}`;
  $("cancel").hidden = state !== "running";
  setMainAgent(words, state === "running" ? undefined : "");
  // The sidebar's line for this conversation says the same at once (the list itself
  // reloads after each round).
  const meta = document.querySelector("#conversations li.current .meta");
  if (meta) meta.textContent = `${words} · just now`;
}

function setWork(text) {
  $("work").textContent = text;
}

function agentChanged(info) {
  upsertAgent(page, info, showError);
  setState(page.state); // "waiting for N sub-agents" follows the count
  // The last one ended (or was stopped): no background work runs any more.
  if (!runningCount(page) && $("work").textContent === "background work still running") setWork("");
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
  source.onerror = () => streamFailed(source, id);
  source.addEventListener("reset", () => {
    window.agentkitDebug.resets++;
    reloadConversation().catch((e) => showError(e));
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

/** The stream ended or failed: ask the server why (EventSource does not say). A
 * refusal (404 deleted; 409 not open: another tab or window left it, or the server
 * closed it; any other 4xx) goes to switching.js, which opens it again or says why it
 * cannot. No answer or a 5xx: EventSource reconnects by itself (or, when it gave up,
 * the stream is opened again shortly). */
async function streamFailed(source, id) {
  if (page.source !== source || source.probing) return;
  source.probing = true;
  const status = await streamStatus(id);
  source.probing = false;
  if (page.source !== source) return;
  if (status >= 400 && status < 500) {
    closeStream();
    streamRefused(id, status);
  } else if (source.readyState === EventSource.CLOSED) {
    setTimeout(() => { if (page.source === source) { closeStream(); openStream(); } }, 3000);
  }
}

/** The HTTP status the conversation's stream answers now (0: no answer). */
async function streamStatus(id) {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), 5000);
  try {
    const response = await fetch(`/api/conversations/${id}/events`, { credentials: "same-origin", signal: stop.signal });
    return response.status;
  } catch {
    return 0;
  } finally {
    clearTimeout(timer);
    stop.abort(); // only its status was wanted
  }
}

const HANDLERS = {
  RoundStarted: () => { setState("running"); setWork(""); setMainAgent("working", "thinking…"); },
  UserMessage: (e) => {
    const waiting = view.shownUser(e.text, ".pending, .queued");
    if (waiting && waiting.classList.contains("queued")) {
      // Delivered now, after what the round showed since it was sent: where the model
      // (and a reload) has it.
      view.endAssistant(page);
      waiting.parentElement.append(waiting);
    }
    if (waiting) waiting.classList.remove("pending", "queued");
    else view.addMessage("user", e.text);
    if (!page.title) setTitle(e.text.split(/\s+/).join(" ").trim().slice(0, 80));
  },
  MessageQueued: (e) => {
    view.endAssistant(page);
    const node = view.shownUser(e.text, ".pending") || view.addMessage("user", e.text);
    node.classList.remove("pending");
    node.classList.add("queued");
  },
  Notification: (e) => { view.endAssistant(page); view.addNotification(e.text, e.agent_ids, openAgent); },
  TextDelta: (e) => { view.streamDelta(page, e.text); setMainAgent("working", "writing the answer…"); },
  RetryScheduled: (e) => {
    if (page.streaming) page.streaming.text = "";
    setMainAgent("working", `retrying in ${Math.round(e.delay_seconds)} s: ${e.message}`);
  },
  AssistantMessage: (e) => view.endAssistant(page, e.content),
  ToolCallStarted: (e) => { view.endAssistant(page); view.addToolCall(page, e); setMainAgent("working", e.last_action); },
  ToolCallFinished: (e) => view.finishToolCall(page.tools.get(e.call_id), e),
  ContextCompacted: () => {},
  RunStarted: () => {}, // Agent.run only; listed so every seq is counted
  RunFinished: () => {},
  StateChanged: (e) => setState(e.state),
  SubAgentStarted: (e) => agentChanged(e.info),
  SubAgentProgress: (e) => agentChanged(e.info),
  SubAgentFinished: (e) => { agentChanged(e.info); refreshUsage(); },
  RoundFinished: (e) => {
    view.endAssistant(page);
    page.lastEnd = e.status;
    if (e.status !== "done") view.addRoundEnd(e.status, e.error, e.explanation, e.background);
    setWork(e.background.length ? "background work still running" : page.state === "idle" ? endWords() : "");
    loadConversations().catch(() => {});
    refreshUsage();
    showCosts(page);
  },
  AllWorkDone: () => { setState("idle"); setWork(endWords()); loadConversations().catch(() => {}); },
  ...approvalHandlers(page, showError),
  ...controlHandlers(page, (info) => agentChanged(info), showError),
};

// ------------------------------------------------------------------ actions
function stopRound() {
  if (page.state !== "running" || !page.current) return;
  $("state").textContent = "stopping…";
  api(`/api/conversations/${page.current}/cancel`, { method: "POST" }).catch((e) => showError(e));
}

function nextConversation(step) {
  const ids = page.conversations.map((c) => c.id);
  const at = ids.indexOf(page.current);
  const next = ids[at + step];
  if (next) switchTo(next);
}

$("composer-form").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("composer").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
$("new").addEventListener("click", () => switchTo(null));
$("cancel").addEventListener("click", stopRound);
$("agent-detail-close").addEventListener("click", () => closeAgentDetail(page));
for (const tab of document.querySelectorAll("#agent-detail [role=tab]")) {
  tab.addEventListener("click", () => selectTab(tab.dataset.tab));
}
setupSidebar(page, { switchTo, showError, closeStream, openStream, conversationGone });
setupSwitching(page, { showConversation, openStream, closeStream, showError });
setupComposer(page, { showError, conversationGone, reopen });
setupLayout({ newConversation: () => switchTo(null), nextConversation, stopRound });
setInterval(() => tickRuntimes(page), 1000);
if (isDesktop()) $("composer").focus();

loadInfo();
startPage();
