"""Arguments a tool call gives that the tool's parameters do not name (issue 20 item 9).

pydantic ignores unknown keys, so ``timeout`` sent for ``timeout_seconds`` used to be
dropped without a word and the model never learnt why its command ran with the
default. The registry still accepts such a call, and adds the note built here to
its result: the ignored names, each with the parameter it was probably meant as.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel

#: difflib's similarity a suggestion needs (``sumary`` → ``summary`` is 0.92).
_CUTOFF = 0.6


def ignored_arguments(params: type[BaseModel], arguments: dict[str, Any] | None) -> list[str]:
    """The keys of ``arguments`` that ``params`` ignores, in their order: neither a
    field name nor an alias. A model that allows or forbids extra keys ignores none
    (MCP tools pass them on; a forbidding model refuses the call)."""
    if not arguments or params.model_config.get("extra") in ("allow", "forbid"):
        return []
    known = set(params.model_fields)
    for info in params.model_fields.values():
        known.update(a for a in (info.alias, info.validation_alias) if isinstance(a, str))
    return [key for key in arguments if key not in known]


def ignored_note(tool: str, params: type[BaseModel], ignored: list[str], language: str) -> str:
    """The one-line note on ``ignored`` arguments of a ``tool`` call, in ``language``
    (``prompts/<language>/phrases.txt``: ``ignored_arguments``, ``did_you_mean``)."""
    from agentkit.prompts import phrase

    fields = sorted(params.model_fields)
    items = []
    for key in ignored:
        close = closest_parameter(key, fields)
        items.append(phrase(language, "did_you_mean", name=key, suggestion=close) if close else key)
    separator = "、" if language == "zh" else ", "
    return phrase(language, "ignored_arguments", tool=tool, arguments=separator.join(items))


def closest_parameter(key: str, fields: list[str]) -> str | None:
    """The parameter ``key`` was probably meant as, or None: the shortest one that
    ``key`` abbreviates (its letters in order, same first letter: ``cmd`` →
    ``command``, ``timeout`` → ``timeout_seconds``), else one containing it or
    contained in it (``file_path`` → ``path``), else the most similar (difflib)."""
    low = key.lower()
    if len(low) >= 3:
        short = [f for f in fields if f[:1].lower() == low[0] and _abbreviates(low, f.lower())]
        if short:
            return min(short, key=len)
        for name in fields:
            if low in name.lower() or name.lower() in low:
                return name
    found = difflib.get_close_matches(key, fields, n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def _abbreviates(short: str, name: str) -> bool:
    letters = iter(name)
    return all(letter in letters for letter in short)
