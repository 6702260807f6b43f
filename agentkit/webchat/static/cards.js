// The card slot: things that wait for the person (approval requests, issue 22), pinned
// between the conversation and the message box until answered. A card is any element
// its owner builds (untrusted text through textContent); ``key`` names it (e.g. the
// request id) so a repeated or answered request replaces or removes the same card.
// The slot is cleared when the page shows another conversation.
import { $ } from "./common.js";

/** Show ``node`` as the card ``key`` (replacing a card of the same key); returns it. */
export function showCard(key, node) {
  const box = $("cards");
  node.dataset.cardKey = String(key);
  const old = [...box.children].find((c) => c.dataset.cardKey === String(key));
  if (old) old.replaceWith(node);
  else box.append(node);
  node.classList.add("card");
  return node;
}

/** Remove the card ``key`` (nothing when there is none). */
export function removeCard(key) {
  const old = [...$("cards").children].find((c) => c.dataset.cardKey === String(key));
  if (old) old.remove();
}

/** Remove every card (the page shows another conversation). */
export function clearCards() {
  $("cards").replaceChildren();
}
