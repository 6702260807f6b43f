"""The parts of agentkit.acp one at a time, in process: the channel on real pipes, the
JSON-RPC checks, tool cards, prompt blocks, the editor's MCP servers, history replay
and the event → update mapping (fed real agentkit events)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("acp")


def test_claim_stdio_keeps_stdout_for_the_protocol(tmp_path: Path) -> None:
    program = textwrap.dedent(
        """
        import os, subprocess, sys
        from agentkit.acp.stdio import claim_stdio
        input_fd, output_fd = claim_stdio()
        print("a print")
        os.write(1, b"fd one\\n")
        subprocess.run([sys.executable, "-c", "print('a child'); import sys; print(sys.stdin.read() == '')"])
        os.write(output_fd, os.read(input_fd, 100))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        input=b'{"protocol": true}\n',
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"protocol": true}\n'
    assert done.stderr.splitlines() == [b"a print", b"fd one", b"a child", b"True"]
