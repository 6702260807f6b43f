"""read_file, write_file and edit_file on real files (no mocks)."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.files import (
    FILE_TOOLS,
    EditFileParams,
    ReadFileParams,
    WriteFileParams,
    edit_file,
    read_file,
    write_file,
)
from agentkit.tools.registry import ToolRegistry


def read(ctx: ToolContext, path: str, **kw) -> ToolResult:
    return read_file(ReadFileParams(path=path, **kw), ctx)


def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    return write_file(WriteFileParams(path=path, content=content), ctx)


def edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False) -> ToolResult:
    return edit_file(
        EditFileParams(path=path, old_string=old, new_string=new, replace_all=replace_all), ctx
    )


def error_of(fn, *args, **kw) -> ToolError:
    with pytest.raises(ToolError) as info:
        fn(*args, **kw)
    return info.value


def with_settings(ctx: ToolContext, **changes) -> ToolContext:
    return ToolContext(workspace=ctx.workspace, settings=ctx.settings.model_copy(update=changes))


# --- read_file ---------------------------------------------------------------------


def test_read_numbered_lines_with_header(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("import os\n\nprint(os.name)\n")
    out = read(ctx, "a.py").output.split("\n")
    assert out[0] == "a.py · lines 1–3 of 3 · UTF-8, LF, 26 bytes"
    assert out[1:] == ["     1\timport os", "     2\t", "     3\tprint(os.name)"]


def test_read_window_and_continuation_note(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"row {i}\n" for i in range(1, 101)))
    res = read(ctx, "n.txt", offset=10, limit=5)
    lines = res.output.split("\n")
    assert lines[1] == "    10\trow 10" and lines[5] == "    14\trow 14"
    assert lines[-1] == "[showing lines 10–14 of 100; continue with offset=15]"
    assert res.truncated
    last = read(ctx, "n.txt", offset=98)
    assert "continue" not in last.output and last.output.endswith("   100\trow 100")
    assert error_of(read, ctx, "n.txt", offset=101).code == "invalid_argument"


def test_read_no_final_newline(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "x.txt").write_bytes(b"one\ntwo")
    assert read(ctx, "x.txt").output.split("\n")[1:] == ["     1\tone", "     2\ttwo"]


def test_read_crlf_shows_no_carriage_returns(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"alpha\r\nbeta\r\n")
    out = read(ctx, "w.txt").output
    assert "\r" not in out
    assert "CRLF" in out.split("\n")[0]
    assert out.split("\n")[1:] == ["     1\talpha", "     2\tbeta"]


@pytest.mark.parametrize(
    ("data", "label"),
    [
        ("\ufeffhello\nwörld\n".encode(), "UTF-8 with BOM"),
        ("\ufeffhello\nwörld\n".encode("utf-16-le"), "UTF-16LE with BOM"),
        ("\ufeffhello\nwörld\n".encode("utf-16-be"), "UTF-16BE with BOM"),
        ("hello\nwörld\n".encode("latin-1"), "Windows-1252"),
    ],
)
def test_read_encodings(ctx: ToolContext, workspace: Path, data: bytes, label: str) -> None:
    (workspace / "e.txt").write_bytes(data)
    out = read(ctx, "e.txt").output.split("\n")
    assert label in out[0]
    assert out[1:] == ["     1\thello", "     2\twörld"]


def test_read_gbk_and_shift_jis(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "gbk.txt").write_bytes("第一行：中文内容\n第二行\n".encode("gbk"))
    out = read(ctx, "gbk.txt").output
    assert "GBK" in out.split("\n")[0] and "     1\t第一行：中文内容" in out
    (workspace / "sj.txt").write_bytes("これは日本語です。\n".encode("shift_jis"))
    out = read(ctx, "sj.txt").output
    assert "Shift_JIS" in out.split("\n")[0] and "これは日本語です。" in out


def test_read_undecodable_file(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "junk.txt").write_bytes(bytes(range(128, 256)) * 4)
    assert error_of(read, ctx, "junk.txt").code == "decode_error"


def test_read_long_line_marker_and_char_offset(ctx: ToolContext, workspace: Path) -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(5000))
    (workspace / "min.js").write_text(line + "\nnext\n")
    out = read(ctx, "min.js").output.split("\n")
    assert (
        out[1]
        == f"     1\t{line[:2000]}… [line 1: 5000 chars; continue with offset=1, char_offset=2000]"
    )
    assert out[2] == "     2\tnext"
    page = read(ctx, "min.js", offset=1, limit=1, char_offset=2000).output.split("\n")
    assert page[1].startswith(f"     1\t{line[2000:4000]}… [line 1: 5000 chars;")
    assert "char_offset=4000" in page[1]
    tail = read(ctx, "min.js", offset=1, limit=1, char_offset=4000).output.split("\n")
    assert tail[1] == f"     1\t{line[4000:]}"


def test_read_output_cap_note(ctx: ToolContext, workspace: Path) -> None:
    small = with_settings(ctx, read_max_output_chars=1000)
    (workspace / "many.txt").write_text(
        "".join(f"{i:04d} " + "x" * 45 + "\n" for i in range(1, 201))
    )
    res = read(small, "many.txt")
    body = res.output
    last = int(body.split("\n")[-2].split("\t")[0])
    assert (
        body.split("\n")[-1] == f"[showing lines 1–{last} of 200; continue with offset={last + 1}]"
    )
    assert 10 < last < 25
    assert len(body) < 1000 + 200


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "PNG"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 50, "ELF"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 20, "gzip"),
        (b"hello\x00world", "NUL"),
    ],
)
def test_read_binary_is_refused(ctx: ToolContext, workspace: Path, data: bytes, kind: str) -> None:
    (workspace / "blob.bin").write_bytes(data)
    err = error_of(read, ctx, "blob.bin")
    assert err.code == "binary_file"
    assert kind in err.message and f"{len(data)} bytes" in err.message
    assert "hello" not in err.message


def test_read_folder_lists_entries(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "pkg").mkdir()
    (workspace / "src" / "main.py").write_text("x" * 2048)
    (workspace / "src" / "b.txt").write_text("hi")
    res = read(ctx, "src")
    lines = res.output.split("\n")
    assert "directory" in lines[0] and "1 folder" in lines[0] and "2 files" in lines[0]
    assert lines[1:] == ["  pkg/", "  b.txt  2 bytes", "  main.py  2.0 KiB"]
    assert res.ok


def test_read_folder_listing_is_capped(ctx: ToolContext, workspace: Path) -> None:
    for i in range(250):
        (workspace / f"f{i:03d}.txt").write_text("")
    res = read(ctx, ".")
    assert res.truncated and "showing 200 of 250 entries" in res.output
    assert len(res.output.split("\n")) == 202


def test_read_missing_file_suggests_close_names(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("")
    err = error_of(read, ctx, "src/mian.py")
    assert err.code == "not_found" and "src/main.py" in err.message
    err = error_of(read, ctx, "guide.md")  # same name in another folder
    assert "docs/guide.md" in err.message
    err = error_of(read, ctx, "nowhere/zzz.qqq")
    assert "nowhere does not exist" in err.message


def test_read_empty_file(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "empty.txt").write_bytes(b"")
    res = read(ctx, "empty.txt")
    assert res.ok and res.output == "(empty file, 0 bytes)"
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbf")
    assert read(ctx, "bom.txt").output.startswith("(empty file, 3 bytes")


def test_read_fifo_and_device_are_refused(ctx: ToolContext, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    assert error_of(read, ctx, "pipe").code == "not_a_regular_file"  # and it did not block
    dev = with_settings(ctx, read_only_roots=["/dev"])
    assert error_of(read, dev, "/dev/null").code == "not_a_regular_file"


def test_read_records_snapshot(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "s.txt").write_bytes(b"\xff\xfe" + "x\r\ny\r\n".encode("utf-16-le"))
    read(ctx, "s.txt")
    snap = ctx.file_state[str(workspace / "s.txt")]
    assert snap["sha256"] and snap["size"] == 14
    assert snap["format"].encoding == "utf-16-le" and snap["format"].bom == b"\xff\xfe"
    assert snap["format"].eol == "\r\n"


def test_read_outside_workspace_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("s")
    assert error_of(read, ctx, "../secret.txt").code == "outside_workspace"
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    assert error_of(read, ctx, "link.txt").code == "outside_workspace"


def test_read_only_root_readable_not_writable(ctx: ToolContext, tmp_path: Path) -> None:
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "doc.txt").write_text("reference text\n")
    ro = with_settings(ctx, read_only_roots=[str(ref)])
    assert "reference text" in read(ro, str(ref / "doc.txt")).output
    assert error_of(write, ro, str(ref / "doc.txt"), "x").code == "outside_workspace"
    assert error_of(edit, ro, str(ref / "doc.txt"), "reference", "x").code == "outside_workspace"
    assert (ref / "doc.txt").read_text() == "reference text\n"


# Streaming (files over max_file_bytes) must show exactly what the whole-file path shows.
_STREAM_CASES = {
    "utf8": "".join(f"línea {i}\n" for i in range(1, 300)).encode(),
    "crlf-nofinal": b"\r\n".join(b"row %d" % i for i in range(1, 300)),
    "utf16": "\ufeff".encode("utf-16-le")
    + "".join(f"行 {i}\n" for i in range(300)).encode("utf-16-le"),
    "gbk": "".join(f"第{i}行\n" for i in range(300)).encode("gbk"),
    "long-lines": b"".join(b"%d:" % i + b"y" * (i * 37 % 3000) + b"\n" for i in range(300)),
}


@pytest.mark.parametrize("name", list(_STREAM_CASES))
@pytest.mark.parametrize(
    ("offset", "limit", "char_offset"),
    [(1, 5, 0), (150, 20, 0), (290, 50, 0), (300, 1, 0), (81, 3, 2500)],
)
def test_streamed_window_matches_whole_read(
    ctx: ToolContext, workspace: Path, name: str, offset: int, limit: int, char_offset: int
) -> None:
    data = _STREAM_CASES[name]
    (workspace / "f.txt").write_bytes(data)
    streamed = with_settings(ctx, max_file_bytes=len(data) // 3)
    window = {"offset": offset, "limit": limit, "char_offset": char_offset}
    try:
        whole = read(ctx, "f.txt", **window).output
    except ToolError as exc:
        assert error_of(read, streamed, "f.txt", **window).code == exc.code
        return
    part = read(streamed, "f.txt", **window).output
    assert part.split("\n")[1:] == whole.split("\n")[1:]
    assert part.split("\n")[0].split(" · ")[:3] == whole.split("\n")[0].split(" · ")[:3]


def test_streamed_window_far_from_end_says_total_unknown(ctx: ToolContext, workspace: Path) -> None:
    # Over 2 MiB past the window: not counted (counting is only done for a small rest).
    data = b"".join(b"line %d\n" % i for i in range(1, 400_001))
    (workspace / "big.txt").write_bytes(data)
    streamed = with_settings(ctx, max_file_bytes=1 << 20)
    out = read(streamed, "big.txt", offset=3, limit=2).output.split("\n")
    assert out[0].startswith("big.txt · lines 3–4 of ? ·")
    assert out[1:] == [
        "     3\tline 3",
        "     4\tline 4",
        "[showing lines 3–4 of ?; continue with offset=5]",
    ]


# --- write_file --------------------------------------------------------------------


def test_write_creates_file_and_parents(ctx: ToolContext, workspace: Path) -> None:
    res = write(ctx, "out/deep/new.md", "# Title\n\nText ü\n")
    assert res.output == "Created out/deep/new.md (3 lines, 17 bytes, UTF-8, LF)"
    assert (workspace / "out/deep/new.md").read_bytes() == "# Title\n\nText ü\n".encode()
    assert res.meta["action"] == "created"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(workspace / "out/deep/new.md").st_mode) == 0o666 & ~umask


def test_write_overwrite_without_prior_read_keeps_mode(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "run.sh"
    target.write_text("#!/bin/sh\necho old\n")
    os.chmod(target, 0o751)
    res = write(ctx, "run.sh", "#!/bin/sh\necho new\n")
    assert res.output.startswith("Replaced run.sh (2 lines,") and "was 2 lines" in res.output
    assert target.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o751
    assert [p.name for p in workspace.iterdir()] == ["run.sh"]  # no temp file left


@pytest.mark.parametrize(
    ("old_bytes", "content", "expected"),
    [
        (b"a\r\nb\r\n", "x\ny\n", b"x\r\ny\r\n"),
        ("旧内容\n".encode("gbk"), "新的内容\n第二行\n", "新的内容\n第二行\n".encode("gbk")),
        (
            b"\xff\xfe" + "old\n".encode("utf-16-le"),
            "new\n",
            b"\xff\xfe" + "new\n".encode("utf-16-le"),
        ),
        (b"\xef\xbb\xbfold\n", "new\n", b"\xef\xbb\xbfnew\n"),
    ],
)
def test_write_keeps_existing_format(
    ctx: ToolContext, workspace: Path, old_bytes: bytes, content: str, expected: bytes
) -> None:
    (workspace / "f.txt").write_bytes(old_bytes)
    write(ctx, "f.txt", content)
    assert (workspace / "f.txt").read_bytes() == expected


def test_write_gbk_file_with_non_gbk_chars_becomes_gb18030(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "g.txt").write_bytes("中文\n".encode("gbk"))
    res = write(ctx, "g.txt", "中文 😀\n")
    assert "GB18030" in res.output
    assert (workspace / "g.txt").read_bytes() == "中文 😀\n".encode("gb18030")


def test_write_stale_read_is_refused_then_retry_works(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "cfg.ini"
    target.write_text("[main]\nkey = 1\n")
    read(ctx, "cfg.ini")
    target.write_text("[main]\nkey = 2\nother = 3\n")
    os.utime(target, ns=(1, 1))
    err = error_of(write, ctx, "cfg.ini", "[main]\nkey = 9\n")
    assert err.code == "stale_read"
    assert "     2\tkey = 2" in err.message and "     3\tother = 3" in err.message
    assert target.read_text() == "[main]\nkey = 2\nother = 3\n"
    write(ctx, "cfg.ini", "[main]\nkey = 9\n")  # the error refreshed the snapshot
    assert target.read_text() == "[main]\nkey = 9\n"


def test_write_same_content_touch_is_not_stale(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "t.txt").write_text("same\n")
    read(ctx, "t.txt")
    os.utime(workspace / "t.txt", ns=(5, 5))
    write(ctx, "t.txt", "changed\n")
    assert (workspace / "t.txt").read_text() == "changed\n"


def test_write_claims_before_writing_and_conflict_propagates(
    ctx: ToolContext, workspace: Path
) -> None:
    claimed: list[Path] = []

    def claim(path: Path) -> None:
        claimed.append(path)
        if path.name == "owned.txt":
            raise ToolError("write_conflict", "owned.txt belongs to sub-agent 2")

    ctx.claim_write = claim
    registry = ToolRegistry(FILE_TOOLS)
    res = registry.execute("write_file", {"path": "owned.txt", "content": "x"}, ctx)
    assert not res.ok and res.output.startswith("Error: write_conflict: owned.txt belongs")
    assert not (workspace / "owned.txt").exists()
    assert registry.execute("write_file", {"path": "mine.txt", "content": "x"}, ctx).ok
    assert claimed == [workspace / "owned.txt", workspace / "mine.txt"]
    (workspace / "owned2.txt").write_text("a\n")
    claimed.clear()
    registry.execute("edit_file", {"path": "owned2.txt", "old_string": "a", "new_string": "b"}, ctx)
    assert claimed == [workspace / "owned2.txt"]


def test_write_refusals(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    assert error_of(write, ctx, "dir", "x").code == "is_directory"
    (workspace / "file").write_text("x")
    assert error_of(write, ctx, "file/child.txt", "x").code == "invalid_argument"
    assert error_of(write, ctx, "../escape.txt", "x").code == "outside_workspace"
    assert not (workspace.parent / "escape.txt").exists()
    os.mkfifo(workspace / "pipe")
    assert error_of(write, ctx, "pipe", "x").code == "not_a_regular_file"


def test_write_through_symlink_inside_keeps_link(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "real.txt").write_text("old\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    write(ctx, "alias.txt", "new\n")
    assert (workspace / "alias.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "new\n"


# --- edit_file ---------------------------------------------------------------------

PY = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y * 2\n"


def test_edit_single_replacement_with_snippet(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "m.py").write_text(PY)
    res = edit(ctx, "m.py", "return y * 2", "return y * 3")
    assert (workspace / "m.py").read_text() == PY.replace("y * 2", "y * 3")
    lines = res.output.split("\n")
    assert lines[0] == "Edited m.py: 1 replacement at line 6 (match: exact)"
    assert lines[1] == "     2\t    return x + 1" and lines[-1] == "     6\t    return y * 3"


def test_edit_ambiguous_match_reports_lines(ctx: ToolContext, workspace: Path) -> None:
    text = "a = 1\nb = 2\na = 1\n"
    (workspace / "d.py").write_text(text)
    err = error_of(edit, ctx, "d.py", "a = 1", "a = 5")
    assert err.code == "ambiguous_match"
    assert "2 times" in err.message and "lines 1, 3" in err.message and "replace_all" in err.message
    assert (workspace / "d.py").read_text() == text


def test_edit_replace_all(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "d.py").write_text("a = 1\nb = 2\na = 1\n")
    res = edit(ctx, "d.py", "a = 1", "a = 5", replace_all=True)
    assert (workspace / "d.py").read_text() == "a = 5\nb = 2\na = 5\n"
    assert "2 replacements at lines 1, 3" in res.output


def test_edit_no_match_shows_closest_region(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "t.py").write_text("def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n")
    err = error_of(edit, ctx, "t.py", "if x:\n        return 10", "pass")
    assert err.code == "no_match"
    assert "     2\t→if·x:" in err.message and "     3\t→→return·1" in err.message
    assert "U+0009 CHARACTER TABULATION" in err.message
    err = error_of(edit, ctx, "t.py", "completely unrelated text here", "x")
    assert "Nothing similar" in err.message


def test_edit_no_match_names_first_difference(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "q.txt").write_text("say \u201chello\u201d to the world 42\n")
    err = error_of(edit, ctx, "q.txt", "say 'hello' to the world 42", "x")
    assert "U+201C LEFT DOUBLE QUOTATION MARK" in err.message
    assert "U+0027 APOSTROPHE" in err.message


def test_edit_crlf_file_keeps_crlf_and_other_bytes(ctx: ToolContext, workspace: Path) -> None:
    data = b"one\r\ntwo\r\nthree\r\nfour\r\n"
    (workspace / "c.txt").write_bytes(data)
    edit(ctx, "c.txt", "two\nthree\n", "2\n3\n3.5\n")
    assert (workspace / "c.txt").read_bytes() == b"one\r\n2\r\n3\r\n3.5\r\nfour\r\n"
    edit(ctx, "c.txt", "3.5\r\nfour", "4")  # CRLF in old_string works as well
    assert (workspace / "c.txt").read_bytes() == b"one\r\n2\r\n3\r\n4\r\n"


def test_edit_mixed_endings_outside_span_unchanged(ctx: ToolContext, workspace: Path) -> None:
    data = b"a\r\nb\nc\r\nd\n"
    (workspace / "x.txt").write_bytes(data)
    edit(ctx, "x.txt", "c", "C")
    assert (workspace / "x.txt").read_bytes() == b"a\r\nb\nC\r\nd\n"


@pytest.mark.parametrize(
    ("codec", "bom"),
    [
        ("gbk", b""),
        ("utf-16-le", b"\xff\xfe"),
        ("utf-16-be", b"\xfe\xff"),
        ("utf-8", b"\xef\xbb\xbf"),
    ],
)
def test_edit_keeps_encoding_and_bom(
    ctx: ToolContext, workspace: Path, codec: str, bom: bytes
) -> None:
    text = "第一行：你好\r\n第二行：世界\r\n第三行\r\n"
    (workspace / "enc.txt").write_bytes(bom + text.encode(codec))
    edit(ctx, "enc.txt", "世界", "天下")
    assert (workspace / "enc.txt").read_bytes() == bom + text.replace("世界", "天下").encode(codec)


def test_edit_unrepresentable_character_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "sj.txt").write_bytes("日本語のテキスト\n".encode("cp932"))
    err = error_of(edit, ctx, "sj.txt", "テキスト", "文字 😀")
    assert err.code == "invalid_argument" and "cannot represent" in err.message
    assert (workspace / "sj.txt").read_bytes() == "日本語のテキスト\n".encode("cp932")


def test_edit_trailing_whitespace_stage(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "w.py").write_text("x = 1   \ny = 2\t\nz = 3\n")
    res = edit(ctx, "w.py", "x = 1\ny = 2\n", "x = 10\ny = 20\n")
    assert "(match: trailing-ws)" in res.output
    assert (workspace / "w.py").read_text() == "x = 10\ny = 20\nz = 3\n"


def test_edit_indentation_stage_reindents_with_tabs(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "g.go").write_text("func f() {\n\tif ok {\n\t\treturn 1\n\t}\n}\n")
    res = edit(ctx, "g.go", "if ok {\n    return 1\n}", "if ok {\n    log()\n    return 2\n}")
    assert "(match: indent)" in res.output
    assert (
        workspace / "g.go"
    ).read_text() == "func f() {\n\tif ok {\n\t\tlog()\n\t\treturn 2\n\t}\n}\n"


def test_edit_indentation_stage_shifts_spaces(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "c.py").write_text("class A:\n    def m(self):\n        return 1\n")
    edit(ctx, "c.py", "def m(self):\n    return 1", "def m(self):\n    x = 2\n    return x")
    assert (
        workspace / "c.py"
    ).read_text() == "class A:\n    def m(self):\n        x = 2\n        return x\n"


def test_edit_lookalike_characters_stage(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("price:\u00a010 \u201cEUR\u201d\nnext\n")
    res = edit(ctx, "n.txt", 'price: 10 "EUR"', 'price: 12 "EUR"')
    assert "(match: unicode)" in res.output
    assert (workspace / "n.txt").read_text() == 'price: 12 "EUR"\nnext\n'


def test_edit_fuzzy_stages_need_a_single_hit(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "r.py").write_text("if a:\n    go()\nif a:\n\tgo()\n")
    err = error_of(edit, ctx, "r.py", "if a:\n  go()", "x", replace_all=True)
    assert err.code == "ambiguous_match" and "indentation" in err.message


def test_replace_all_reports_lines_in_the_new_text(ctx: ToolContext, workspace: Path) -> None:
    lines = [f"x = {i}" for i in range(1, 101)]
    for n in (10, 50, 90):
        lines[n - 1] = "TOKEN"
    (workspace / "r.txt").write_text("\n".join(lines) + "\n")
    res = edit(ctx, "r.txt", "TOKEN", "A\nB", replace_all=True)
    assert "3 replacements at lines 10, 51, 92" in res.output  # each adds one line
    new = (workspace / "r.txt").read_text().split("\n")
    assert new[9:11] == ["A", "B"] and new[50:52] == ["A", "B"] and new[91:93] == ["A", "B"]
    assert "    92\tA" in res.output and "    93\tB" in res.output


def test_parallel_edits_of_one_file_all_apply(ctx: ToolContext, workspace: Path) -> None:
    # Tool calls of one message run in threads; edits of the same file must not lose updates.
    (workspace / "p.txt").write_text("".join(f"tok{i}\n" for i in range(16)))
    registry = ToolRegistry(FILE_TOOLS)

    def one(i: int) -> ToolResult:
        args = {"path": "p.txt", "old_string": f"tok{i}\n", "new_string": f"done{i}\n"}
        return registry.execute("edit_file", args, ctx)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(16)))
    assert all(r.ok for r in results), [r.output for r in results if not r.ok]
    assert (workspace / "p.txt").read_text() == "".join(f"done{i}\n" for i in range(16))


def test_write_large_existing_file_keeps_format(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"\xef\xbb\xbf" + b"row\r\n" * 1000)
    small = with_settings(ctx, max_file_bytes=1000)
    read(small, "big.txt", limit=2)
    res = write(small, "big.txt", "a\nb\n")
    assert "UTF-8 with BOM, CRLF" in res.output
    assert (workspace / "big.txt").read_bytes() == b"\xef\xbb\xbfa\r\nb\r\n"


def test_edit_argument_errors(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("abc\n")
    assert error_of(edit, ctx, "a.txt", "abc", "abc").code == "no_change"
    assert error_of(edit, ctx, "a.txt", "", "x").code == "invalid_argument"
    err = error_of(edit, ctx, "b.txt", "abc", "x")
    assert err.code == "not_found" and "write_file" in err.message
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert error_of(edit, ctx, "img.png", "PNG", "x").code == "binary_file"
    (workspace / "dir").mkdir()
    assert error_of(edit, ctx, "dir", "a", "b").code == "is_directory"


def test_edit_too_large(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "big.txt").write_text("line\n" * 100)
    small = with_settings(ctx, max_file_bytes=100)
    err = error_of(edit, small, "big.txt", "line", "x", replace_all=True)
    assert err.code == "too_large"
    assert (workspace / "big.txt").read_text() == "line\n" * 100


def test_edit_keeps_mode_and_consecutive_edits_are_not_stale(
    ctx: ToolContext, workspace: Path
) -> None:
    target = workspace / "s.sh"
    target.write_text("echo a\necho b\n")
    os.chmod(target, 0o700)
    read(ctx, "s.sh")
    edit(ctx, "s.sh", "echo a", "echo A")
    edit(ctx, "s.sh", "echo b", "echo B")
    assert target.read_text() == "echo A\necho B\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700
    assert sorted(p.name for p in workspace.iterdir()) == ["s.sh"]


def test_edit_stale_read(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "s.txt"
    target.write_text("alpha\nbeta\n")
    read(ctx, "s.txt")
    target.write_text("alpha\nbeta\ngamma\n")
    os.utime(target, ns=(7, 7))
    err = error_of(edit, ctx, "s.txt", "beta", "BETA")
    assert err.code == "stale_read" and "     3\tgamma" in err.message
    assert target.read_text() == "alpha\nbeta\ngamma\n"
    edit(ctx, "s.txt", "beta", "BETA")
    assert target.read_text() == "alpha\nBETA\ngamma\n"


def test_edit_delete_lines(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "d.txt").write_bytes(b"keep\r\ndrop me\r\nkeep too\r\n")
    edit(ctx, "d.txt", "drop me\n", "")
    assert (workspace / "d.txt").read_bytes() == b"keep\r\nkeep too\r\n"


def test_edit_is_literal_no_regex_templates(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "p.txt").write_text("name = X\n")
    edit(ctx, "p.txt", "X", r"$& \1 \g<0>")
    assert (workspace / "p.txt").read_text() == "name = $& \\1 \\g<0>\n"


# --- registry integration and descriptions ------------------------------------------


def test_tools_registered_with_counters_and_descriptions() -> None:
    assert [t.name for t in FILE_TOOLS] == ["read_file", "write_file", "edit_file"]
    assert [t.counter for t in FILE_TOOLS] == ["files_read", None, None]
    for tool in FILE_TOOLS:
        for lang in ("en", "zh"):
            fn = tool.schema(lang)["function"]
            assert len(fn["description"]) > 50
            assert all(p.get("description") for p in fn["parameters"]["properties"].values())
    zh = FILE_TOOLS[2].schema("zh")["function"]["description"]
    assert "替换" in zh


def test_registry_turns_validation_errors_into_results(
    ctx: ToolContext, settings: Settings
) -> None:
    registry = ToolRegistry(FILE_TOOLS)
    res = registry.execute("read_file", {"path": "x", "offset": 0}, ctx)
    assert not res.ok and res.output.startswith("Error: invalid_argument")
    res = registry.execute("read_file", {"path": "missing.txt"}, ctx)
    assert res.output.startswith("Error: not_found: no such file: missing.txt")
