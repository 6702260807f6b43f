// Shared helpers of the page: the JSON API client, a safe element builder (text always
// through textContent) and the words people read instead of identifiers.

export const $ = (id) => document.getElementById(id);

export async function api(path, { method = "GET", body } = {}) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body ?? {});
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw apiError(path, response, data);
  return data;
}

/** The Error of a refused request, with ``status`` and the ``conversation`` its path
 * names: a 404 "no conversation" of the one on screen means it was deleted elsewhere. */
function apiError(path, response, data) {
  const error = new Error(data.error || `${response.status} ${response.statusText}`);
  error.status = response.status;
  error.data = data; // the refusal's other fields (e.g. reason, copies)
  error.conversation = /^\/api\/conversations\/([^/?#]+)/.exec(path)?.[1] ?? null;
  return error;
}

/** True when ``error`` says its conversation no longer exists (404 from its routes). */
export function isGone(error) {
  return error?.status === 404 && /^no conversation\b/.test(error.message);
}

/** The server's reason in words people read: ids and pids left out (a file's path,
 * which says where to look, stays). */
export function reasonText(message) {
  return String(message || "no reason given")
    .replace(/\s*\(pid [^)]*\)/g, "")
    .replace(/\bconversation conv_\w+/g, "this conversation")
    .replace(/(?<![\w/.])conv_\w+/g, "this conversation")
    .replace(/[.\s]+$/, "");
}

export function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role") node.setAttribute(key, value);
    else node[key] = value;
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The conversation's state in words: "working", "waiting for 2 sub-agents", "idle". */
export function stateWords(state, running = 0) {
  if (state === "running") return "working";
  if (state === "waiting_for_subagents") {
    // None left running (they just ended; the round that reports them comes next):
    // said so, never a bare "waiting for sub-agents" without its count.
    return running > 0 ? `waiting for ${plural(running, "sub-agent")}` : "sub-agents finished";
  }
  return "idle";
}

/** A sub-agent's status in words. */
export const STATUS_WORDS = {
  running: "running",
  completed: "done",
  failed: "failed",
  timeout: "timed out",
  terminated: "stopped",
  budget_exhausted: "budget used up",
};

export const COUNTER_WORDS = { files_read: "files read", searches: "searches", web_pages: "web pages", commands: "commands" };
const COUNTER_ONE = { files_read: "file read", searches: "search", web_pages: "web page", commands: "command" };

/** "2 files read", "1 search": one counter as agentkit.chat.explain.counter_words says it. */
export function counterText(name, count) {
  const n = Number.isInteger(count) ? count : 0;
  return `${n} ${n === 1 ? COUNTER_ONE[name] : COUNTER_WORDS[name]}`;
}

/** "1,234 tokens" (or "" for none). */
export function tokensText(tokens) {
  const n = Number(tokens);
  return Number.isFinite(n) && n > 0 ? `${n.toLocaleString("en-US")} tokens` : "";
}

/** "$0.0123" for a known cost (a number), "cost unknown" for null (a response had no
 * known price: the CLI's words), "" when absent. */
export function costText(cost) {
  if (cost === null) return "cost unknown";
  if (typeof cost !== "number" || !Number.isFinite(cost)) return "";
  if (cost === 0) return "$0";
  return cost < 0.01 ? `$${cost.toPrecision(2)}` : `$${cost.toFixed(2)}`;
}

/** Say the conversation's prompt language in the header: zh, en, or auto until its
 * first message settles it. */
export function showLanguage(language) {
  const box = $("language");
  if (!box || !language) return;
  box.dataset.language = language;
  box.textContent = language === "auto" ? "language: auto" : `language: ${language}`;
}

/** Tokens and cost of one agent's row or stats, e.g. "1,234 tokens · $0.0021" or
 * "1,234 tokens · cost unknown"; "" before anything was spent (never a bare "$0"). */
export function usageText(info) {
  const usage = info?.token_usage;
  const tokens = typeof info?.tokens === "number" ? info.tokens
    : usage && typeof usage === "object" ? usage.total : info?.total_tokens;
  const cost = info && typeof info === "object" && "cost_usd" in info ? info.cost_usd : info?.stats?.cost_usd;
  const shown = tokensText(tokens);
  if (!shown) return ""; // no tokens yet: no cost to speak of
  // Estimated when the server sent no usage (issue 21): said, not hidden.
  const counted = info?.usage_estimated ? `~${shown} (estimated)` : shown;
  return [counted, costText(cost)].filter(Boolean).join(" · ");
}

/** "just now", "5 min ago", "3 h ago", or the date, for an ISO time. */
export function ago(iso) {
  const then = Date.parse(iso);
  if (!Number.isFinite(then)) return "";
  const minutes = Math.round((Date.now() - then) / 60000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 60 * 24) return `${Math.round(minutes / 60)} h ago`;
  return new Date(then).toLocaleDateString();
}

/** A conversation's title to show: its own, else "New conversation" (never an id). */
export function titleText(title, id) {
  return title && title !== id ? title : "New conversation";
}
