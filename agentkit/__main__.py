"""``python -m agentkit``: the ``agentkit`` command (see agentkit.cli)."""

from __future__ import annotations

from agentkit.cli.entry import main

if __name__ == "__main__":
    main()
