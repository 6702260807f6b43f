"""Token counting for context budgeting: tiktoken when its tables load, else an estimate.

tiktoken downloads its BPE tables on first use (and caches them in
``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or ``<tmp>/data-gym-cache``). On a
machine without network that download fails, and behind a black-holing firewall
it could hang (tiktoken calls ``requests.get`` without a timeout). So the tables are
loaded once, lazily, in a helper thread given :data:`LOAD_TIMEOUT` seconds; on any
failure or timeout this module falls back for the rest of the process to
:func:`estimate_text`:

* ASCII and other non-CJK text: about one token per 4 UTF-8 bytes (so ~4 English
  characters, ~2 Cyrillic or Greek characters per token), rounded up;
* CJK ideographs, kana, hangul and full-width forms: one token per character.

The estimate is deliberately a little high for English prose, which is safe for
budgeting. Set ``AGENTKIT_TOKENIZER=estimate`` to skip tiktoken altogether, and
``AGENTKIT_TIKTOKEN_TIMEOUT`` (seconds) to change the load timeout.

A failed load is tried once per machine, not once per process: it is remembered in
:data:`FAILURE_FILE` in tiktoken's cache folder for :data:`RETRY_SECONDS`, and
processes started meanwhile use the estimate at once (a sub-agent would otherwise
lose 0.1-1 s offline, up to the timeout when the network hangs). A table put into
the cache folder, or ``AGENTKIT_TOKENIZER=tiktoken``, makes the next process try
again. :func:`describe` says which counting is in use, and why; it is logged once at
debug level.
Nothing here raises: counting never fails a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

#: Seconds to wait for tiktoken to load (or download) its tables before falling back
#: (environment: AGENTKIT_TIKTOKEN_TIMEOUT).
LOAD_TIMEOUT = 5.0
#: Encodings tried in order: o200k_base (gpt-4o and later), then cl100k_base (gpt-4, 3.5).
ENCODINGS = ("o200k_base", "cl100k_base")
#: The file, in tiktoken's cache folder, that remembers a failed load for the machine.
FAILURE_FILE = "agentkit-tiktoken-unavailable"
#: Seconds a remembered failure holds; then a process tries to load the tables again.
RETRY_SECONDS = 24 * 3600.0
# The tables of ENCODINGS as tiktoken caches them (a file named by the SHA-1 of the URL,
# tiktoken_ext.openai_public): one present means the remembered failure is out of date.
_TABLE_URLS = tuple(
    f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken" for name in ENCODINGS
)

# OpenAI's chat format costs (openai-cookbook "How to count tokens with tiktoken"):
# 3 tokens per message, 1 more when it has a name, 3 to prime the reply.
_PER_MESSAGE = 3
_PER_NAME = 1
_REPLY_PRIMING = 3
_PER_TOOL_CALL = 4  # id, type and the wrapper around name/arguments (approximate)
_IMAGE_TOKENS = 765  # a high-detail 512 px image (85 base + 4 tiles x 170)

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002fa1f]"
)

_lock = threading.Lock()
_encode: Callable[[str], int] | None = None
_backend: str | None = None
_why = ""  # why the estimate is used
# Counts of long strings, keyed by the string itself: str caches its hash, so a
# transcript re-counted before every request costs one dict lookup per message.
_cache: dict[str, int] = {}
_CACHE_MIN_CHARS = 64
_CACHE_MAX_ENTRIES = 20_000
_CACHE_MAX_CHARS = 16_000_000  # the strings it keeps alive: at most ~16 M characters
_cache_chars = 0
# Per-message counts keyed by id(message), holding the message (so the id cannot be
# reused) and the identity of its content and tool_calls (so a replaced one is recounted).
# Bounded (cleared when full) because it keeps those messages alive.
_message_cache: dict[int, tuple[dict[str, Any], Any, Any, int]] = {}
_MESSAGE_CACHE_MAX = 4096
_message_cache_chars = 0


def estimate_text(text: str) -> int:
    """Return the fallback estimate of ``text``'s tokens (see the module docstring)."""
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    rest = _CJK.sub("", text)
    cjk = len(text) - len(rest)
    return cjk + (len(rest.encode("utf-8", "replace")) + 3) // 4


