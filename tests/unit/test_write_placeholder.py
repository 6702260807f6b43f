"""write_file refuses lazy rewrites: a much shorter content standing in for the rest of an
existing file with a placeholder line (docs/tools.md ``placeholder_content``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext
from agentkit.tools.files import WriteFileParams, write_file


def _long_file(ext: str) -> str:
    if ext in ("html", "xml", "vue"):
        return "".join(f"<p class='row'>paragraph {i} of the page</p>\n" for i in range(80))
    if ext in ("sql", "lua"):
        return "".join(f"SELECT col_{i} FROM table_{i} WHERE id = {i};\n" for i in range(80))
    return "".join(f"value_{i} = compute({i}, factor={i * 3})  # step {i}\n" for i in range(80))


# (file name, placeholder line): the new content is a short head, the line, a short tail.
PLACEHOLDERS = [
    ("app.py", "# ... rest of the code unchanged ..."),
    ("app.py", "# rest of the file stays the same"),
    ("app.py", "    # ..."),
    ("app.py", '"""... rest of the module unchanged ..."""'),
    ("app.py", "# previous code remains the same"),
    ("app.py", "# 其余代码不变"),
    ("app.py", "# 以下代码省略"),
    ("main.js", "// existing code here"),
    ("main.js", "// ... existing code ..."),
    ("main.ts", "  // …"),
    ("main.ts", "// other methods omitted for brevity"),
    ("main.go", "// 保持不变"),
    ("main.c", "/* ... */ rest remains"),
    ("main.c", "/* ... */"),
    ("Main.java", " * ... remaining methods unchanged ..."),
    ("main.rs", "// implementation goes here"),
    ("style.css", "/* rest of the styles */"),
    ("page.html", "<!-- rest of file -->"),
    ("page.html", "<!-- 其他内容不变 -->"),
    ("App.jsx", "{/* ... rest of the component ... */}"),
    ("query.sql", "-- rest of query unchanged"),
    ("init.lua", "-- ..."),
    ("conf.ini", "; ... rest omitted"),
    ("paper.tex", "% rest of document unchanged"),
    ("mod.vb", "' ... rest of code unchanged"),
    ("run.bat", "REM rest unchanged"),
    ("notes.txt", "... (unchanged)"),
    ("notes.txt", "（其余部分省略）"),
    ("notes.txt", "…其余代码不变…"),
    ("notes.md", "[rest of file unchanged]"),
    ("config.yaml", "# (unchanged)"),
    ("script.sh", "# 同上"),
]


@pytest.mark.parametrize(("name", "marker"), PLACEHOLDERS)
def test_placeholder_rewrite_of_a_longer_file_is_refused(
    ctx: ToolContext, workspace: Path, name: str, marker: str
) -> None:
    ext = name.rsplit(".", 1)[1]
    old = _long_file(ext)
    target = workspace / name
    target.write_text(old, encoding="utf-8")
    before = target.read_bytes()
    lines = old.splitlines()
    new = "\n".join([*lines[:3], marker, *lines[-2:]]) + "\n"
    with pytest.raises(ToolError) as info:
        write_file(WriteFileParams(path=name, content=new), ctx)
    err = info.value
    assert err.code == "placeholder_content"
    assert marker.strip()[:40] in err.message and "edit_file" in err.message
    assert "Nothing was written" in err.message and "force=true" in err.message
    assert target.read_bytes() == before  # the file is untouched on disk


SHORT_HEAD = "".join(f"x_{i} = {i}\n" for i in range(5))

# (description, old content or None for a new file, new content): all must be written.
LEGITIMATE = [
    ("new file with a placeholder comment", None, "# ... rest of the code unchanged ...\nx=1\n"),
    ("new file: an empty stub", None, "def todo():\n    ...\n"),
    (
        "rewrite of similar length with a marker",
        _long_file("py"),
        _long_file("py").replace("step 5\n", "step 5\n# ...\n", 1),
    ),
    ("shorter rewrite using Python Ellipsis", _long_file("py"), SHORT_HEAD + "def f(): ...\n"),
    ("shorter rewrite with a bare Ellipsis line", _long_file("py"), SHORT_HEAD + "    ...\n"),
    (
        "shorter rewrite using JS spread",
        _long_file("js"),
        "function f(...args) {\n  return g(...args);\n}\nconst s = {...state, a: 1};\n",
    ),
    ("shorter rewrite with C++ catch-all", _long_file("cpp"), "try { f(); } catch (...) {}\n"),
    (
        "shorter rewrite with a prose comment containing the words",
        _long_file("py"),
        "# Return the list unchanged if it is empty\ndef f(xs):\n    return xs\n",
    ),
    (
        "shorter rewrite with a long prose comment",
        _long_file("py"),
        "# The rest of the input is parsed later, once the header has been validated by\n"
        "# the caller, so this module stays small.\nx = 1\n",
    ),
    ("shorter rewrite with a loop invariant note", _long_file("go"), "// 循环不变量：i <= n\n"),
    ("shorter rewrite with a section header", _long_file("py"), "# Existing tests\nx = 1\n"),
    ("shorter rewrite printing dots", _long_file("py"), "print('...')\nprint('loading…')\n"),
    ("shorter rewrite with a TODO", _long_file("py"), "# TODO: handle the rest of the input\n"),
    ("a file emptied on purpose", _long_file("py"), ""),
]


@pytest.mark.parametrize(("why", "old", "new"), LEGITIMATE, ids=[c[0] for c in LEGITIMATE])
def test_legitimate_writes_are_accepted(
    ctx: ToolContext, workspace: Path, why: str, old: str | None, new: str
) -> None:
    target = workspace / "f.src"
    if old is not None:
        target.write_text(old, encoding="utf-8")
    result = write_file(WriteFileParams(path="f.src", content=new), ctx)
    assert result.ok, why
    assert target.read_text(encoding="utf-8") == new


def test_force_writes_a_refused_content(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "a.py"
    target.write_text(_long_file("py"), encoding="utf-8")
    stub = "x = 1\n# ... rest unchanged ...\n"
    with pytest.raises(ToolError):
        write_file(WriteFileParams(path="a.py", content=stub), ctx)
    write_file(WriteFileParams(path="a.py", content=stub, force=True), ctx)
    assert target.read_text(encoding="utf-8") == stub
