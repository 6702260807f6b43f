"""Atomic JSON files: a reader never sees a half-written file, even after a kill."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any, *, fsync: bool = False) -> None:
    """Write ``data`` as UTF-8 JSON to ``path`` through a temp file and ``os.replace``.

    The rename is atomic on POSIX and Windows, so ``path`` always holds either the
    old or the new complete document. ``fsync=True`` also survives power loss at
    the cost of a disk flush (milliseconds). Parent folders are created.
    Raises OSError when the folder is not writable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, indent=1, default=str)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: Path) -> Any:
    """Return the parsed JSON document at ``path``.

    Raises FileNotFoundError, or ValueError (json.JSONDecodeError) for bad JSON.
    """
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
