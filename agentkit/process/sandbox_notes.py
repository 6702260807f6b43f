"""The sandbox in words: the notes run_command adds when a sandboxed command's output
shows the sandbox refusing a write or a network call (:mod:`agentkit.process.sandbox`),
in words the model can act on; and what a person is told at start when bubblewrap
cannot run (:func:`missing_note`), with how to install it.

Public API: :func:`refusal_notes` (also exported by :mod:`agentkit.process.sandbox`),
:func:`missing_note`, :data:`INSTALL_HINT`, :data:`INSTALL_SHORT`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkit.process.sandbox import Confinement

__all__ = ["INSTALL_HINT", "INSTALL_SHORT", "missing_note", "refusal_notes"]

INSTALL_HINT = (
    "Install bubblewrap: sudo apt-get install bubblewrap (Debian, Ubuntu), sudo dnf "
    "install bubblewrap (Fedora, RHEL), sudo pacman -S bubblewrap (Arch), sudo zypper "
    "install bubblewrap (openSUSE); elsewhere on Linux your distribution's bubblewrap "
    "package. It also needs unprivileged user namespaces (or agentkit run as root); "
    "macOS and Windows have no bubblewrap."
)
"""How to get bubblewrap, for the notices that say it is missing."""
INSTALL_SHORT = (
    "install bubblewrap: sudo apt-get install bubblewrap on Debian and Ubuntu, your "
    "distribution's bubblewrap package elsewhere on Linux"
)
"""The same in a clause, where space is short (ACP's mode descriptions)."""


def missing_note(program: str, required: bool) -> str:
    """What a person is told at start when bubblewrap (``program``, the
    ``command_bwrap_path`` setting) cannot run here: commands run unconfined
    (``required`` False: ``command_sandbox = auto``), or are refused (``required``:
    ``command_sandbox = bwrap`` or the read-only mode); with :data:`INSTALL_HINT`."""
    if required:
        return (
            f"The command sandbox is required but bubblewrap ({program}) is missing or "
            "cannot create namespaces here: every command will be refused. " + INSTALL_HINT
        )
    return (
        f"The command sandbox is off: bubblewrap ({program}) is missing or cannot create "
        "namespaces here, so commands run with your full rights (they can change any "
        "of your files and reach the network). " + INSTALL_HINT + " To run commands "
        "unconfined on purpose and drop this notice, set command_sandbox = none."
    )


_WRITE_REFUSED = re.compile(r"Read-only file system|\bEROFS\b|\bEACCES\b")
_NET_REFUSED = re.compile(
    r"Network is unreachable|\bENETUNREACH\b|Temporary failure in name resolution"
    r"|Name or service not known|Could not resolve host|No address associated with hostname"
    r"|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|Failed to resolve|Connection refused"
)


def refusal_notes(output: str, confinement: Confinement | None) -> list[str]:
    """Return short notes for the tool result when ``output`` shows the sandbox refusing
    a write or a network call (by the usual error texts), in words the model can act on;
    [] when unconfined or nothing matched."""
    if confinement is None:
        return []
    notes: list[str] = []
    if _WRITE_REFUSED.search(output):
        if confinement.mode == "read-only":
            notes.append(
                "sandbox: writes are refused (read-only mode: commands cannot change files; "
                "/tmp and HOME are private and emptied when the command ends)"
            )
        else:
            notes.append(
                f"sandbox: a write was refused: commands may write {confinement.writable} "
                "(and /tmp and HOME, private scratch emptied afterwards); everything else "
                "is read-only. Write there instead, or ask the user to allow the folder "
                "(command_writable_paths)"
            )
    if confinement.network == "none" and _NET_REFUSED.search(output):
        notes.append(
            "sandbox: commands have no network (command_network = none): the internet "
            "and the host's services, even on 127.0.0.1, are unreachable; only the "
            "command's own loopback works. Use web_search / extract_webpage for the web, "
            "or ask the user to set command_network = loopback (the host's local "
            "services) or all"
        )
    elif confinement.network == "loopback" and _NET_REFUSED.search(output):
        notes.append(
            "sandbox: commands reach only the host's loopback (command_network = "
            "loopback): TCP services on 127.0.0.1 that were listening when the command "
            "started (not one started later), and the command's own servers; other "
            "hosts, the internet and DNS are unreachable. "
            "Use web_search / extract_webpage for the web, or ask the user to set "
            "command_network = all"
        )
    return notes
