// A small, safe Markdown renderer: it builds DOM nodes and sets text with
// textContent only, so model output, tool output and file contents can never
// inject HTML or run script. Links are kept only for http(s) and mailto URLs;
// images are never loaded (shown as a link to their address, if it is safe).

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** Return the URL as a string when it is absolute http(s)/mailto, else null. */
export function safeUrl(raw) {
  try {
    const url = new URL(String(raw).trim());
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

function link(text, href) {
  const url = safeUrl(href);
  if (url === null) return document.createTextNode(text);
  const a = el("a");
  a.href = url;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  a.append(...inline(text));
  return a;
}

// Inline syntax, first match wins at each position.
const INLINE = [
  [/^`([^`]+)`/, (m) => el("code", m[1])],
  [/^!\[([^\]]*)\]\(\s*((?:[^()\s]|\([^()\s]*\))*)[^)]*\)/, (m) => link(`[image: ${m[1] || "untitled"}]`, m[2])],
  [/^\[([^\]]+)\]\(\s*((?:[^()\s]|\([^()\s]*\))*)[^)]*\)/, (m) => link(m[1], m[2])],
  [/^(\*\*|__)(?=\S)([\s\S]*?\S)\1/, (m) => wrap("strong", m[2])],
  [/^(\*|_)(?=\S)([\s\S]*?\S)\1(?!\1)/, (m) => wrap("em", m[2])],
  [/^~~(?=\S)([\s\S]*?\S)~~/, (m) => wrap("del", m[1])],
  [/^<?(https?:\/\/[^\s<>"')\]]+)>?/, (m) => link(m[1], m[1])],
];

function wrap(tag, text) {
  const node = el(tag);
  node.append(...inline(text));
  return node;
}

/** Parse inline Markdown into a list of nodes (text nodes and safe elements). */
export function inline(text) {
  const out = [];
  let plain = "";
  let rest = text;
  while (rest.length) {
    let matched = false;
    if ("`![*_~<h".includes(rest[0])) {
      for (const [re, make] of INLINE) {
        const m = re.exec(rest);
        if (m) {
          if (plain) out.push(document.createTextNode(plain));
          plain = "";
          out.push(make(m));
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
  if (plain) out.push(document.createTextNode(plain));
  return out;
}

/** Render Markdown ``text`` to a DocumentFragment of safe nodes. */
export function renderMarkdown(text) {
  const root = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)/.exec(line);
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
      root.append(wrap(`h${Math.min(heading[1].length + 2, 6)}`, heading[2]));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(el("hr")); i++; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      const quote = el("blockquote");
      quote.append(renderMarkdown(body.join("\n")));
      root.append(quote);
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && item.test(lines[i])) {
        let body = lines[i++].replace(item, "");
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) body += " " + lines[i++].trim();
        list.append(wrap("li", body));
      }
      root.append(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*(```|~~~)|\s*>|\s*([-*+]|\d+[.)])\s)/.test(lines[i])) {
      para.push(lines[i++]);
    }
    if (!para.length) para.push(lines[i++]);
    const p = el("p");
    para.forEach((text, n) => {
      if (n) p.append(el("br"));
      p.append(...inline(text));
    });
    root.append(p);
  }
  return root;
}
