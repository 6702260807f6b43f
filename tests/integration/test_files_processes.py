"""read_file, write_file and edit_file on real files (no mocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.files import (
    WriteFileParams,
    write_file,
)

REPO = Path(__file__).resolve().parents[2]


def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    return write_file(WriteFileParams(path=path, content=content), ctx)


_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from agentkit.settings import Settings
    from agentkit.tools.base import ToolContext
    from agentkit.tools.files import ReadFileParams, read_file
    ctx = ToolContext(workspace=Path(sys.argv[2]), settings=Settings(model="m", api_key="k", language="en"))
    read_file(ReadFileParams(path="big.log", limit=2), ctx)  # warm up imports
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    near_end = read_file(ReadFileParams(path="big.log", offset=1002, limit=5), ctx).output
    huge_line = read_file(ReadFileParams(path="big.log", offset=1001, limit=1), ctx).output
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(json.dumps({"near_end": near_end, "huge_line": huge_line, "growth_kib": growth_kib}))
    """
)


def test_one_gib_sparse_file_read_near_end_with_bounded_memory(workspace: Path) -> None:
    tail = b"".join(b"\ntail line %d" % i for i in range(1, 101)) + b"\n"
    with open(workspace / "big.log", "wb") as fh:
        fh.write(b"".join(b"head line %d\n" % i for i in range(1, 1001)))
        fh.seek((1 << 30) - len(tail))  # the hole reads as NUL bytes: one ~1 GiB line
        fh.write(tail)
    assert os.stat(workspace / "big.log").st_size == 1 << 30
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(REPO), str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    lines = report["near_end"].split("\n")
    assert lines[0].startswith("big.log · lines 1002–1006 of 1101 · UTF-8, LF, 1.0 GiB")
    assert lines[1:6] == [f"  {1001 + i:>4}\ttail line {i}" for i in range(1, 6)]
    assert "[line 1001: " in report["huge_line"] and "char_offset=2000" in report["huge_line"]
    assert report["growth_kib"] < 100 * 1024, report["growth_kib"]
