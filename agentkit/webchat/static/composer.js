// The message box. A message is shown at once (dashed, "pending") and belongs to the
// conversation it was typed in: the one on screen, or the one a switch under way is
// opening (switching.js posts those once it is open, or gives them back). Posts go
// one after another, in the order typed, each to the conversation fixed when it was
// typed. A message that cannot be delivered comes back into the box, before anything
// typed since: nothing typed is lost, nothing goes to another conversation.
import { $, api, isGone, reasonText, showLanguage } from "./common.js";
import { addMessage, shownUser } from "./messages.js";
import { showNotice } from "./notices.js";

let page = null; // app.js's page state: current, ready, closed, switching, posting
let hooks = null; // {showError(e), conversationGone(id, texts), reopen() -> its switch}

/** Give the composer the page's state and the callbacks it needs. */
export function setupComposer(state, callbacks) {
  page = state;
  hooks = callbacks;
}

const BACK = "Your message was not sent; it is back in the message box.";

/** " Your message was not sent; ..." when ``texts`` were given back, else "". */
export function backWords(texts) {
  return texts.length ? ` ${BACK}` : "";
}

export function send() {
  const box = $("composer");
  const text = box.value;
  if (!text.trim()) return;
  box.value = "";
  addMessage("user", text).classList.add("pending");
  if (page.switching) page.switching.texts.push(text); // for the conversation being opened
  else if (page.ready) queuePost(text, page.current);
  else if (page.current && page.closed) hooks.reopen().texts.push(text); // closed elsewhere
  else {
    giveBack([text]);
    showNotice("send", `No conversation is open right now. ${BACK}`);
  }
  sendLabel();
}

function queuePost(text, id) {
  page.posting = page.posting.then(() => post(text, id));
  return page.posting;
}

/** Post ``texts`` (in order) to conversation ``id``, just opened for them. */
export function postPending(texts, id) {
  for (const text of texts) {
    if (!shownUser(text, ".pending")) addMessage("user", text).classList.add("pending");
    queuePost(text, id);
  }
}

async function post(text, id) {
  try {
    const reply = await api(`/api/conversations/${id}/messages`, { method: "POST", body: { text } });
    if (id === page.current) showLanguage(reply.language); // a first message settles it
  } catch (e) {
    if (isGone(e)) return hooks.conversationGone(id, [text]);
    giveBack([text]);
    const words = `Your message was not sent: ${reasonText(e.message)}. It is back in the message box.`;
    if (id === page.current) hooks.showError(words);
    else showNotice("send", words);
  }
}

/** Put ``texts`` back into the box (before what is there) and drop their dashed copies. */
export function giveBack(texts) {
  if (!texts.length) return;
  for (const text of texts) shownUser(text, ".pending")?.remove();
  const box = $("composer");
  const back = texts.join("\n\n");
  box.value = box.value.trim() ? `${back}\n\n${box.value}` : back;
}

/** "Sending…" while messages wait for a conversation being opened, else "Send". */
export function sendLabel() {
  const waiting = [...page.requests].some((r) => r.texts.length);
  $("send").textContent = waiting ? "Sending…" : "Send";
}
