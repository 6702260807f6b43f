"""The one language rule: which language a conversation's prompts and templates use.

One job: settle ``Settings.language`` (``auto``, ``zh`` or ``en``) into ``zh`` or
``en`` for one conversation. ``auto`` is settled by the first text the conversation
is given (a user message, or the task of a sub-agent started from code): Chinese
text gives ``zh`` (the specification's templates word for word), anything else
``en``. The settled language is kept in the conversation's file and inherited by
its sub-agents; ``language="zh"``/``"en"`` (``--lang``, ``AGENTKIT_LANGUAGE``)
overrides it.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CHINESE_SHARE",
    "UNSETTLED",
    "Language",
    "LanguageSetting",
    "detect_language",
    "language_meta",
    "shown_language",
    "settle_language",
]

Language = Literal["zh", "en"]
"""A settled language: the prompt folders agentkit ships."""

LanguageSetting = Literal["auto", "zh", "en"]
"""What ``Settings.language`` accepts."""

UNSETTLED: Language = "en"
"""What text needed before a conversation is given any (an ``auto`` one) is written in."""

CHINESE_SHARE = 0.1
"""Share of a text's letters (CJK Unified Ideographs among the letters) over which it
is Chinese: a Chinese sentence with English file names stays Chinese, an English one
quoting a Chinese word stays English."""

_SAMPLE = 4000
"""Characters of a text looked at (the start says what language it is in)."""


def _is_ideograph(char: str) -> bool:
    code = ord(char)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF


def detect_language(text: str) -> Language:
    """Return ``zh`` when more than :data:`CHINESE_SHARE` of the letters in the first
    4000 characters of ``text`` are CJK Unified Ideographs, else ``en`` (also for a
    text without letters)."""
    letters = 0
    ideographs = 0
    for char in text[:_SAMPLE]:
        if _is_ideograph(char):
            ideographs += 1
            letters += 1
        elif char.isalpha():
            letters += 1
    return "zh" if letters and ideographs / letters > CHINESE_SHARE else "en"


def settle_language(setting: str, text: str) -> Language:
    """Return the language of a conversation whose setting is ``setting`` and whose
    first text is ``text``: the setting itself unless it is ``auto``, else
    :func:`detect_language`. Raises ValueError for another setting."""
    if setting == "zh":
        return "zh"
    if setting == "en":
        return "en"
    if setting != "auto":
        raise ValueError(f"unknown language {setting!r}; use auto, zh or en")
    return detect_language(text)


def shown_language(setting: str) -> str:
    """The language in use, as a front end says it: ``language zh``, ``language en``,
    or ``language auto (from the first message)`` before a conversation settled it."""
    if setting == "auto":
        return "language auto (from the first message)"
    return f"language {setting}"


def language_meta(setting: str) -> dict[str, dict[str, str]]:
    """``{"agentkit": {"language": setting}}``: the ``_meta`` an ACP answer carries
    (``auto`` until the conversation's first text settles it)."""
    return {"agentkit": {"language": setting}}
