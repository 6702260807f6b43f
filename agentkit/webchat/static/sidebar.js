// The conversations list (the sidebar): each conversation's title, state in words and
// age; rename in place (one PATCH for Enter and the blur it causes); delete (a labelled
// button) after a second click (armed for 3 s, styled as destructive, and still armed
// when the list is redrawn meanwhile); when isolated sub-agents' copies are not merged,
// a dialog asks whether to keep their branches or discard their work.
// The page's state and its switchTo/showError come from app.js (setupSidebar).
import { $, ago, api, el, isGone, stateWords, titleText } from "./common.js";
import { showNotice } from "./notices.js";

let page = null; // app.js's page state: current, title, conversations, armedDelete
let hooks = null; // {switchTo(id), showError(e), closeStream(), openStream(), conversationGone(id)}
let listsAsked = 0; // GET /api/conversations sent so far
let listShown = 0; // the number of the one shown

/** Give the sidebar the page's state and the callbacks it needs. */
export function setupSidebar(state, callbacks) {
  page = state;
  hooks = callbacks;
}

/** Fetch and show the conversations list; resolves to it (the newer one shown, when
 * an answer comes after a later one's). Rejects with api()'s error. */
export async function loadConversations() {
  const asked = ++listsAsked;
  const { conversations } = await api("/api/conversations");
  // Lists can arrive out of order: one asked before a switch must not hide its result.
  if (asked < listShown) return page.conversations;
  listShown = asked;
  page.conversations = conversations;
  const list = $("conversations");
  list.replaceChildren();
  for (const c of conversations) list.append(conversationItem(c));
  return conversations;
}

function conversationItem(c) {
  const item = el("li", { "data-testid": "conversation", "data-id": c.id, "data-state": c.state });
  if (c.id === page.current) {
    item.classList.add("current");
    item.setAttribute("aria-current", "true");
    setTitle(c.title);
  }
  const name = el("button", { class: "name", type: "button", title: c.error ? `${c.id}: ${c.error}` : c.title || c.id });
  const running = c.subagents_running ? ` · ${c.subagents_running} sub-agent${c.subagents_running === 1 ? "" : "s"} running` : "";
  const state = c.state === "damaged" ? "damaged (cannot be opened)" : stateWords(c.state, c.subagents_running);
  name.append(el("span", { class: "text" }, titleText(c.title, c.id)),
    el("span", { class: `meta ${c.state}` }, `${state} · ${ago(c.updated_at)}${running}`));
  name.addEventListener("click", () => hooks.switchTo(c.id));
  const rename = el("button", { class: "icon", type: "button", title: "Rename", "aria-label": "Rename" }, "✎");
  rename.addEventListener("click", () => startRename(item, c));
  const armed = page.armedDelete === c.id; // survives a reload of the list
  const ask = deleteWords(c.subagents_running);
  // A labelled button, not a glyph: the drawer's close "×" sits near it (issue 35).
  const label = `Delete conversation ${titleText(c.title, c.id)}`;
  const del = el("button", { class: "delete", type: "button", title: label, "aria-label": label, "data-testid": "delete-conversation" },
    armed ? ask : "Delete");
  if (armed) del.dataset.armed = "1";
  del.addEventListener("click", () => confirmDelete(del, c.id, ask));
  item.append(name, rename, del);
  return item;
}

export function setTitle(title) {
  page.title = title && title !== page.current ? title : "";
  const shown = titleText(page.title, page.current);
  $("title").textContent = shown;
  document.title = `${shown} · agentkit`;
}

function startRename(item, c) {
  const input = el("input", { value: c.title, "data-testid": "rename-input", "aria-label": "New title" });
  item.replaceChildren(input);
  input.focus();
  input.select();
  let finished = false; // Enter, then the blur it causes: one rename, not two
  const done = async (save) => {
    if (finished) return;
    finished = true;
    if (save && input.value.trim()) {
      try { await api(`/api/conversations/${c.id}`, { method: "PATCH", body: { title: input.value } }); }
      catch (e) { hooks.showError(e); }
      if (c.id === page.current) setTitle(input.value.trim());
    }
    loadConversations();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") done(true);
    if (e.key === "Escape") { e.stopPropagation(); done(false); }
  });
  input.addEventListener("blur", () => done(true), { once: true });
}

/** The armed delete button's question: deleting ends the conversation's sub-agents. */
function deleteWords(running) {
  if (!running) return "delete?";
  return `delete and stop ${running === 1 ? "its sub-agent" : `${running} sub-agents`}?`;
}

function confirmDelete(button, id, ask) {
  if (button.dataset.armed !== "1") {
    button.dataset.armed = "1";
    button.textContent = ask;
    page.armedDelete = id;
    setTimeout(() => {
      button.dataset.armed = "";
      button.textContent = "Delete";
      if (page.armedDelete === id) page.armedDelete = null;
    }, 3000);
    return;
  }
  page.armedDelete = null;
  button.dataset.armed = ""; // answered: a later click asks again
  button.textContent = "Delete";
  // Its event stream would reconnect to a conversation that is gone (404s).
  if (id === page.current) { hooks.closeStream(); page.ready = false; }
  deleteConversation(id).catch((e) => {
    if (isGone(e)) return hooks.conversationGone(id); // deleted elsewhere first
    hooks.showError(e);
    stillShowing(id);
  });
}

function stillShowing(id) {
  if (id === page.current && !page.ready) { hooks.openStream(); page.ready = true; }
}

/** DELETE it; when its isolated sub-agents' copies are not merged the server asks
 * first (409 unmerged_copies): the person keeps the branches, discards the work or
 * cancels (nothing deleted). */
async function deleteConversation(id) {
  let done;
  try {
    done = await api(`/api/conversations/${id}`, { method: "DELETE" });
  } catch (e) {
    if (e.status !== 409 || e.data?.reason !== "unmerged_copies") throw e;
    const choice = await askCopies(e.data.copies || []);
    if (!choice) return stillShowing(id);
    done = await api(`/api/conversations/${id}?copies=${choice}`, { method: "DELETE" });
  }
  if (id === page.current) {
    page.current = null;
    await hooks.switchTo(null);
  } else await loadConversations();
  if (done.kept) { // after the switch cleared notices; the git commands it speaks of
    const commands = (done.copies || []).flatMap((c) => c.remove || []);
    showNotice("kept-branches", done.kept, "info", commands);
  }
}

/** The copies dialog: resolves "keep", "discard" or null (Cancel, Esc). */
function askCopies(copies) {
  const dialog = $("copies");
  const one = copies.length === 1;
  const which = copies.map((c) => `#${c.agent_id} (${c.branch})`).join(", ");
  $("copies-text").textContent =
    `${one ? "A sub-agent's work is" : `${copies.length} sub-agents' work is`} not merged: ` +
    `sub-agent${one ? "" : "s"} ${which}. Deleting the conversation leaves ${one ? "its branch" : "their branches"} ` +
    `where agentkit no longer finds ${one ? "it" : "them"}. Keep ${one ? "the branch" : "the branches"} ` +
    "(to merge or remove with git), or discard the work?";
  return new Promise((resolve) => {
    const done = (choice) => {
      $("copies-keep").onclick = $("copies-discard").onclick = $("copies-cancel").onclick = dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(choice);
    };
    $("copies-keep").onclick = () => done("keep");
    $("copies-discard").onclick = () => done("discard");
    $("copies-cancel").onclick = () => done(null);
    dialog.onclose = () => done(null);
    dialog.showModal();
    $("copies-cancel").focus();
  });
}
