"""Shared set-up for the confined-writes tests (unit and servers): a folder outside the
workspace that holds a file the model must not reach, and a folder's listing.

Import ``outside_fixture`` into a test module to use the ``outside`` fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(name="outside")
def outside_fixture(tmp_path: Path) -> Path:
    """A folder beside the workspace holding secret.txt."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("not the model's\n")
    return folder


def tree(folder: Path) -> list[str]:
    """Every path below ``folder``, relative to it, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
