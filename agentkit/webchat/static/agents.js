// The agents panel: a live tree (the main agent, then one row per sub-agent with its
// status, runtime, current action, counters, tokens and cost, and a stop button) and,
// for the one clicked, its result, deliverables (Markdown rendered safely) and
// transcript. Each row has a slot (``rowSlot``) for elements of other features (the
// sub-agent's question and answer box, issue 21): row updates never touch it.
import { $, COUNTER_WORDS, STATUS_WORDS, api, counterText, el, usageText } from "./common.js";
import { addMessage, addToolCall, finishToolCall } from "./messages.js";
import { renderMarkdown } from "./markdown.js";
import { showQuestion } from "./control.js";
import { showChanges } from "./isolation.js";

// ----------------------------------------------------------------- sub-agents
function newRow(page, agentId, showError) {
  const row = el("li", { "data-testid": "subagent", class: "subagent node", role: "treeitem" });
  const open = el("button", { type: "button", class: "open", "data-testid": "subagent-open", title: "Show its results and transcript" });
  open.append(
    el("span", { class: "line" }),
    el("span", { class: "last" }),
    el("span", { class: "counters" }),
    el("span", { class: "usage", "data-testid": "subagent-cost" }),
  );
  const stop = el("button", { type: "button", "data-testid": "subagent-stop", class: "stop", title: "Stop this sub-agent" }, "Stop");
  stop.addEventListener("click", (ev) => {
    ev.stopPropagation();
    api(`/api/conversations/${page.current}/subagents/${agentId}/terminate`, { method: "POST" })
      .catch((e) => showError(e));
  });
  // Issue 21's question box goes here (rowSlot): clicks in it do not open the detail.
  const slot = el("div", { class: "slot", "data-slot": "subagent" });
  row.append(open, stop, slot);
  row.addEventListener("click", (ev) => {
    if (!slot.contains(ev.target) && ev.target !== stop) openAgentDetail(page, agentId);
  });
  return row;
}

export function upsertAgent(page, info, showError) {
  let entry = page.agents.get(info.agent_id);
  if (!entry) {
    const row = newRow(page, info.agent_id, showError);
    entry = { row, info, at: performance.now() };
    page.agents.set(info.agent_id, entry);
    $("subagents").append(row);
  }
  entry.info = { ...entry.info, ...info };
  entry.at = performance.now();
  const { row } = entry;
  const status = entry.info.status;
  row.setAttribute("data-agent-id", String(info.agent_id));
  row.setAttribute("data-status", status);
  row.className = `subagent node ${status}`;
  row.querySelector(".line").replaceChildren(
    el("span", { class: "dot" }),
    el("b", {}, `#${info.agent_id} `),
    el("span", { class: "summary", "data-testid": "subagent-task" }, entry.info.task || entry.info.summary || ""),
    el("span", { class: "status" }, ` ${STATUS_WORDS[status] || status} `),
    el("span", { class: "runtime" }, runtime(entry)),
  );
  row.querySelector(".counters").replaceChildren(
    ...Object.entries(COUNTER_WORDS).map(([name, words]) =>
      el("span", { "data-counter": name, title: words }, counterText(name, entry.info[name]))),
  );
  row.querySelector(".last").textContent = status === "running" ? entry.info.last_action || "starting…" : entry.info.result_summary || entry.info.last_action || "";
  row.querySelector(".usage").textContent = usageText(entry.info);
  row.querySelector(".stop").hidden = status !== "running";
  const asks = status === "running" ? entry.info.question : null;
  showQuestion(page, row.querySelector(".slot"), info.agent_id, asks, showError);
  summarise(page);
  if (page.openAgent === info.agent_id) showDetailHead(page, entry.info);
  if (page.openAgent === info.agent_id && status !== "running" && page.detailStatus === "running") {
    openAgentDetail(page, info.agent_id); // it just ended: show its final files
  }
}

/** The element a feature may fill inside sub-agent ``agentId``'s row, or null. */
export function rowSlot(page, agentId) {
  return page.agents.get(agentId)?.row.querySelector(".slot") ?? null;
}

/** Empty the tree (another conversation is shown). */
export function clearAgents(page) {
  page.agents.clear();
  $("subagents").replaceChildren();
  summarise(page);
  closeAgentDetail(page);
}

function summarise(page) {
  const rows = [...page.agents.values()].map((e) => e.info.status);
  const running = rows.filter((s) => s === "running").length;
  $("agents-empty").hidden = rows.length > 0;
  $("agents-count").textContent = running ? `${running} running` : rows.length ? String(rows.length) : "";
  $("agents-summary").textContent = rows.length ? `${running} running · ${rows.length - running} ended` : "";
}

/** The number of running sub-agents. */
export function runningCount(page) {
  return [...page.agents.values()].filter((e) => e.info.status === "running").length;
}

/** The main agent's node: its state in words, current action, tokens and cost. */
export function setMainAgent(words, action, usage) {
  const node = $("main-agent");
  node.querySelector(".status").textContent = words;
  if (action !== undefined) node.querySelector(".last").textContent = action;
  if (usage !== undefined) node.querySelector(".usage").textContent = usage;
  node.dataset.state = words;
}

