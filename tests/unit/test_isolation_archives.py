"""A deliverables folder carried between machines (agentkit.isolation.archives) and the
pure parts of agentkit.isolation.bundles: archives round-trip, an unsafe archive (a name
with ``..``, an absolute name, a link leading out, a member below a link, a hard link, a
device) writes nothing, the size caps refuse with a clear error, a link in the
destination is never followed. The git round trip is
tests/integration/test_isolation_bundles.py.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from agentkit.isolation import archives, bundles
from agentkit.isolation.archives import pack_folder, unpack_folder
from agentkit.isolation.bundles import parse_result, unpack
from agentkit.isolation.types import Copy, IsolationError


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if info.isfile():
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_a_folder_round_trips_with_modes_and_an_inner_link(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / ".subagent").mkdir(parents=True)
    (src / ".subagent" / "conversations.json").write_text('{"a": 1}')
    (src / "report.md").write_text("# report\n")
    (src / "run.sh").write_text("echo hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "latest.md").symlink_to("report.md")
    (src / "out").symlink_to("/etc")  # leads outside: not carried
    (src / ".report.md.0123abcd.tmp").write_text("half")  # a write caught half done
    dest = tmp_path / "dest"
    written = unpack_folder(pack_folder(src), dest)
    assert sorted(written) == [".subagent/conversations.json", "latest.md", "report.md", "run.sh"]
    assert (dest / "report.md").read_text() == "# report\n"
    assert (dest / ".subagent" / "conversations.json").read_text() == '{"a": 1}'
    assert os.readlink(dest / "latest.md") == "report.md"
    assert os.stat(dest / "run.sh").st_mode & 0o777 == 0o755
    assert os.stat(dest / "report.md").st_mode & 0o777 == 0o644
    assert not (dest / "out").exists() and not (dest / "out").is_symlink()


def test_unpacking_replaces_files_and_deletes_none(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    (src / "a.txt").write_text("new")
    (dest / "a.txt").write_text("old")
    (dest / "kept.txt").write_text("mine")
    unpack_folder(pack_folder(src), dest)
    assert (dest / "a.txt").read_text() == "new"
    assert (dest / "kept.txt").read_text() == "mine"


def test_a_missing_folder_packs_as_an_empty_archive(tmp_path: Path) -> None:
    assert unpack_folder(pack_folder(tmp_path / "nothing"), tmp_path / "d") == []


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (member("../escape.txt"), "not a safe relative path"),
        (member("a/../../escape.txt"), "not a safe relative path"),
        (member("/tmp/absolute.txt"), "not a safe relative path"),
        (member("up", tarfile.SYMTYPE, "../outside"), "leads outside"),
        (member("deep/up", tarfile.SYMTYPE, "../../outside"), "leads outside"),
        (member("abs", tarfile.SYMTYPE, "/etc/passwd"), "leads outside"),
        (member("hard", tarfile.LNKTYPE, "good.txt"), "hard links"),
        (member("dev", tarfile.CHRTYPE), "devices"),
        (member("fifo", tarfile.FIFOTYPE), "pipes"),
    ],
)
def test_an_unsafe_member_refuses_the_whole_archive(
    tmp_path: Path, bad: tarfile.TarInfo, words: str
) -> None:
    data = archive((member("good.txt"), b"fine"), (bad, b"bad"))
    dest = tmp_path / "dest"
    with pytest.raises(IsolationError, match=words):
        unpack_folder(data, dest)
    assert not dest.exists()  # checked before anything was written
    assert not (tmp_path / "escape.txt").exists()


def test_a_member_below_a_link_is_refused(tmp_path: Path) -> None:
    data = archive(
        (member("sub", tarfile.DIRTYPE), b""),
        (member("link", tarfile.SYMTYPE, "sub"), b""),
        (member("link/x.txt"), b"through the link"),
    )
    with pytest.raises(IsolationError, match="below a link"):
        unpack_folder(data, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_a_link_chain_leading_out_refuses_the_whole_archive(tmp_path: Path) -> None:
    """``q -> .`` then ``pw -> q/q/../../x``: the text stays inside, the kernel climbs
    out through ``q`` (review: a Ray node's deliverables reached /etc/passwd)."""
    chain = "q/" * 12 + "../" * 12 + "etc/passwd"
    data = archive(
        (member("q", tarfile.SYMTYPE, "."), b""),
        (member("pw", tarfile.SYMTYPE, chain), b""),
    )
    dest = tmp_path / "dest"
    with pytest.raises(IsolationError, match="'pw' leads outside"):
        unpack_folder(data, dest)
    assert not dest.exists()
    # A link already in the folder counts too; the archive's own chain stays refused.
    dest.mkdir()
    (dest / "q").symlink_to(".")
    with pytest.raises(IsolationError, match="'pw' leads outside"):
        unpack_folder(archive((member("pw", tarfile.SYMTYPE, "q/../x"), b"")), dest)
    assert listing(dest) == ["q"]


def test_a_link_chain_leading_out_is_not_packed(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "q").symlink_to(".")
    (folder / "pw").symlink_to("q/q/../../outside")
    (folder / "ok").symlink_to("q/q/f.txt")
    with tarfile.open(fileobj=io.BytesIO(pack_folder(folder))) as tar:
        assert sorted(tar.getnames()) == ["ok", "q"]


def test_a_link_in_the_destination_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)  # planted by a command
    data = archive((member("sub", tarfile.DIRTYPE), b""), (member("sub/x.txt"), b"x"))
    with pytest.raises(IsolationError, match="symbolic link"):
        unpack_folder(data, dest)
    assert listing(outside) == []


