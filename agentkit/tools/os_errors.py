"""The tool error kind of an operating-system error: one errno table for every tool.

One job: :func:`os_error_kind` maps an OSError to a stable kind (``disk_full``,
``permission_denied``...) that tools put in ``Error: <kind>: ...`` results and that
the sub-agent record uses (docs/tools.md §12 lists the kinds).
"""

from __future__ import annotations

import errno

__all__ = ["describe_os_error", "os_error_kind"]

# One table for every tool and record write: a full disk must read as disk_full,
# not as a bad argument.
_ERRNO_KINDS: dict[int, str] = {
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.EFBIG: "too_large",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "read_only_filesystem",
    errno.ENOENT: "not_found",
    errno.ENOTDIR: "invalid_argument",
    errno.EISDIR: "is_directory",
    errno.EEXIST: "already_exists",
    errno.ENAMETOOLONG: "invalid_argument",
    errno.EINVAL: "invalid_argument",
    errno.ELOOP: "invalid_argument",
    errno.EMFILE: "resource_exhausted",
    errno.ENFILE: "resource_exhausted",
    errno.ENOMEM: "resource_exhausted",
    errno.EIO: "io_error",
    errno.E2BIG: "too_large",
}


def os_error_kind(exc: OSError) -> str:
    """Return the tool error kind for an OSError, by its errno class.

    ``disk_full`` (ENOSPC, EDQUOT), ``permission_denied`` (EACCES, EPERM),
    ``read_only_filesystem`` (EROFS), ``not_found`` (ENOENT),
    ``is_directory``, ``already_exists``, ``too_large`` (EFBIG, E2BIG),
    ``resource_exhausted`` (EMFILE, ENFILE, ENOMEM), ``io_error`` (EIO),
    ``invalid_argument`` (EINVAL, ENOTDIR, ENAMETOOLONG, ELOOP); any other errno gives
    ``os_error``.
    """
    kind = _ERRNO_KINDS.get(exc.errno) if exc.errno is not None else None
    if kind is None and isinstance(exc, PermissionError):
        kind = "permission_denied"
    if kind is None and isinstance(exc, FileNotFoundError):
        kind = "not_found"
    return kind or "os_error"


def describe_os_error(exc: OSError) -> str:
    """Return ``"<kind>: <strerror>"`` for an OSError (the kind from os_error_kind),
    e.g. ``"disk_full: No space left on device"``."""
    return f"{os_error_kind(exc)}: {exc.strerror or exc}"
