"""Text model of the file tools: binary sniffing, decoding, line endings, re-encoding.

Rules from docs/tools.md §1 ("Text model", read_file decoding order): detect a BOM
(UTF-8/16/32), else strict UTF-8, else a confident legacy guess from
``charset_normalizer`` restricted to common sets (GB18030/GBK, Big5, Shift_JIS/cp932,
EUC-KR/cp949, EUC-JP, cp1251, cp1252), else ``decode_error``. Lines split on ``\\n``
only; a ``\\r`` before it is part of the line ending. The detected
:class:`TextFormat` is remembered so a write restores encoding, BOM and EOL.
"""

from __future__ import annotations

import codecs
import unicodedata
from dataclasses import dataclass

from agentkit.errors import ToolError

SNIFF_BYTES = 8192

_BOMS: list[tuple[bytes, str, str]] = [
    # Longest first: the UTF-32-LE BOM starts with the UTF-16-LE one.
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16BE"),
]

_MAGIC: list[tuple[bytes, str]] = [
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (or Office/jar file)"),
    (b"PK\x05\x06", "ZIP archive (empty)"),
    (b"\x7fELF", "ELF executable"),
    (b"\xcf\xfa\xed\xfe", "Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "Mach-O universal binary or Java class"),
    (b"\x1f\x8b", "gzip archive"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x28\xb5\x2f\xfd", "zstd archive"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"MZ", "Windows executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"RIFF", "RIFF media (WAV/AVI/WebP)"),
    (b"OggS", "Ogg media"),
    (b"ID3", "MP3 audio"),
]

# Legacy sets we accept from charset_normalizer, in preference order for ties.
_LEGACY = ["gb18030", "cp932", "big5", "cp949", "euc_jp", "cp1252", "cp1251", "latin_1"]
_LEGACY_LABELS = {
    "gbk": "GBK",
    "gb18030": "GB18030",
    "cp932": "Shift_JIS (cp932)",
    "shift_jis": "Shift_JIS",
    "big5": "Big5",
    "cp949": "EUC-KR (cp949)",
    "euc_jp": "EUC-JP",
    "cp1251": "Windows-1251",
    "cp1252": "Windows-1252",
    "latin_1": "Latin-1",
}


@dataclass(frozen=True)
class TextFormat:
    """How a text file is stored, so a rewrite can restore it byte for byte.

    Attributes:
        encoding: Python codec of the body, without BOM ("utf-8", "utf-16-le", "gbk", ...).
        bom: the BOM bytes at the start of the file, or b"".
        eol: dominant line ending, "\\n" or "\\r\\n".
        final_newline: whether the text ends with a line ending.
        mixed_eol: both CRLF and bare LF occur.
    """

    encoding: str = "utf-8"
    bom: bytes = b""
    eol: str = "\n"
    final_newline: bool = True
    mixed_eol: bool = False

    @property
    def label(self) -> str:
        """Human name: "UTF-8", "UTF-16LE with BOM", "GBK", ..."""
        for bom, codec, name in _BOMS:
            if codec == self.encoding and self.bom == bom:
                return f"{name} with BOM"
        if self.encoding == "utf-8":
            return "UTF-8"
        return _LEGACY_LABELS.get(self.encoding, self.encoding)

    @property
    def eol_label(self) -> str:
        """ "LF", "CRLF" or "mixed CRLF/LF" (dominant first)."""
        name = "CRLF" if self.eol == "\r\n" else "LF"
        if self.mixed_eol:
            return "mixed CRLF/LF" if name == "CRLF" else "mixed LF/CRLF"
        return name

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-able description (for ctx.file_state and result meta)."""
        return {
            "encoding": self.encoding,
            "bom": self.bom.hex(),
            "eol": "CRLF" if self.eol == "\r\n" else "LF",
            "final_newline": self.final_newline,
        }


@dataclass
class Decoded:
    """A decoded file: ``text`` keeps every character (CRs included); ``lossy`` when
    undecodable bytes were replaced (such a file cannot be edited in place)."""

    text: str
    fmt: TextFormat
    lossy: bool = False


def human_size(n: int) -> str:
    """Return ``n`` bytes as "532 bytes", "12.3 KiB", "1.0 GiB"."""
    if n < 1024:
        return f"{n} byte" + ("" if n == 1 else "s")
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    return f"{n} bytes"  # pragma: no cover


def detect_bom(data: bytes) -> tuple[str, bytes] | None:
    """Return ``(codec, bom_bytes)`` when ``data`` starts with a Unicode BOM, else None."""
    for bom, codec, _name in _BOMS:
        if data.startswith(bom):
            return codec, bom
    return None


def sniff_binary(head: bytes) -> str | None:
    """Return a description of the binary type of a file from its first bytes, or None for text.

    A BOM means text (UTF-16 text contains NUL bytes). Otherwise a known magic number
    or a NUL byte in the first 8 KiB (docs/tools.md §1 "binary sniff") means binary.
    """
    if detect_bom(head):
        return None
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if magic == b"MZ" and b"\x00" not in head[:SNIFF_BYTES]:
                continue  # a text file starting with "MZ" is still text
            if magic in (b"RIFF", b"OggS", b"ID3", b"BZh") and b"\x00" not in head[:SNIFF_BYTES]:
                continue
            return kind
    if b"\x00" in head[:SNIFF_BYTES]:
        return "binary data (NUL bytes)"
    return None


def eol_counts(text: str) -> tuple[int, int]:
    """Return ``(crlf, bare_lf)`` line-ending counts of ``text``."""
    total = text.count("\n")
    crlf = text.count("\r\n")
    return crlf, total - crlf


def format_of(text: str, encoding: str, bom: bytes) -> TextFormat:
    """Build the :class:`TextFormat` of decoded ``text`` (dominant EOL, final newline)."""
    crlf, lf = eol_counts(text)
    return TextFormat(
        encoding=encoding,
        bom=bom,
        eol="\r\n" if crlf > lf else "\n",
        final_newline=text.endswith("\n"),
        mixed_eol=crlf > 0 and lf > 0,
    )


def _cjk_score(text: str) -> float:
    """Share of non-ASCII characters that are common in real text, to break legacy ties.

    Short CJK samples decode without errors in several codecs; the wrong ones yield rare
    ideographs, rare Hangul or half-width katakana.
    """
    total = common = 0
    for i, ch in enumerate(text):
        if ch < "\x80":
            continue
        total += 1
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF or 0x3000 <= o <= 0x303F or 0xFF01 <= o <= 0xFF5E:
            common += 1  # kana, CJK punctuation, full-width forms
        elif 0xAC00 <= o <= 0xD7A3:
            common += _encodes(ch, "euc_kr")
        elif 0x4E00 <= o <= 0x9FFF:
            common += _common_han(ch)
        elif 0xFF61 <= o <= 0xFF9F:
            continue  # half-width katakana: rare in modern files
        elif unicodedata.category(ch)[0] in "LPS" and o < 0x2000:
            # Accented Latin, Cyrillic, Greek, symbols; but a non-Latin letter inside a
            # word of ASCII letters ("wцrld") means the wrong single-byte code page.
            next_to_ascii = any(
                text[j : j + 1].isascii() and text[j : j + 1].isalpha()
                for j in (i - 1, i + 1)
                if j >= 0
            )
            latin = unicodedata.name(ch, "").startswith("LATIN")
            common += 0 if next_to_ascii and not latin and ch.isalpha() else 1
    return common / total if total else 1.0


def _encodes(ch: str, codec: str) -> int:
    try:
        ch.encode(codec)
    except UnicodeEncodeError:
        return 0
    return 1


def _common_han(ch: str) -> int:
    # GB2312 level 1 (B0A1-D7F9) or Big5 level 1 (A440-C67E): the frequently used ideographs.
    try:
        b = ch.encode("gb2312")
        if 0xB0 <= b[0] <= 0xD7:
            return 1
    except UnicodeEncodeError:
        pass
    try:
        b = ch.encode("big5")
        if 0xA4 <= b[0] <= 0xC6:
            return 1
    except UnicodeEncodeError:
        pass
    return 0


def guess_legacy(sample: bytes) -> tuple[str | None, str | None]:
    """Guess a legacy encoding of ``sample`` (which is not valid UTF-8).

    Returns ``(codec, None)`` for a confident guess, or ``(None, likely_name)`` when no
    accepted set fits well (``likely_name`` is charset_normalizer's unrestricted guess
    or None).
    """
    from charset_normalizer import from_bytes  # imported lazily: ~30 ms

    results = list(from_bytes(sample, cp_isolation=_LEGACY))
    good = [m for m in results if m.chaos <= 0.2]
    if good:
        floor = min(m.chaos for m in good)
        close = [m for m in good if m.chaos <= floor + 0.02]
        scored = []
        for m in close:
            score = _cjk_score(str(m))
            rank = _LEGACY.index(m.encoding) if m.encoding in _LEGACY else len(_LEGACY)
            scored.append((-score, m.chaos, rank, m.encoding))
        scored.sort()
        codec = scored[0][3]
        if codec == "gb18030":
            # Name it GBK when it is plain GBK (most Chinese legacy files).
            try:
                sample.decode("gbk")
                codec = "gbk"
            except UnicodeDecodeError:
                pass
        return codec, None
    loose = from_bytes(sample).best()
    return None, (loose.encoding if loose is not None else None)


def decode(data: bytes) -> Decoded:
    """Decode a whole file's bytes following docs/tools.md's order (BOM, UTF-8, legacy guess).

    Raises:
        ToolError("decode_error"): no accepted encoding fits; the message names the likely one.
    """
    bom = detect_bom(data)
    if bom:
        codec, mark = bom
        body = data[len(mark) :]
        try:
            text = body.decode(codec)
            lossy = False
        except UnicodeDecodeError:
            text, lossy = body.decode(codec, errors="replace"), True
        return Decoded(text, format_of(text, codec, mark), lossy)
    try:
        text = data.decode("utf-8")
        return Decoded(text, format_of(text, "utf-8", b""))
    except UnicodeDecodeError as exc:
        bad_at = exc.start
    legacy, likely = guess_legacy(data[: 256 * 1024])
    if legacy is None:
        hint = (
            f" (it looks most like {likely}, which is not a supported text encoding)"
            if likely
            else ""
        )
        raise ToolError(
            "decode_error",
            f"the file is not valid UTF-8 (invalid byte at offset {bad_at}) and no common "
            f"legacy encoding fits{hint}; inspect it with run_command (e.g. file, iconv)",
        )
    # The guess was made on a sample: a later byte may still not fit.
    codec = legacy
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        codec = "gb18030" if codec == "gbk" else codec
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            text = data.decode(codec, errors="replace")
    return Decoded(text, format_of(text, codec, b""), not _round_trips(text, codec, data))


def _round_trips(text: str, codec: str, data: bytes) -> bool:
    # Editing re-encodes the whole text; bytes outside the edit stay identical only when
    # decode/encode is the identity for this file.
    try:
        return text.encode(codec) == data
    except UnicodeEncodeError:
        return False


def encode(text: str, fmt: TextFormat) -> tuple[bytes, TextFormat]:
    """Encode ``text`` (line endings already as wanted) in ``fmt``'s encoding, BOM first.

    A GBK file that receives characters GBK cannot hold is written as GB18030 (a superset
    with the same bytes for every GBK character). Returns ``(bytes, format actually used)``.

    Raises:
        UnicodeEncodeError: the text has characters the file's encoding cannot represent.
    """
    try:
        return fmt.bom + text.encode(fmt.encoding), fmt
    except UnicodeEncodeError:
        if fmt.encoding != "gbk":
            raise
    wider = TextFormat("gb18030", fmt.bom, fmt.eol, fmt.final_newline, fmt.mixed_eol)
    return wider.bom + text.encode("gb18030"), wider


_VISIBLE = str.maketrans({"\t": "→", " ": "·", "\u00a0": "⍽", "\r": "␍", "\u3000": "□"})


def visible_ws(line: str) -> str:
    """Render whitespace visibly: tab →, space ·, NBSP ⍽, CR ␍, ideographic space □."""
    return line.translate(_VISIBLE)


_CONTROL_NAMES = {
    "\t": "CHARACTER TABULATION",
    "\n": "LINE FEED",
    "\r": "CARRIAGE RETURN",
    "\x00": "NULL",
}


def char_name(ch: str) -> str:
    """Return ``'x' (U+0078 LATIN SMALL LETTER X)`` for messages."""
    name = _CONTROL_NAMES.get(ch) or unicodedata.name(ch, "unnamed character")
    shown = visible_ws(ch) if ch.isspace() else ch
    return f"{shown!r} (U+{ord(ch):04X} {name})"