def _cache_folder() -> str:
    """tiktoken's cache folder, chosen as tiktoken.load.read_file_cached does ("" when
    its caching is off)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            return os.environ[name]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _remembered_failure() -> str | None:
    """The reason of a failed load this machine remembers and that still holds, else
    None. The file may be anyone's (``/tmp``): read without following a link or
    blocking on a FIFO, at most 1 KB."""
    folder = _cache_folder()
    if not folder:
        return None
    if any(os.path.exists(os.path.join(folder, _table_name(url))) for url in _TABLE_URLS):
        return None
    try:
        fd = os.open(
            os.path.join(folder, FAILURE_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        )
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not 0 <= time.time() - info.st_mtime < RETRY_SECONDS:
            return None
        text = os.read(fd, 1024).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return " ".join(text.split()) or "unknown"


def _table_name(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()  # noqa: S324 (tiktoken's file name)


def _remember_failure(reason: str) -> None:
    """Write the failure file (atomically); a folder that cannot take it is left alone."""
    folder = _cache_folder()
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{FAILURE_FILE}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(reason[:500] + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(folder, FAILURE_FILE))
    except OSError:
        pass


def _load_tiktoken() -> tuple[Callable[[str], int], str] | str:
    """Load the first available tiktoken encoding in a helper thread, bounded in time.
    Returns ``(counter, backend)``, or the reason the estimate is used."""
    choice = os.environ.get("AGENTKIT_TOKENIZER", "").lower()
    if choice == "estimate":
        return "AGENTKIT_TOKENIZER=estimate"
    remembered = _remembered_failure() if choice != "tiktoken" else None
    if remembered is not None:
        where = os.path.join(_cache_folder(), FAILURE_FILE)
        return (
            f"tiktoken's tables did not load on this machine: {remembered}; remembered in {where}"
        )
    result: list[tuple[Callable[[str], int], str]] = []
    errors: list[str] = []

    def load() -> None:
        try:
            import tiktoken
        except Exception as exc:
            errors.append(_one_line(f"tiktoken is not importable: {exc}"))
            return
        for name in ENCODINGS:
            try:
                enc = tiktoken.get_encoding(name)
            except Exception as exc:
                errors.append(_one_line(f"{type(exc).__name__}: {exc}"))
                continue
            result.append((_counter(enc.encode_ordinary), f"tiktoken:{name}"))
            return

    # A daemon thread: a hung download must not keep the process alive.
    worker = threading.Thread(target=load, name="agentkit-tiktoken-load", daemon=True)
    worker.start()
    try:
        timeout = float(os.environ.get("AGENTKIT_TIKTOKEN_TIMEOUT", LOAD_TIMEOUT))
    except ValueError:
        timeout = LOAD_TIMEOUT
    worker.join(timeout)
    if result:
        return result[0]
    reason = errors[0] if errors else f"loading took over {timeout:g} s"
    if not reason.startswith("tiktoken is not importable"):
        _remember_failure(reason)  # a machine without network: the next process knows
    return f"tiktoken's tables did not load: {reason}"


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _counter(encode: Callable[[str], list[int]]) -> Callable[[str], int]:
    return lambda text: len(encode(text))


def _encoder() -> Callable[[str], int]:
    global _encode, _backend, _why
    if _encode is None:
        with _lock:
            if _encode is None:
                loaded = _load_tiktoken()
                if isinstance(loaded, str):
                    _encode, _backend, _why = estimate_text, "estimate", loaded
                else:
                    _encode, _backend = loaded
                logging.getLogger("agentkit").debug("token counting: %s", describe())
    return _encode


def backend() -> str:
    """Return what counts tokens: ``"tiktoken:<encoding>"`` or ``"estimate"`` (loads once)."""
    _encoder()
    return _backend or "estimate"


def describe() -> str:
    """Return one line saying which counting is in use and, for the estimate, why
    (``"estimate (AGENTKIT_TOKENIZER=estimate)"``, ``"tiktoken:o200k_base"``...)."""
    name = backend()
    return f"{name} ({_why})" if name == "estimate" and _why else name


def offline_state() -> str:
    """What counting a new process would use, worked out without loading or
    downloading anything (``agentkit doctor``): one line, starting ``tiktoken`` (its
    tables are in the cache folder, or a download is still to be tried) or
    ``estimate`` (why)."""
    import importlib.util

    if os.environ.get("AGENTKIT_TOKENIZER", "").lower() == "estimate":
        return "estimate (AGENTKIT_TOKENIZER=estimate)"
    if importlib.util.find_spec("tiktoken") is None:
        return "estimate (tiktoken is not installed)"
    folder = _cache_folder()
    for url, name in zip(_TABLE_URLS, ENCODINGS, strict=True):
        if folder and os.path.isfile(os.path.join(folder, _table_name(url))):
            return f"tiktoken:{name} (its table is cached in {folder}: works offline)"
    remembered = _remembered_failure()
    if remembered is not None:
        return (
            "estimate (an earlier run could not download tiktoken's tables, and the "
            f"failure is remembered: {remembered}; nothing is tried now)"
        )
    return (
        "tiktoken, once its tables download (from openaipublic.blob.core.windows.net, "
        f"into {folder or 'no cache folder'}); the estimate if they cannot"
    )


def clear_cache() -> None:
    """Forget cached counts (and the messages they keep alive)."""
    global _cache_chars, _message_cache_chars
    _cache.clear()
    _cache_chars = 0
    _message_cache.clear()
    _message_cache_chars = 0


def count_text(text: str) -> int:
    """Return the number of tokens of ``text`` (tiktoken, else the documented estimate).

    Args:
        text: any string; an empty string counts 0.

    Returns:
        Tokens (int >= 0). Never raises.
    """
    if not text:
        return 0
    if len(text) < _CACHE_MIN_CHARS:
        return _count_uncached(text)
    global _cache_chars
    cached = _cache.get(text)
    if cached is None:
        cached = _count_uncached(text)
        if len(_cache) >= _CACHE_MAX_ENTRIES or _cache_chars > _CACHE_MAX_CHARS:
            _cache.clear()  # crude but bounded; recounting is cheap compared with a leak
            _cache_chars = 0
        _cache[text] = cached
        _cache_chars += len(text)
    return cached


def _count_uncached(text: str) -> int:
    try:
        return _encoder()(text)
    except Exception:  # e.g. a lone surrogate that tiktoken refuses
        return estimate_text(text)


def _count_content(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content)
    if isinstance(content, list):  # content parts: text, image_url, input_audio...
        total = 0
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    total += count_text(part["text"])
                elif part.get("type") in ("image_url", "image"):
                    total += _IMAGE_TOKENS
                else:
                    total += count_text(json.dumps(part, ensure_ascii=False))
            elif isinstance(part, str):
                total += count_text(part)
        return total
    return count_text(str(content))


def count_message(message: dict[str, Any]) -> int:
    """Return the tokens of one chat message, with OpenAI's per-message overhead (3 tokens,
    +1 with a ``name``) but without the reply priming that :func:`count_messages` adds."""
    total = _PER_MESSAGE + _count_content(message.get("content"))
    name = message.get("name")
    if isinstance(name, str) and name:
        total += _PER_NAME + count_text(name)
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        total += count_text(reasoning)
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            total += _PER_TOOL_CALL + count_text(str(function.get("name") or ""))
            args = function.get("arguments")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            total += count_text(args)
    call_id = message.get("tool_call_id")
    if isinstance(call_id, str):
        total += count_text(call_id)
    return total


def _remember(message: dict[str, Any], content: Any, calls: Any, count: int) -> None:
    global _message_cache_chars
    size = len(content) if isinstance(content, str) else 1000
    if len(_message_cache) >= _MESSAGE_CACHE_MAX or _message_cache_chars > _CACHE_MAX_CHARS:
        _message_cache.clear()
        _message_cache_chars = 0
    _message_cache[id(message)] = (message, content, calls, count)
    _message_cache_chars += size


def count_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> int:
    """Return the prompt tokens of a Chat Completions request (messages plus tool schemas).

    Follows OpenAI's counting rules (3 tokens per message, +1 per name, +3 to prime the
    reply); tool schemas are counted as their compact JSON, which slightly overestimates
    OpenAI's internal rendering. Uses tiktoken, or the estimate described in the module
    docstring when its tables are unavailable. Fast on long transcripts: a
    :class:`~agentkit.llm.wire.WireMessage` (what the engine sends) is counted once
    for its life; another message's count is cached until its ``content`` or
    ``tool_calls`` object is replaced (edit a message in place by assigning a new
    value, as the engine does), and counts of long strings are cached by value.

    Args:
        messages: OpenAI-shape message dicts (content may be a string, None or parts).
        tools: the ``tools`` list sent with the request, or None.

    Returns:
        Tokens (int). Never raises.
    """
    total = _REPLY_PRIMING
    cache = _message_cache
    for message in messages:
        if not isinstance(message, dict):
            continue
        # A WireMessage (agentkit.llm.wire) keeps its count: counted once for its life.
        # By attribute, not by class: llm.wire imports this module.
        known = getattr(message, "tokens", None)
        if known is not None:
            total += known
            continue
        content, calls = message.get("content"), message.get("tool_calls")
        entry = cache.get(id(message))
        if entry is not None and entry[0] is message and entry[1] is content and entry[2] is calls:
            total += entry[3]
            continue
        count = count_message(message)
        _remember(message, content, calls, count)
        total += count
    if tools:
        total += count_text(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
    return total
