"""agentkit.cli.demo_copies: the demo's copies are marked, and only marked copies of
this user unused for a day are swept; nothing else in the temp folder is touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentkit.cli.demo_copies import MARKER, farewell, make_copy, sweep_old_copies

DAY = 24 * 3600


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_a_copy_is_marked_and_said(tmp_path: Path) -> None:
    project = make_copy(tmp_path)
    assert project.name == "inventory-project" and (project / "README.md").is_file()
    assert (project.parent / MARKER).is_file()
    said = farewell(project)
    assert str(project) in said and f"rm -rf {project.parent}" in said


def test_only_old_marked_copies_go(tmp_path: Path) -> None:
    old = make_copy(tmp_path).parent
    _age(old / MARKER, 2 * DAY)
    fresh = make_copy(tmp_path).parent  # its start swept the old one
    assert not old.exists() and fresh.is_dir()

    unmarked = tmp_path / "agentkit-demo-unmarked"  # ours by name only: stays
    unmarked.mkdir()
    other = tmp_path / "someone-else"  # a marker, another name: stays
    other.mkdir()
    (other / MARKER).write_text("x")
    linked = tmp_path / "agentkit-demo-linked"  # a marker that is a link: stays
    linked.mkdir()
    (linked / MARKER).symlink_to(fresh / MARKER)
    used = make_copy(tmp_path).parent  # an old marker, a conversation saved today: stays
    _age(used / MARKER, 2 * DAY)
    saved = used / "inventory-project" / ".agentkit" / "conversations"
    saved.mkdir(parents=True)
    (saved / "conv_x.json").write_text("{}")
    for path in (unmarked, other / MARKER, other, linked):
        _age(path, 3 * DAY)
    assert sweep_old_copies(tmp_path) == []
    assert all(p.exists() for p in (unmarked, other, linked, used, fresh))
    _age(fresh / MARKER, 2 * DAY)
    assert sweep_old_copies(tmp_path, now=time.time()) == [fresh]
