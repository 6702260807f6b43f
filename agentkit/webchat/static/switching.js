// Which conversation the page shows, and getting there. Switches run one at a time, in
// the order asked. A message typed while one is under way belongs to its target: it
// is posted there once that is open, or given back in the message box (composer.js).
// A refused switch (damaged, open in another process, deleted, server full) leaves the
// page where it was, followed again (the server keeps that one open and its sub-agents
// running), with one notice saying why. At start-up the page opens the newest
// conversation that is not damaged, unless the person chose one first. A conversation deleted elsewhere (another tab or
// window) is said so and the page moves on; one closed elsewhere is opened again.
import { $, api, isGone, reasonText, titleText } from "./common.js";
import { runningCount } from "./agents.js";
import { backWords, giveBack, postPending, sendLabel } from "./composer.js";
import { confirmLeave, setDrawer } from "./layout.js";
import { clearNotices, showNotice } from "./notices.js";
import { loadConversations } from "./sidebar.js";

let page = null; // app.js's page state
let hooks = null; // {showConversation(detail), openStream(), closeStream(), showError(e)}

/** Give this module the page's state and the callbacks it needs. */
export function setupSwitching(state, callbacks) {
  page = state;
  hooks = callbacks;
}

// ------------------------------------------------------------------ requests
/** A switch to ``to`` (null: a new conversation), not run yet; messages typed from now
 * on are its ``texts``. ``options``: {notice} to show once it is open, {tried} ids. */
function newRequest(to, options = {}) {
  // The drawer closes after a switch chosen in it, not one asked before it was opened.
  const request = { to, texts: [], fromDrawer: $("sidebar").classList.contains("open"), ...options };
  page.switching = request;
  page.requests.add(request);
  return request;
}

function enqueue(request) {
  page.switches = page.switches.then(() => run(request)).catch((e) => {
    console.error("agentkit: a switch failed", e);
    settle(request);
  });
  return page.switches;
}

/** Show conversation ``id`` (null: a new one); resolves once the switch is done. */
export function switchTo(id) {
  return enqueue(newRequest(id));
}

/** Open the conversation on screen again (closed elsewhere); returns its request. */
export function reopen() {
  const request = newRequest(page.current);
  enqueue(request);
  return request;
}

function settle(request) {
  page.requests.delete(request);
  if (page.switching === request) page.switching = null;
  window.agentkitDebug.settled++;
  sendLabel();
}

async function run(request) {
  const { to } = request;
  if (to && to === page.current && page.ready) { // already there
    postPending(request.texts, to);
    if (request.fromDrawer) setDrawer("sidebar", false);
    return settle(request);
  }
  const leaving = page.ready && page.current !== to ? page.current : null;
  // No need to ask for a damaged one: it is refused before anything is left.
  const running = leaving && !isDamaged(to) ? runningCount(page) : 0;
  if (running && !(await confirmLeave(running, to ? "switch" : "new"))) { // stays: nothing was switched
    giveBack(request.texts);
    return settle(request);
  }
  // Nothing shown yet (start-up): the header names what is being opened, as the list does.
  if (!page.current) $("title").textContent = titleText(page.conversations.find((c) => c.id === to)?.title, to);
  const wasReady = page.ready;
  page.ready = false;
  hooks.closeStream();
  try {
    opened(request, await api("/api/switch", { method: "POST", body: { leaving, to } }));
  } catch (e) {
    failed(request, e, wasReady);
  }
  settle(request);
}

function opened(request, detail) {
  page.current = detail.id;
  page.closed = false;
  history.replaceState(null, "", `#${detail.id}`);
  clearNotices();
  if (request.notice) showNotice(request.notice.key, request.notice.text, request.notice.kind);
  hooks.showConversation(detail);
  hooks.openStream();
  page.ready = true;
  postPending(request.texts, detail.id);
  if (request.fromDrawer) setDrawer("sidebar", false);
  loadConversations().catch((e) => hooks.showError(e));
}

// ------------------------------------------------------------------ refusals
function failed(request, e, wasReady) {
  const { to } = request;
  if (request.fromDrawer) setDrawer("sidebar", false); // the notice would be behind it
  if (to && to === page.current) return reopenFailed(request, e);
  giveBack(request.texts);
  const name = conversationName(to);
  const text = isGone(e)
    ? `${capital(name)} was deleted (in another tab or window).${backWords(request.texts)}`
    : `Could not open ${name}: ${reasonText(e.message)}.${backWords(request.texts)}`;
  showNotice("switch", text);
  if (page.current) {
    if (wasReady) { // the server left it open: follow it again, from where it was
      hooks.openStream();
      page.ready = true;
    }
    loadConversations().catch(() => {});
  } else fallBack(request, { key: "switch", text, kind: "error" });
}

