// Approval cards (docs/web-api.md "Approvals"): each tool call waiting for a person is a
// card above the message box, and a sub-agent's is on its row too. Allow, Always allow
// or Deny (with the reason field's text) answers it with one POST; the first answer
// from any tab wins, and ApprovalAnswered / ApprovalWithdrawn remove the card
// everywhere. A reloaded page gets the pending requests from the conversation's GET.
// All text goes through textContent (common.el).
import { $, api, el } from "./common.js";

const cards = new Map(); // request_id -> [card elements] (the list's, the row's)

function list() {
  let box = $("approvals");
  if (!box) {
    // Made here, so the page's layout needs no knowledge of approvals.
    box = el("section", { id: "approvals", "aria-label": "Approvals", "aria-live": "assertive" });
    $("composer-form").before(box);
  }
  return box;
}

function who(row) {
  return row.agent_id == null ? "The agent" : `Sub-agent #${row.agent_id}`;
}

function argumentsText(row) {
  const args = row.arguments;
  if (args == null) return "";
  return typeof args === "string" ? args : JSON.stringify(args, null, 2);
}

function card(page, row, showError) {
  const node = el("div", { class: "approval", "data-testid": "approval", "data-request-id": row.request_id });
  if (row.agent_id != null) node.setAttribute("data-agent-id", String(row.agent_id));
  node.addEventListener("click", (ev) => ev.stopPropagation()); // not a click on the sub-agent's row
  const reason = el("input", { type: "text", class: "reason", placeholder: "Reason (sent with Deny)", "data-testid": "approval-reason" });
  const buttons = [
    ["allow", "Allow", "approval-allow"],
    // Says exactly what "always" allows (the broker's ``always``; ``key`` for an old row).
    ["allow_always", `Always allow ${row.always || row.key || ""}`.trim(), "approval-always"],
    ["deny", "Deny", "approval-deny"],
  ].map(([decision, label, testid]) => {
    const button = el("button", { type: "button", class: decision, "data-testid": testid }, label);
    button.addEventListener("click", () => {
      answer(page, row.request_id, decision, reason.value.trim(), showError);
    });
    return button;
  });
  reason.addEventListener("keydown", (ev) => {
    ev.stopPropagation();
    if (ev.key === "Enter") answer(page, row.request_id, "deny", reason.value.trim(), showError);
  });
  node.append(
    el("div", { class: "head" }, `${who(row)} asks to use ${row.tool}`),
    el("div", { class: "why" }, row.reason || ""),
    el("pre", { class: "args" }, argumentsText(row)),
    el("div", { class: "answers" }),
  );
  node.querySelector(".answers").append(...buttons, reason);
  return node;
}

async function answer(page, requestId, decision, note, showError) {
  const nodes = cards.get(requestId) || [];
  for (const node of nodes) for (const b of node.querySelectorAll("button")) b.disabled = true;
  const body = { decision };
  if (decision === "deny" && note) body.note = note;
  try {
    await api(`/api/conversations/${page.current}/approvals/${encodeURIComponent(requestId)}`, { method: "POST", body });
    removeApproval(requestId); // the event follows; the card goes now
  } catch (e) {
    // Answered from another tab, or withdrawn: its event removes the card. Otherwise
    // (a refused body, a network error) the card stays answerable.
    showError(e);
    for (const node of nodes) for (const b of node.querySelectorAll("button")) b.disabled = false;
  }
}

/** Show one pending request (an ApprovalRequested event or a row of the GET). */
export function addApproval(page, row, showError) {
  if (cards.has(row.request_id)) return;
  const nodes = [card(page, row, showError)];
  list().append(nodes[0]);
  // In the row's slot (agents.js rowSlot): row updates leave it alone.
  const entry = row.agent_id == null ? null : page.agents.get(row.agent_id);
  const agentRow = entry ? entry.row.querySelector(".slot") ?? entry.row : null;
  if (agentRow) {
    const onRow = card(page, row, showError);
    agentRow.append(onRow);
    nodes.push(onRow);
  }
  cards.set(row.request_id, nodes);
  nodes[0].scrollIntoView({ block: "nearest" });
}

/** Remove a request's cards (answered or withdrawn, here or elsewhere). */
export function removeApproval(requestId) {
  for (const node of cards.get(requestId) || []) node.remove();
  cards.delete(requestId);
}

/** Show exactly the given pending requests (the conversation's GET ``approvals``). */
export function showApprovals(page, rows, showError) {
  for (const id of [...cards.keys()]) removeApproval(id);
  for (const row of rows || []) addApproval(page, row, showError);
}

/** The stream's handlers for the approval events (merged into app.js's HANDLERS). */
export function approvalHandlers(page, showError) {
  return {
    ApprovalRequested: (e) => addApproval(page, e, showError),
    ApprovalAnswered: (e) => removeApproval(e.request_id),
    ApprovalWithdrawn: (e) => removeApproval(e.request_id),
    HookFailed: (e) => showError(`hook ${e.hook_event_name} (${e.hook}) failed: ${e.problem}`),
  };
}
