"""Reading the user's convention files: AGENTS.md and SKILL.md.

One job: turn a path into its text, or a one-line reason it cannot be used, without
ever blocking or leaving the folder it belongs to. A project file (below the
workspace) must resolve inside the workspace after symbolic links, as every tool path
must (docs/architecture.md §6); the user's own files (``~/.config/agentkit``) may be
links anywhere. Only regular files are opened, without blocking (a FIFO named
``AGENTS.md`` cannot hang a round), at most :data:`MAX_FILE_BYTES`, and they must be
UTF-8 text (a leading byte-order mark is dropped).

The text is the user's: it reaches the model as written. What looks like a secret in
it is not removed (that would change the user's instructions silently): each file is
named once in a warning instead (:func:`warn_secrets`).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

from agentkit.errors import AgentkitError
from agentkit.settings import user_config_dir  # the folder of the user's AGENTS.md and skills

log = logging.getLogger("agentkit")

__all__ = [
    "MAX_FILE_BYTES",
    "ConventionFileError",
    "display",
    "read_text",
    "user_config_dir",
    "warn_once",
    "warn_secrets",
]

MAX_FILE_BYTES = 1024 * 1024
"""Largest AGENTS.md or SKILL.md read, bytes (the text sent is capped far below)."""

_NONBLOCK = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class ConventionFileError(AgentkitError, ValueError):
    """A convention file that cannot be used; the message says why (one line)."""


def display(path: Path, workspace: Path) -> str:
    """Return ``path`` as shown to the model and the user: relative to the workspace
    with forward slashes when inside it (the form read_file takes), else absolute."""
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return path.as_posix()


def read_text(path: Path, *, inside: Path | None = None, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Return the UTF-8 text of the regular file ``path``.

    Args:
        path: the file (absolute).
        inside: the resolved workspace root when ``path`` is a project file: it must
            resolve inside it after symbolic links.
        max_bytes: larger files are refused.

    Raises:
        FileNotFoundError: there is no such file (not a problem: most folders have none).
        ConventionFileError: it is a link out of the workspace, not a regular file,
            larger than ``max_bytes``, unreadable, or not UTF-8.
    """
    flags = os.O_RDONLY | _NONBLOCK
    if inside is not None:
        real = Path(os.path.realpath(path))
        if not (real == inside or real.is_relative_to(inside)):
            raise ConventionFileError(f"it links to {real}, outside the workspace")
        path, flags = real, flags | getattr(os, "O_NOFOLLOW", 0)  # the file checked, not a new link
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and not os.path.exists(path):
            raise FileNotFoundError(str(path)) from None
        raise ConventionFileError(f"it cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConventionFileError("it is not a regular file")
        if info.st_size > max_bytes:
            raise ConventionFileError(f"it is larger than {max_bytes} bytes ({info.st_size})")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ConventionFileError(f"it cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConventionFileError(f"it is not UTF-8 text (byte {exc.start})") from None


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning once per process: files are read again every round,
    and the same problem must not fill the log."""
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    log.warning("agentkit: %s", message)


def _secret_lines(text: str, hidden: Iterable[str | None]) -> list[int]:
    from agentkit.process.secrets import is_secret_value

    keys = [h for h in hidden if h and len(h) >= 8]
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.replace("`", " ").replace('"', " ").replace("'", " ").split()
        if any(k in line for k in keys) or any(is_secret_value(w) for w in words):
            found.append(number)
    return found


def warn_secrets(label: str, text: str, hidden: Iterable[str | None] = ()) -> None:
    """Warn (once per file content) when ``text`` holds what looks like a credential:
    a known key shape, a URL with a password, a long random token
    (agentkit.process.secrets.is_secret_value) or one of the ``hidden`` values (the
    endpoint's key). The text is still sent as written: it is the user's.

    Args:
        label: the file as shown (its path).
        text: its text.
        hidden: values that must never be sent (the API key); shorter than 8
            characters or None are ignored.
    """
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    key = f"secret:{label}:{digest}"
    with _warned_lock:
        if key in _warned:  # this text was looked at already (files are read every round)
            return
        _warned.add(key)
    lines = _secret_lines(text, hidden)
    if not lines:
        return
    shown = ", ".join(str(n) for n in lines[:5]) + (" ..." if len(lines) > 5 else "")
    log.warning(
        "agentkit: %s (line %s) holds what looks like a secret (a key, token or password); "
        "it is sent to the model as written: move the secret out of the file",
        label,
        shown,
    )