/** Nothing is shown (start-up, or the one shown was deleted): open the newest
 * conversation not damaged and not tried yet, else a new one. */
function fallBack(request, notice) {
  if (request.to === null) { // not even a new one could be opened: the notice says why
    $("title").textContent = "No conversation open";
    return;
  }
  openNewest(newRequest(null, { tried: new Set([...(request.tried || []), request.to]), notice }));
}

function reopenFailed(request, e) {
  const id = page.current;
  if (isGone(e)) return conversationGone(id, request.texts);
  giveBack(request.texts);
  page.closed = true;
  showNotice("switch", `${capital(conversationName(id))} was closed (in another tab or window, or by the `
    + `server) and could not be opened again: ${reasonText(e.message)}. Send a message or click it to try `
    + `again.${backWords(request.texts)}`);
  refresh(id);
}

/** Show conversation ``id`` as saved (a GET opens nothing), not as the stream that
 * ended left it (e.g. "waiting" for sub-agents that were stopped). */
async function refresh(id) {
  try {
    const detail = await api(`/api/conversations/${id}`);
    if (id === page.current && !page.ready) hooks.showConversation(detail);
  } catch (e) {
    if (isGone(e)) conversationGone(id);
  }
}

// ------------------------------------------------------- changed elsewhere
/** Conversation ``id`` no longer exists (deleted in another tab or window): say so,
 * drop it from the list, give back ``texts`` meant for it, and when it is the one on
 * screen, move to another. */
export function conversationGone(id, texts = []) {
  giveBack(texts);
  const notice = {
    key: "gone", kind: "info",
    text: `${capital(conversationName(id))} was deleted (in another tab or window).${backWords(texts)}`,
  };
  showNotice(notice.key, notice.text, notice.kind);
  page.conversations = page.conversations.filter((c) => c.id !== id);
  document.querySelector(`#conversations [data-id="${CSS.escape(id)}"]`)?.remove();
  if (id !== page.current) return;
  hooks.closeStream();
  page.ready = false;
  page.closed = false;
  page.current = null; // nothing to leave
  openNewest(newRequest(null, { notice, tried: new Set([id]) }));
}

/** The stream of conversation ``id`` was refused with ``status`` (404 deleted, 409 not
 * open: closed by another tab or window, or by the server): open it again. */
export function streamRefused(id, status) {
  if (id !== page.current) return;
  if (status === 404) return conversationGone(id);
  page.ready = false;
  page.closed = true;
  const name = capital(conversationName(id));
  enqueue(newRequest(id, { notice: { key: "closed", kind: "info",
    text: `${name} was closed in another tab or window (or by the server); it is open here again.` } }));
}

// ------------------------------------------------------------------ start-up
/** Open the conversation the address names, else the newest one not damaged, else a
 * new one. Messages typed before the list arrives go to whichever it is. */
export function startPage() {
  return openNewest(newRequest(null), location.hash.slice(1));
}

/** Run ``request`` (made at once: messages typed meanwhile are its own) for ``wanted``
 * when listed, else the newest conversation not damaged nor tried, else a new one.
 * A switch asked while the list loads replaces it; what was typed for it comes back. */
async function openNewest(request, wanted) {
  let list = page.conversations;
  try {
    list = await loadConversations();
  } catch (e) {
    showNotice("list", `The conversations could not be listed: ${reasonText(e.message)}.`);
  }
  if (page.switching !== request) { // the person chose meanwhile (e.g. "+ New"): theirs wins
    giveBack(request.texts);
    return settle(request);
  }
  const tried = request.tried || new Set();
  const start = list.find((c) => c.id === wanted) || list.find((c) => c.state !== "damaged" && !tried.has(c.id));
  request.to = start ? start.id : null;
  return enqueue(request);
}

// --------------------------------------------------------------------- words
function isDamaged(id) {
  return page.conversations.some((c) => c.id === id && c.state === "damaged");
}

/** How a sentence names conversation ``id``: its title in quotes, never its id. */
export function conversationName(id) {
  if (!id) return "a new conversation";
  const listed = page.conversations.find((c) => c.id === id);
  if (listed?.state === "damaged") return "a damaged conversation";
  if (!listed && id !== page.current) return "that conversation";
  return `“${titleText(listed ? listed.title : page.title, id)}”`;
}

function capital(words) {
  return words.charAt(0).toUpperCase() + words.slice(1);
}
