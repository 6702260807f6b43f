"""``python -m agentkit``: the ``agentkit`` command (see agentkit.cli)."""

from __future__ import annotations

import sys

from agentkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