def test_a_damaged_archive_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IsolationError, match="damaged"):
        unpack_folder(b"not a tar archive at all" * 40, tmp_path / "dest")


def test_the_folder_cap_refuses_to_pack_and_to_unpack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"x" * 600)
    (src / "b.bin").write_bytes(b"y" * 600)
    data = pack_folder(src)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 1000)
    with pytest.raises(IsolationError, match="over 0 MiB"):
        pack_folder(src)
    with pytest.raises(IsolationError, match="files are over"):
        unpack_folder(data, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_the_member_cap_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"{i}.txt").write_text("x")
    data = pack_folder(src)
    monkeypatch.setattr(archives, "MAX_MEMBERS", 3)
    with pytest.raises(IsolationError, match="more than 3 entries"):
        pack_folder(src)
    with pytest.raises(IsolationError, match="more than 3 entries"):
        unpack_folder(data, tmp_path / "dest")


COPY = Copy(
    kind="worktree", root="/r", worktree="/r", git_dir="/r/.git", prefix="",
    branch="agentkit/c/agent-1", base="a" * 40, base_ref="refs/agentkit/bases/c/agent-1",
)  # fmt: skip


def test_a_bundle_over_the_cap_is_refused_before_git_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", 100)
    with pytest.raises(IsolationError, match="over 0 MiB as a git bundle"):
        unpack(b"x" * 101, tmp_path / "node", COPY)
    assert not (tmp_path / "node").exists()


def test_a_result_header_is_read_and_a_damaged_one_refused() -> None:
    base, head = "1" * 40, "2" * 40
    data = bundles.RESULT_MAGIC + f"base {base}\nhead {head}\n\n".encode() + b"BUNDLE"
    assert parse_result(data) == (base, head, b"BUNDLE")
    with pytest.raises(IsolationError, match="not an agentkit result"):
        parse_result(b"# v2 git bundle\n")
    with pytest.raises(IsolationError, match="no valid base"):
        parse_result(bundles.RESULT_MAGIC + b"base xyz\nhead ../../x\n\n")
    with pytest.raises(IsolationError, match="damaged header"):
        parse_result(bundles.RESULT_MAGIC + b"base " + b"1" * 5000)
