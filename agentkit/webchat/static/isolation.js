// The Changes tab of an isolated sub-agent's detail (docs/isolation.md): the files it
// changed in its own copy (with +/- lines), each file's diff (added lines green,
// removed red; every text through textContent), and Merge, Check (a dry run) and
// Discard buttons. Discard asks first and is styled as destructive. The report of a
// merge is said in words (one line per file, or per conflicted file with its reason
// and that nothing was written). The API is agentkit/webchat/isolation_api.py.
import { $, api, el } from "./common.js";

/** True when the row is an isolated sub-agent's (its row says whether it was merged). */
export function isIsolated(info) {
  return Boolean(info) && Object.prototype.hasOwnProperty.call(info, "merged");
}

/** Show or hide the Changes tab for ``info`` and, when shown, load its panel. */
export async function showChanges(page, base, info) {
  const tab = document.querySelector('#agent-detail [data-tab="changes"]');
  const isolated = isIsolated(info);
  tab.hidden = !isolated;
  if (!isolated) {
    if (tab.getAttribute("aria-selected") === "true") document.querySelector('#agent-detail [data-tab="files"]').click();
    $("agent-changes").replaceChildren();
    return;
  }
  await loadChanges(page, base, info.agent_id);
}

async function loadChanges(page, base, agentId, report) {
  const box = $("agent-changes");
  let data;
  try {
    data = await api(`${base}/changes`);
  } catch (e) {
    box.replaceChildren(el("p", { class: "muted", "data-testid": "changes-summary" }, e.message));
    if (report) box.prepend(report);
    return;
  }
  if (page.openAgent !== agentId) return; // another sub-agent was opened meanwhile
  const files = el("ul", { class: "changed-files" });
  for (const f of data.files) {
    files.append(el("li", { "data-testid": "changed-file" }, undefined));
    files.lastChild.append(
      el("span", { class: "path" }, f.path),
      // A link says where it points (a merge refuses one that leaves the workspace).
      el("span", { class: "status" }, f.link_target ? ` link → ${f.link_target} ` : ` ${f.status} `),
      el("span", { class: "plus" }, f.binary ? "binary" : `+${f.insertions}`),
      el("span", { class: "minus" }, f.binary ? "" : ` -${f.deletions}`),
    );
  }
  const diffs = data.files.filter((f) => f.diff).map(fileDiff);
  const parts = [el("p", { class: "changes-summary", "data-testid": "changes-summary" }, data.summary)];
  if (report) parts.push(report);
  parts.push(files, ...diffs);
  if (data.cut) parts.push(el("p", { class: "muted" }, `${data.cut.toLocaleString("en-US")} more characters of the diff are not shown; the whole diff: git diff ${data.base.slice(0, 12)} ${data.branch}`));
  parts.push(actions(page, base, agentId, data));
  box.replaceChildren(...parts);
}

function fileDiff(f) {
  const pre = el("pre", { class: "diff", "data-testid": "file-diff" });
  for (const line of f.diff.replace(/\n$/, "").split("\n")) {
    let kind = "";
    if (/^(diff --git|index |\+\+\+ |--- )/.test(line)) kind = "meta";
    else if (line.startsWith("+")) kind = "add";
    else if (line.startsWith("-")) kind = "del";
    else if (line.startsWith("@@")) kind = "hunk";
    pre.append(el("span", { class: kind }, `${line}\n`));
  }
  const box = el("details", { open: true, class: "file-diff" });
  box.append(el("summary", {}, f.path), pre);
  return box;
}

function actions(page, base, agentId, data) {
  const row = el("div", { class: "change-actions" });
  if (data.merged) {
    row.append(el("span", { class: "muted", "data-testid": "merged-note" }, "Merged into the workspace. "));
  } else {
    const merge = el("button", { type: "button", class: "merge", "data-testid": "merge" }, "Merge");
    merge.title = "Apply these changes to the workspace now (all or nothing; nothing is committed)";
    merge.addEventListener("click", () => runMerge(page, base, agentId, false, row));
    const check = el("button", { type: "button", "data-testid": "merge-dry-run" }, "Check merge");
    check.title = "See whether the changes apply, without writing anything";
    check.addEventListener("click", () => runMerge(page, base, agentId, true, row));
    row.append(merge, check);
  }
  const discard = el("button", { type: "button", class: "danger", "data-testid": "discard" }, "Discard…");
  discard.title = "Drop this sub-agent's copy and branch: its unmerged work is lost";
  discard.addEventListener("click", () => runDiscard(page, base, agentId, data, row));
  row.append(discard);
  return row;
}

function reportBox(lines, ok) {
  const box = el("div", { class: `merge-report ${ok ? "ok" : "conflict"}`, role: "status", "data-testid": "merge-report" });
  for (const line of lines) box.append(el("div", {}, line.trim()));
  return box;
}

async function runMerge(page, base, agentId, dryRun, row) {
  for (const b of row.querySelectorAll("button")) b.disabled = true;
  try {
    const done = await api(`${base}/merge`, { method: "POST", body: { dry_run: dryRun } });
    await loadChanges(page, base, agentId, reportBox(done.lines, done.ok));
  } catch (e) {
    await loadChanges(page, base, agentId, reportBox([e.message], false));
  }
}

async function runDiscard(page, base, agentId, data, row) {
  const state = data.merged ? "They were merged already." : "They were NOT merged: this work is lost.";
  const question = `Discard sub-agent ${agentId}'s changes (${data.summary.replace(/^sub-agent #\d+: /, "")})? ${state} This cannot be undone.`;
  if (!window.confirm(question)) return;
  for (const b of row.querySelectorAll("button")) b.disabled = true;
  try {
    const done = await api(`${base}/discard`, { method: "POST", body: { confirm: true } });
    $("agent-changes").replaceChildren(reportBox([done.text], true));
  } catch (e) {
    row.prepend(reportBox([e.message], false));
    for (const b of row.querySelectorAll("button")) b.disabled = false;
  }
}
