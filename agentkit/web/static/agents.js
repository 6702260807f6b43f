// The sub-agents panel: live rows (status, runtime, the four counters, last action,
// a stop button) and, for the one clicked, its deliverables and transcript as text.
import { $, api, el } from "./common.js";

const COUNTERS = ["files_read", "searches", "web_pages", "commands"];

// ----------------------------------------------------------------- sub-agents
export function upsertAgent(page, info, showError) {
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
    row.addEventListener("click", () => openAgentDetail(page, info.agent_id));
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
  if (page.openAgent === info.agent_id && info.status !== "running") openAgentDetail(page, info.agent_id);
}

function runtime(entry) {
  let seconds = Number(entry.info.runtime_seconds || 0);
  if (entry.info.status === "running") seconds += (performance.now() - entry.at) / 1000;
  return `${seconds.toFixed(0)} s`;
}

/** Tick the runtimes of running sub-agents once a second. */
export function tickRuntimes(page) {
  for (const entry of page.agents.values()) {
    if (entry.info.status === "running") entry.row.querySelector(".runtime").textContent = runtime(entry);
  }
}

export function closeAgentDetail(page) {
  page.openAgent = null;
  $("agent-detail").hidden = true;
}

export async function openAgentDetail(page, agentId) {
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
      const open = el("button", { type: "button", "data-testid": "deliverable" }, `${f.path}${f.dir ? "/" : ""}${f.symlink ? " → link" : ""} (${f.size == null ? "link" : `${f.size} B`})`);
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