function runtime(entry) {
  let seconds = Number(entry.info.runtime_seconds || 0);
  if (entry.info.status === "running") seconds += (performance.now() - entry.at) / 1000;
  const text = seconds < 60 ? `${seconds.toFixed(0)} s` : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  // A continued sub-agent's runtime adds up its runs: say so (agentkit.chat.runs).
  return entry.info.runs > 1 ? `${text} in total over ${entry.info.runs} runs` : text;
}

/** Tick the runtimes of running sub-agents once a second. */
export function tickRuntimes(page) {
  for (const entry of page.agents.values()) {
    if (entry.info.status === "running") entry.row.querySelector(".runtime").textContent = runtime(entry);
  }
}

// ----------------------------------------------------------------- the detail
export function closeAgentDetail(page) {
  page.openAgent = null;
  $("agent-detail").hidden = true;
  $("agent-list").hidden = false;
}

function showDetailHead(page, info) {
  page.detailStatus = info.status;
  $("agent-detail-title").textContent = `Sub-agent ${info.agent_id}: ${info.task || info.summary || ""}`;
  $("agent-detail-status").textContent = [STATUS_WORDS[info.status] || info.status, usageText(info), info.deliverables_dir]
    .filter(Boolean).join(" · ");
  const summary = $("agent-detail-summary");
  summary.replaceChildren(info.result_summary ? renderMarkdown(info.result_summary) : "");
}

export function selectTab(name) {
  for (const tab of document.querySelectorAll("#agent-detail [role=tab]")) tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
  for (const panel of document.querySelectorAll("#agent-detail [data-panel]")) panel.hidden = panel.dataset.panel !== name;
}

export async function openAgentDetail(page, agentId) {
  const entry = page.agents.get(agentId);
  page.openAgent = agentId;
  const base = `/api/conversations/${page.current}/subagents/${agentId}`;
  $("agent-detail").hidden = false;
  $("agent-list").hidden = true;
  if (entry) showDetailHead(page, entry.info);
  $("agent-file").hidden = true;
  await Promise.all([showFiles(base), showTranscript(page, base), showChanges(page, base, entry?.info)]);
}

async function showFiles(base) {
  const files = $("agent-files");
  try {
    const listing = await api(`${base}/files`);
    files.replaceChildren(...listing.files.map((f) => {
      const item = el("li");
      const size = f.dir ? "folder" : f.size == null ? "link" : `${f.size.toLocaleString("en-US")} B`;
      const open = el("button", { type: "button", class: "link", "data-testid": "deliverable" },
        `${f.path}${f.dir ? "/" : ""}${f.symlink ? " → link" : ""} (${size})`);
      open.addEventListener("click", () => showFile(base, f.path));
      item.append(open);
      return item;
    }));
    if (!listing.files.length) files.replaceChildren(el("li", { class: "muted" }, "No files yet."));
  } catch (e) { files.replaceChildren(el("li", {}, e.message)); }
}

async function showFile(base, path) {
  const view = $("agent-file");
  view.hidden = false;
  view.replaceChildren(el("p", { class: "muted" }, `Opening ${path}…`));
  try {
    const file = await api(`${base}/files/${path.split("/").map(encodeURIComponent).join("/")}`);
    const head = el("div", { class: "file-head" }, `${file.path} · ${file.size.toLocaleString("en-US")} bytes${file.truncated ? " (cut)" : ""}`);
    if (file.binary) view.replaceChildren(head, el("p", {}, `A binary file (${file.type}).`));
    else if (/\.(md|markdown)$/i.test(file.path)) view.replaceChildren(head, el("div", { class: "markdown" }, undefined));
    else view.replaceChildren(head, el("pre", {}, file.text));
    const md = view.querySelector(".markdown");
    if (md) md.append(renderMarkdown(file.text));
    view.scrollIntoView({ block: "nearest" });
  } catch (e) { view.replaceChildren(el("p", {}, e.message)); }
}

async function showTranscript(page, base) {
  const box = $("agent-transcript");
  try {
    const record = await api(`${base}/transcript`);
    box.replaceChildren();
    const tools = new Map();
    for (const m of record.messages || []) {
      if (m.role === "system") continue;
      const text = typeof m.content === "string" ? m.content : "";
      if (m.role === "tool") finishToolCall(tools.get(m.tool_call_id), { ok: !text.startsWith("Error:"), output: text });
      else if (m.role === "assistant") {
        if (text) addMessage("assistant", text, {}, box);
        for (const call of m.tool_calls || []) {
          let args = call.function?.arguments;
          try { args = JSON.parse(args); } catch { /* as sent */ }
          const words = m.actions?.[call.id] || ""; // "Reading notes.txt" (the server's words)
          tools.set(call.id, addToolCall(null, { name: call.function?.name, arguments: args, last_action: words }, box));
        }
      } else addMessage(m.role === "user" ? "user" : "notice", text, {}, box);
    }
    if (!box.children.length) box.append(el("p", { class: "muted" }, "No transcript yet."));
  } catch (e) { box.replaceChildren(el("p", { class: "muted" }, e.message)); }
}
