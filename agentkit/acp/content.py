"""An editor's prompt (ACP content blocks) as the user message agentkit sends the model.

One job: :func:`prompt_text`. agentkit's conversations hold text, so each block
becomes text, in order:

* ``text``: as it is;
* ``resource_link`` (a file the user mentioned): ``@path`` (the path relative to the
  workspace when the ``file://`` URI is inside it, else the URI), which the model can
  read with read_file;
* ``resource`` (embedded context, advertised in ``initialize``): the mention, then the
  text in a fenced block whose fence no line inside can close; binary contents
  are named but not included;
* ``image`` and ``audio``: refused (``promptCapabilities`` says so), with a clear error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from agentkit.errors import AgentkitError

__all__ = ["PromptError", "prompt_text"]


class PromptError(AgentkitError, ValueError):
    """A prompt agentkit cannot take (its message says which block and why)."""


def _mention(uri: str, workspace: Path) -> str:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        try:
            return "@" + path.relative_to(workspace).as_posix()
        except ValueError:
            return "@" + str(path)
    return uri


def _fenced(text: str, uri: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    info = " ".join(uri.replace("`", "").split())  # one line, no backtick: an info string
    return f"{fence} {info}\n{text.rstrip()}\n{fence}"


def _block(block: Any, workspace: Path) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind == "resource_link":
        return _mention(str(block.uri), workspace)
    if kind == "resource":
        resource = block.resource
        mention = _mention(str(resource.uri), workspace)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"{mention}\n{_fenced(text, mention.lstrip('@'))}"
        return f"{mention} (binary content, not included)"
    raise PromptError(
        f"{kind} content is not supported: agentkit takes text, resource links and "
        "embedded text resources (see promptCapabilities in initialize)"
    )


def prompt_text(blocks: list[Any], workspace: Path) -> str:
    """The user message for ``blocks`` (the library's content block models).

    Raises:
        PromptError: an image or audio block, or a prompt with no text at all.
    """
    parts = [_block(block, workspace) for block in blocks]
    text = "\n\n".join(p for p in parts if p.strip())
    if not text.strip():
        raise PromptError("the prompt is empty: send at least one text block")
    return text
