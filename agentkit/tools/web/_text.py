"""Byte-level helpers for extract_webpage: content sniffing, charset decoding, visible text.

Decoding order (docs/tools.md §9, extract_webpage, and the WHATWG encoding sniffing
order): BOM → Content-Type charset → ``<meta charset>`` / ``http-equiv`` / XML
declaration (HTML only) → strict UTF-8 → charset-normalizer's best guess → UTF-8
with replacement characters. trafilatura 2.x, given bytes, only tries UTF-8 and
then detection (it never reads ``<meta charset>``), so pages are decoded here and
trafilatura receives text.
"""

from __future__ import annotations

import codecs
import re

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,400}?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]{1,40})""", re.IGNORECASE
)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})""")
# WHATWG maps these labels to a superset decoder; browsers do the same.
_SUPERSETS = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "gb_2312-80": "gb18030",
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "sjis": "cp932",
    "euc-kr": "cp949",
}

# (magic prefix, human name); checked before trusting Content-Type.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-elf"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x00asm", "application/wasm"),
)


def sniff_magic(head: bytes) -> str | None:
    """Return the media type a known file signature announces, or None."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}[head[8:12]]
    if head[4:8] == b"ftyp":
        return "video/mp4"
    return None


def looks_like_html(head: bytes) -> bool:
    """True when the first bytes look like an HTML document."""
    start = head[:1024].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html")) or b"<html" in start or b"<body" in start


def meta_charset(head: bytes) -> str | None:
    """Return the charset named by ``<meta charset>``, ``http-equiv`` or an XML declaration."""
    match = _XML_ENCODING.match(head) or _META_CHARSET.search(head[:16384])
    return match.group(1).decode("ascii").lower() if match else None


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().lower()
    label = _SUPERSETS.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def decode(body: bytes, header_charset: str | None, *, html: bool) -> tuple[str, str]:
    """Decode ``body`` to text; returns ``(text, encoding name)``.

    Never raises: the last resort is UTF-8 with replacement characters (encoding
    reported as ``"utf-8 (with replacements)"``).
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, errors="replace"), name
    candidates: list[str] = []
    for label in (header_charset, meta_charset(body) if html else None, "utf-8"):
        codec = _codec(label)
        if codec and codec not in candidates:
            candidates.append(codec)
    for codec in candidates:
        try:
            return body.decode(codec), codec
        except (UnicodeDecodeError, LookupError):
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    codec = _codec(best.encoding) if best is not None else None
    if codec:
        try:
            return body.decode(codec), codec
        except (UnicodeDecodeError, LookupError):
            pass
    # A declared charset with a few bad bytes beats a guess: decode it with replacements.
    first = candidates[0] if candidates else "utf-8"
    return body.decode(first, errors="replace"), f"{first} (with replacements)"


_DROP = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas")
_BLOCKS = (
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "li", "ul",
    "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "br", "hr",
    "dd", "dt", "dl", "figcaption", "form", "td", "th",
)  # fmt: skip


def visible_text(html: str) -> tuple[str, str | None, int]:
    """Plain visible-text pass over an HTML document with lxml.

    Returns ``(text, title or None, number of <script> elements)``; the text keeps
    one line per block element, blank and repeated lines dropped. Never raises.
    """
    from lxml import etree
    from lxml import html as lxml_html

    try:
        doc = lxml_html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        try:
            doc = lxml_html.document_fromstring(html.encode("utf-8"))
        except (etree.ParserError, ValueError):
            return "", None, 0
    scripts = len(doc.xpath("//script"))
    title_el = doc.find(".//title")
    title = " ".join(title_el.text_content().split()) if title_el is not None else None
    etree.strip_elements(doc, *_DROP, with_tail=False)
    for el in doc.iter(*_BLOCKS):
        el.tail = "\n" + (el.tail or "")
    lines: list[str] = []
    for raw in doc.text_content().splitlines():
        line = " ".join(raw.split())
        if line and (not lines or lines[-1] != line):
            lines.append(line)
    return "\n".join(lines), title or None, scripts
