"""What a hook that prints without end costs the agent (issue 31 item 1).

Runs one PreToolUse command hook through ``HookRunner.run`` and reports how long it
took, what the hook runner said, and how much this process's peak memory (RSS) grew:

* ``yes`` (prints forever on stdout) and ``yes >&2`` (on stderr): killed at the 1 MB
  output cap (agentkit.policy.hook_process); before the cap, the same hook took the
  agent from 175 MB to 3.3 GB within a 4 s timeout;
* a hook that exits 2 with 900 KB on stderr: blocks, its reason cut to 10,000 characters.

Each case runs in a fresh child interpreter, so one case's peak does not hide the next.

Run: python benchmarks/hook_output.py [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
from agentkit.policy.hook_config import parse_hooks
from agentkit.policy.hooks import HookRunner
from agentkit.settings import Settings

command, timeout = sys.argv[1], float(sys.argv[2])
config = parse_hooks(
    {"PreToolUse": [{"hooks": [{"type": "command", "command": command, "timeout": timeout}]}]},
    "benchmark",
)
settings = Settings(model="m", api_key="k", language="en")
with tempfile.TemporaryDirectory() as folder:
    runner = HookRunner(config, workspace=Path(folder), settings=settings)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    outcome = runner.run("PreToolUse", "run_command", {"tool_input": {"command": "ls"}})
    seconds = time.perf_counter() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"seconds": seconds, "grown_mib": grown / 1024, "decision": outcome.decision,
                  "reason_chars": len(outcome.reason), "problems": outcome.problems}))
"""

CASES = {
    "yes (stdout)": "yes",
    "yes >&2 (stderr)": "yes >&2",
    "exit 2, 900 KB reason": "python3 -c \"import sys; sys.stderr.write('x'*900000); sys.exit(2)\"",
}


def main() -> None:
    """Print one row per case: seconds, peak RSS growth, decision, what was reported."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0, help="the hook's timeout (s)")
    args = parser.parse_args()
    print(f"{'case':24} {'seconds':>8} {'RSS +MiB':>9}  outcome")
    for name, command in CASES.items():
        done = subprocess.run(
            [sys.executable, "-c", CHILD, command, str(args.timeout)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        said = row["problems"][0].split(": ", 1)[-1] if row["problems"] else ""
        outcome = f"{row['decision']} ({row['reason_chars']} chars)" if row["decision"] else said
        print(f"{name:24} {row['seconds']:8.3f} {row['grown_mib']:9.1f}  {outcome}")


if __name__ == "__main__":
    main()
