"""A deliverables folder that another conversation's sub-agent used before.

One job: :func:`set_aside_earlier`. Sub-agent ids count from 1 in every
conversation, and the default deliverables folder is ``sub_agent_results/
agent_<id>`` (docs/specification.md §6), so a later conversation's sub-agent 1
starts in the folder an earlier conversation's sub-agent 1 finished in. Its record
is archived beside the new one (agentkit.subagent.record_folder.archive_record); its files
are moved here, into ``.subagent/earlier/<its sub_conversation_id>/``, so the new
sub-agent neither overwrites them nor mistakes them for its own (a new user's
trial: a second conversation's ``findings.md`` replaced the first's). A folder
reused within one conversation (an explicit ``deliverables_dir`` naming an earlier
agent's folder, a continued run) keeps its files: the model asked for them there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container
from pathlib import Path

from agentkit.confined import folder as confined_folder
from agentkit.subagent.record import RECORD_DIR, read_record

__all__ = ["EARLIER_DIR", "earlier_folder", "set_aside_earlier"]

EARLIER_DIR = "earlier"
"""Under the folder's ``.subagent``: one folder per earlier conversation's run."""
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def earlier_folder(deliverables: Path, sub_conversation_id: str) -> Path:
    """The folder :func:`set_aside_earlier` moves the files of the run
    ``sub_conversation_id`` to: ``<deliverables>/.subagent/earlier/<id>`` (characters
    outside ``[A-Za-z0-9_.-]`` become ``_``). Pure: it neither reads nor makes it."""
    return deliverables / RECORD_DIR / EARLIER_DIR / _SAFE.sub("_", sub_conversation_id)


def set_aside_earlier(deliverables: Path, root: Path, own: Container[str]) -> Path | None:
    """Move the files of an earlier sub-agent of another conversation out of
    ``deliverables`` (absolute, inside the workspace ``root``; no link below it is
    followed), before a new sub-agent starts there.

    Args:
        own: the ``sub_conversation_id`` values of this conversation's sub-agents:
            a record naming one of them is this conversation's, and stays as it is.

    Returns:
        The folder the files went to, or None (no earlier record, this
        conversation's, or nothing but the record folder).

    Raises:
        OSError: the folder or its record folder is a link, or a move failed
            (what was moved stays moved; nothing is deleted).
    """
    earlier = read_record(deliverables)
    if not earlier:
        return None
    name = str(earlier.get("sub_conversation_id") or "")
    if not name or name in own:
        return None
    with confined_folder(root, deliverables) as source:
        entries = [e for e in os.listdir(source) if e != RECORD_DIR]
        if not entries:
            return None
        target = earlier_folder(deliverables, name)
        with confined_folder(root, target, create=True) as dest:
            for entry in entries:
                os.rename(entry, entry, src_dir_fd=source, dst_dir_fd=dest)
    return target
