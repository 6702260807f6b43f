"""Deliverables folders claimed across processes (issue 20 item 14): two processes on one
workspace started together never both run a sub-agent in one folder (nor in folders
nested in each other); the second is refused in the seed's JSON naming the owner."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_a_folder_that_takes_no_owner_file_is_still_held(workspace: Path) -> None:
    """The owner file only names the holder: when it cannot be written (here a
    folder stands in its place, as a read-only or full disk would refuse it) the
    claim still holds the folder, unnamed, rather than failing open."""
    from agentkit.subagent.folder_lock import FolderBusy, FolderOwner, hold_folder

    (workspace / "out/b/.subagent/owner.json").mkdir(parents=True)
    (workspace / "out/b/.subagent/owner.json/keep").write_text("x")
    hold = hold_folder(workspace, workspace / "out/b", FolderOwner.here("conv_a", 1))
    try:
        with pytest.raises(FolderBusy) as busy:
            hold_folder(workspace, workspace / "out/b", FolderOwner.here("conv_b", 2))
        assert busy.value.owner is None and not busy.value.nested
    finally:
        hold.release()
    hold_folder(workspace, workspace / "out/b", FolderOwner.here("conv_b", 2)).release()
