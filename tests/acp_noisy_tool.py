"""A tool that writes to standard output (tests/integration/test_acp.py): under ``agentkit acp`` that
must land in the log, never in the protocol stream, whether the main agent or a
sub-agent's worker process runs it."""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel


class NoisyParams(BaseModel):
    """Where the noise comes from."""

    text: str


def noisy(p: NoisyParams) -> str:
    """Print to stdout three ways (print, sys.stdout, file descriptor 1), then answer."""
    print(f"print from {p.text}")
    sys.stdout.write('{"jsonrpc": "2.0", "method": "garbage"}\n')
    sys.stdout.flush()
    os.write(1, b"raw bytes on fd 1 \xff\n")
    return f"made noise in {p.text}"
