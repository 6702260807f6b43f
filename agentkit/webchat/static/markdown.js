// A small, safe Markdown renderer: it builds DOM nodes and sets text with
// textContent only, so model output, tool output and file contents can never
// inject HTML or run script. Links are kept only for http(s) and mailto URLs;
// images are never loaded (shown as a link to their address, if it is safe).
// HTML entities (&lt; &amp; &#60; ...) outside code are decoded to plain text,
// never parsed as HTML. Every recursion works on a strictly shorter text, and
// inline nesting is capped, so no input can recurse without end; should the
// renderer fail anyway, renderMarkdown shows the text as plain text.

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_DEPTH = 8;

/** Return the URL as a string when it is absolute http(s)/mailto, else null. */
export function safeUrl(raw) {
  try {
    const url = new URL(String(raw).trim());
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

// Explicit bidirectional embeddings, overrides and isolates (U+202A-U+202E,
// U+2066-U+2069) make text read otherwise than it is written: U+202E turns "evil"
// into "live". Shown as their code point instead, so nothing is hidden or lost.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;

/** ``text`` with each explicit bidirectional control shown as ``[U+202E]``. */
export function visibleControls(text) {
  return String(text ?? "").replace(BIDI_CONTROLS, (c) => `[U+${c.codePointAt(0).toString(16).toUpperCase()}]`);
}

const NAMED = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'", nbsp: "\u00a0" };

/** Decode HTML character references to the characters they name (text only). */
export function decodeEntities(text) {
  return text.replace(/&(#\d{1,7}|#x[0-9a-f]{1,6}|[a-z]+);/gi, (whole, ref) => {
    if (ref[0] !== "#") return NAMED[ref.toLowerCase()] ?? whole;
    const code = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
    return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : whole;
  });
}

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

function text(value) {
  return document.createTextNode(decodeEntities(value));
}

// ``label``: Markdown to parse inside the link (never containing further links), or
// null to show the URL itself as plain text (autolinks: no re-parsing, no recursion).
function link(label, href, depth, shown) {
  const url = safeUrl(href);
  if (url === null) return label === null ? text(shown) : wrap("span", label, depth, true);
  const a = el("a");
  a.href = url;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  if (label === null) a.textContent = shown;
  else a.append(...inline(label, depth + 1, true));
  return a;
}

function autolink(url, depth, noLinks) {
  return noLinks ? text(url) : link(null, url, depth, url);
}

// Inline syntax, first match wins at each position: [regex, make(match, depth, noLinks)].
const INLINE = [
  [/^`([^`]+)`/, (m) => el("code", m[1])],
  [/^!\[([^\]]*)\]\(\s*((?:[^()\s]|\([^()\s]*\))*)[^)]*\)/, (m, d, n) => (n ? text(m[0]) : link(null, m[2], d, `[image: ${m[1] || "untitled"}]`))],
  [/^\[([^\]]+)\]\(\s*((?:[^()\s]|\([^()\s]*\))*)[^)]*\)/, (m, d, n) => (n ? wrap("span", m[1], d, n) : link(m[1], m[2], d))],
  // CommonMark's flanking rules, simply: `*` works inside words; `_` closes only
  // before a character that is not a letter or digit (inline() checks the opening side).
  [/^\*\*(?=\S)([\s\S]*?\S)\*\*/, (m, d, n) => wrap("strong", m[1], d, n)],
  [/^__(?=\S)([\s\S]*?\S)__(?![\p{L}\p{N}])/u, (m, d, n) => wrap("strong", m[1], d, n)],
  [/^\*(?=\S)([\s\S]*?\S)\*(?!\*)/, (m, d, n) => wrap("em", m[1], d, n)],
  [/^_(?=\S)([\s\S]*?\S)_(?![_\p{L}\p{N}])/u, (m, d, n) => wrap("em", m[1], d, n)],
  [/^~~(?=\S)([\s\S]*?\S)~~/, (m, d, n) => wrap("del", m[1], d, n)],
  [/^<((?:https?|mailto):[^\s<>]+)>/, (m, d, n) => autolink(m[1], d, n)],
  // A bare URL; trailing punctuation is taken as the sentence's, not the URL's.
  [/^https?:\/\/[^\s<>"'`]*[^\s<>"'`.,;:!?)\]*_~]/, (m, d, n) => autolink(m[0], d, n)],
];

function wrap(tag, body, depth, noLinks) {
  const node = el(tag);
  node.append(...inline(body, depth + 1, noLinks));
  return node;
}

// A letter or digit (any script) ends the text before ``rest``: `_` there opens no
// emphasis (my_var_name stays as written). Two code units: a character may be a pair.
const WORD_END = /[\p{L}\p{N}]$/u;

function afterWord(source, rest) {
  const at = source.length - rest.length;
  return WORD_END.test(source.slice(Math.max(0, at - 2), at));
}

/** Parse inline Markdown into a list of nodes (text nodes and safe elements).
 * ``depth`` counts nesting (beyond MAX_DEPTH the text stays plain); ``noLinks``
 * is set inside a link, where no further link may start. */
export function inline(source, depth = 0, noLinks = false) {
  if (depth > MAX_DEPTH) return [text(source)];
  const out = [];
  let plain = "";
  let rest = source;
  while (rest.length) {
    let matched = false;
    if ("`![*_~<h".includes(rest[0]) && !(rest[0] === "_" && afterWord(source, rest))) {
      for (const [re, make] of INLINE) {
        const m = re.exec(rest);
        if (m && m[0].length) {
          if (plain) out.push(text(plain));
          plain = "";
          out.push(make(m, depth, noLinks));
          rest = rest.slice(m[0].length);
          matched = true;
          break;
        }
      }
    }
    if (!matched) {
      plain += rest[0];
      rest = rest.slice(1);
    }
  }
  if (plain) out.push(text(plain));
  return out;
}

const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const FENCE = /^\s*(```|~~~)\s*([\w+-]*)/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function isTableStart(lines, i) {
  return lines[i].includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-");
}

function cells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

// A GFM table: header row, alignment row, body rows up to a blank line.
function table(lines, i) {
  const head = cells(lines[i]);
  const aligns = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : "left"));
  const node = el("table");
  const row = (values, tag) => {
    const tr = el("tr");
    head.forEach((_, n) => {
      const cell = el(tag);
      cell.className = `align-${aligns[n] || "left"}`;
      cell.append(...inline(values[n] ?? ""));
      tr.append(cell);
    });
    return tr;
  };
  const thead = el("thead");
  thead.append(row(head, "th"));
  const tbody = el("tbody");
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) tbody.append(row(cells(lines[i++]), "td"));
  node.append(thead, tbody);
  return [node, i];
}

// A list from lines[i]: items at the first item's indent; items indented further
// (by 2+ spaces) form one nested list inside the previous item. A change between
// ordered and unordered at the same level starts a new list.
function list(lines, i, nested = false) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.start = parseInt(first[2], 10);
  let last = null;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m) {
      // A continuation line (indented text) belongs to the last item.
      if (last && /^\s{2,}\S/.test(lines[i])) { last.append(" ", ...inline(lines[i++].trim())); continue; }
      break;
    }
    const here = m[1].length;
    if (here < indent) break;
    if (here >= indent + 2 && last && !nested) {
      const [child, next] = list(lines, i, true);
      last.append(child);
      i = next;
      continue;
    }
    if (here >= indent + 2 && nested) { last.append(" ", ...inline(lines[i++].trim())); continue; }
    if (/\d/.test(m[2]) !== ordered) break;
    last = el("li");
    last.append(...inline(m[3]));
    node.append(last);
    i++;
  }
  return [node, i];
}

function blocks(source) {
  const root = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const pre = el("pre");
      const code = el("code", body.join("\n"));
      if (fence[2]) code.dataset.lang = fence[2];
      pre.append(code);
      root.append(pre);
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      root.append(wrap(`h${Math.min(heading[1].length + 2, 6)}`, heading[2], 0, false));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(el("hr")); i++; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      const quote = el("blockquote");
      quote.append(blocks(body.join("\n"))); // shorter: each line lost its ">"
      root.append(quote);
      continue;
    }
    if (ITEM.test(line)) {
      const [node, next] = list(lines, i);
      root.append(node);
      i = next;
      continue;
    }
    if (isTableStart(lines, i)) {
      const [node, next] = table(lines, i);
      root.append(node);
      i = next;
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*(```|~~~)|\s*>|\s*([-*+]|\d+[.)])\s)/.test(lines[i]) && !(para.length && isTableStart(lines, i))) {
      para.push(lines[i++]);
    }
    if (!para.length) para.push(lines[i++]);
    const p = el("p");
    para.forEach((row, n) => {
      if (n) p.append(el("br"));
      p.append(...inline(row));
    });
    root.append(p);
  }
  return root;
}

/** Render Markdown ``source`` to a DocumentFragment of safe nodes. Never throws:
 * if rendering fails, the fragment holds the text as it is (plain text). */
export function renderMarkdown(source) {
  const value = visibleControls(source);
  try {
    return blocks(value);
  } catch (error) {
    console.error("agentkit: Markdown rendering failed; shown as plain text", error);
    window.agentkitDebug && (window.agentkitDebug.renderErrors = (window.agentkitDebug.renderErrors || 0) + 1);
    const root = document.createDocumentFragment();
    root.append(document.createTextNode(value));
    return root;
  }
}
