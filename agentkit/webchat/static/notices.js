// Notices about the page itself rather than the conversation: a conversation that
// could not be opened, was deleted or closed in another tab or window, a message given
// back. One line per key, so a failure repeated by each click shows once; switching.js
// clears them when a switch succeeds. Text only through textContent (common.el).
import { $, el } from "./common.js";

/** Show ``text`` as the notice ``key`` (replacing one of the same key). ``kind``:
 * "error" (something failed) or "info"; ``lines``: commands to copy, shown below
 * it as they are. Returns the element. */
export function showNotice(key, text, kind = "error", lines = []) {
  const box = $("notices");
  const node = el("div", { class: `page-notice ${kind}`, "data-testid": "notice", "data-key": key, "data-kind": kind });
  const close = el("button", { type: "button", class: "dismiss", title: "Dismiss", "aria-label": "Dismiss" }, "×");
  close.addEventListener("click", () => node.remove());
  node.append(el("span", { class: "text" }, text), close);
  if (lines.length) node.append(el("pre", { class: "commands", "data-testid": "notice-commands" }, lines.join("\n")));
  const old = box.querySelector(`[data-key="${CSS.escape(key)}"]`);
  if (old) old.replaceWith(node);
  else box.append(node);
  return node;
}

/** Remove every notice (a switch succeeded: they were about what came before). */
export function clearNotices() {
  $("notices").replaceChildren();
}
