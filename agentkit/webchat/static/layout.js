// The page's frame: the two drawers (conversations on the left, agents on the right)
// that stand beside the conversation on a wide screen and slide over it below desktop
// width, and the keyboard shortcuts (listed in the page's "?" dialog).
import { $ } from "./common.js";

const DESKTOP = window.matchMedia("(min-width: 1100px)");

/** True when the drawers stand beside the conversation (no toggles needed). */
export const isDesktop = () => DESKTOP.matches;

function toggleFor(id) {
  return id === "sidebar" ? $("sidebar-toggle") : $("subagents-toggle");
}

/** Open or close drawer ``id`` ("sidebar" or "agents"); ``open`` undefined toggles. */
export function setDrawer(id, open) {
  const drawer = $(id);
  const now = open ?? !drawer.classList.contains("open");
  if (now) for (const other of ["sidebar", "agents"]) if (other !== id) setDrawer(other, false);
  drawer.classList.toggle("open", now);
  toggleFor(id).setAttribute("aria-expanded", String(now));
  $("scrim").hidden = !document.querySelector(".drawer.open") || isDesktop();
}

export function closeDrawers() {
  setDrawer("sidebar", false);
  setDrawer("agents", false);
}

/** Make sure drawer ``id`` is visible (opens it below desktop width). */
export function reveal(id) {
  if (!isDesktop()) setDrawer(id, true);
}

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

/** Wire the toggles, the scrim, the dialog and the shortcut keys. ``actions``:
 * {newConversation, nextConversation(step), stopRound}. */
export function setupLayout(actions) {
  $("sidebar-toggle").addEventListener("click", () => setDrawer("sidebar"));
  $("subagents-toggle").addEventListener("click", () => setDrawer("agents"));
  for (const button of document.querySelectorAll("[data-close]")) {
    button.addEventListener("click", () => setDrawer(button.dataset.close, false));
  }
  $("scrim").addEventListener("click", closeDrawers);
  DESKTOP.addEventListener("change", closeDrawers);
  const dialog = $("shortcuts");
  $("shortcuts-open").addEventListener("click", () => dialog.showModal());
  $("shortcuts-close").addEventListener("click", () => dialog.close());
  document.addEventListener("keydown", (e) => onKey(e, actions, dialog));
}

function onKey(e, actions, dialog) {
  if (e.key === "Escape") {
    if (typing(e.target)) e.target.blur();
    closeDrawers();
    return;
  }
  if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey || document.querySelector("dialog[open]")) return;
  const keys = {
    "?": () => dialog.showModal(),
    "/": () => $("composer").focus(),
    ".": actions.stopRound,
    n: actions.newConversation,
    j: () => actions.nextConversation(1),
    k: () => actions.nextConversation(-1),
    c: () => (isDesktop() ? null : setDrawer("sidebar")),
    a: () => (isDesktop() ? null : setDrawer("agents")),
  };
  const act = keys[e.key];
  if (act) {
    e.preventDefault();
    act();
  }
}

/** Ask before leaving a conversation whose sub-agents run (leaving ends them: the
 * specification's §8.5). Resolves true to go on, false to stay; Esc stays. */
export function confirmLeave(running, action = "switch") {
  // Worded by what the person asked for: New starts another conversation, a click in
  // the list switches to one (a trial saw "Switching" after a click on New).
  const dialog = $("leave");
  const one = running === 1;
  const doing = action === "new" ? "Starting a new conversation" : "Switching";
  $("leave-text").textContent =
    `This conversation has ${running} sub-agent${one ? "" : "s"} still working. ` +
    (one
      ? `${doing} stops it; what it wrote so far stays in its folder.`
      : `${doing} stops all ${running}; what they wrote so far stays in their folders.`);
  const go = action === "new" ? "Start new and stop" : "Switch and stop";
  $("leave-go").textContent = `${go} ${one ? "it" : "them"}`;
  return new Promise((resolve) => {
    const done = (go) => {
      $("leave-go").onclick = $("leave-stay").onclick = dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(go);
    };
    $("leave-go").onclick = () => done(true);
    $("leave-stay").onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
    $("leave-stay").focus();
  });
}
