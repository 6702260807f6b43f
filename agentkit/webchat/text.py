"""Text that can always go out as UTF-8: the web chat's JSON responses and events.

One job: replace lone surrogates (code points U+D800-U+DFFF, which no UTF-8 text
can hold: they come from a JSON ``"\\ud800"`` escape) so that one damaged title or
message never turns a response into a 500.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSON

from agentkit.jsonfile import SURROGATE

__all__ = ["JSONResponse", "clean_text"]


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (a code point U+D800-U+DFFF, which no UTF-8
    text can hold) replaced by U+FFFD. A Python str never holds a valid pair as
    surrogates, so every one found is lone."""
    return SURROGATE.sub("\ufffd", text)


class JSONResponse(_StarletteJSON):
    """A JSON response that never fails on text read from disk: lone surrogates (a
    damaged title or message saved by an older version, or written by hand) are
    sent as U+FFFD instead of raising UnicodeEncodeError (a 500 for ever)."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return clean_text(text).encode("utf-8")
