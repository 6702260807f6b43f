"""Which tool calls of one model message may run at the same time.

One job: the order rule of a batch. The engine runs the tool calls of one message
at once (``Settings.tool_workers``), but calls naming the same file must not race:
a model that writes ``r.txt``, then reads it, then edits it in one message means
that order, and a trial saw the read find no file and the edit miss it. So calls
are put in *lanes*: every call naming a ``path`` joins the lane of the calls
before it naming the same path (after ``..`` and ``./`` are folded, relative to
the workspace), and runs after them, in the order given; every other call has a
lane of its own. Lanes run at the same time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["lanes"]


def _path_key(arguments: Any, workspace: Path) -> str | None:
    if not isinstance(arguments, dict):
        return None
    path = arguments.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    path = os.path.expanduser(path.strip())
    joined = path if os.path.isabs(path) else os.path.join(workspace, path)
    # Case and links are not folded: two spellings of one file may still run at once.
    return os.path.normpath(joined)


def lanes(arguments: Sequence[Any], workspace: Path) -> list[list[int]]:
    """Group the calls whose ``arguments`` (dicts, or anything for calls without
    usable arguments) are given in message order into lanes of indexes, each in
    order; lanes in the order of their first call. Calls naming the same ``path``
    share a lane; the others have one each."""
    result: list[list[int]] = []
    by_path: dict[str, list[int]] = {}
    for index, args in enumerate(arguments):
        key = _path_key(args, workspace)
        if key is None:
            result.append([index])
        elif key in by_path:
            by_path[key].append(index)
        else:
            by_path[key] = [index]
            result.append(by_path[key])
    return result
