"""Sub-agent records under hostile endings (hardening issue items 10, 6, 9, 2):
a final record stays final after the main process exits, a full disk gives a
clear failure and keeps the transcript, finished sub-agents hold no file
descriptors, and records a killed process group left running are swept."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agentkit.tools.os_errors import os_error_kind

pytestmark = pytest.mark.slow


def test_a_final_record_refuses_to_be_replaced(tmp_path: Path) -> None:
    from agentkit.subagent.record import read_record, write_record

    folder = tmp_path / "d"
    done = {"sub_conversation_id": "s1", "status": "completed", "messages": []}
    assert write_record(folder, done, root=tmp_path) is True
    for status in ("terminated", "running", "failed"):
        assert write_record(folder, {**done, "status": status}, root=tmp_path) is False
    assert read_record(folder) == done
    # Another sub-conversation in the folder (a new agent) may replace it.
    assert write_record(
        folder, {**done, "sub_conversation_id": "s2", "status": "running"}, root=tmp_path
    )


# ------------------------------------------------------------------- item 6
def test_errno_classes_map_to_one_kind_each() -> None:
    def kind(code: int) -> str:
        return os_error_kind(OSError(code, os.strerror(code)))

    assert kind(errno.ENOSPC) == kind(errno.EDQUOT) == "disk_full"
    assert kind(errno.EACCES) == kind(errno.EPERM) == "permission_denied"
    assert kind(errno.EROFS) == "read_only_filesystem"
    assert kind(errno.ENOENT) == "not_found"
    assert os_error_kind(PermissionError("no")) == "permission_denied"
