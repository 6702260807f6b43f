// The control plane on the page (issue 21, docs/control-plane.md): a sub-agent's pending
// question with its answer box, inside the row's slot (agents.js rowSlot), and the
// conversation's tokens and cost in the agents panel's header. Untrusted text only
// through textContent.
import { $, api, el, usageText } from "./common.js";

/** Show ``question`` (or nothing: null) in the row slot ``slot`` of sub-agent ``agentId``. */
export function showQuestion(page, slot, agentId, question, showError) {
  if (!slot) return;
  let box = slot.querySelector(".question");
  if (!question) {
    if (box) box.remove();
    return;
  }
  if (!box) {
    box = questionBox(page, agentId, showError);
    slot.append(box);
  }
  box.querySelector(".asks").textContent = `asks: ${question}`;
}

function questionBox(page, agentId, showError) {
  const box = el("form", { class: "question", "data-testid": "subagent-question" });
  const input = el("input", { "data-testid": "subagent-answer", placeholder: "Your answer", "aria-label": "Your answer" });
  const send = el("button", { type: "submit", "data-testid": "subagent-answer-send" }, "Answer");
  box.append(el("div", { class: "asks" }), input, send);
  box.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    send.disabled = true;
    try {
      await api(`/api/conversations/${page.current}/subagents/${agentId}/answer`, { method: "POST", body: { text } });
      input.value = "";
    } catch (e) { showError(e); }
    send.disabled = false;
  });
  return box;
}

/** Show the conversation's tokens and cost (main agent and sub-agents) in the panel's header. */
export async function showCosts(page) {
  let total = document.getElementById("conversation-cost");
  if (!total) {
    total = el("span", { id: "conversation-cost", "data-testid": "conversation-cost", class: "usage muted" });
    $("agents-summary").after(total);
  }
  const id = page.current;
  if (!id) return;
  try {
    const usage = await api(`/api/conversations/${id}/usage`);
    if (id === page.current) total.textContent = usageText(usage.total);
  } catch { /* the header keeps its last figures */ }
}

/** The control plane's events: a question shown in its row (and withdrawn), costs. */
export function controlHandlers(page, upsert, showError) {
  const update = (agentId, change) => {
    const entry = page.agents.get(agentId);
    if (entry) upsert(change({ ...entry.info }));
  };
  return {
    SubAgentQuestion: (e) => update(e.agent_id, (info) => ({ ...info, question: e.question })),
    SubAgentAnswered: (e) => update(e.agent_id, (info) => ({ ...info, question: null })),
    SubAgentMessage: () => {},
    BudgetWarning: (e) => { if (e.exhausted) showError(`budget used up (${e.scope})`); showCosts(page); },
  };
}
