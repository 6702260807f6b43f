"""Run the main agent on one task and fail loudly when the run does not succeed.

    OPENAI_API_KEY=sk-... python examples/quickstart.py ./my_project

The endpoint and model come from the environment (OPENAI_BASE_URL, AGENTKIT_MODEL) or
the defaults below. A run that fails (a model error after retries, a spent budget) or
is cancelled raises RunFailed from ``raise_for_status()``; ``kind`` says why.
"""

from __future__ import annotations

import sys

from agentkit import Agent, AgentkitError, RunFailed, RunResult, Settings


def run_task(workspace: str, task: str) -> RunResult:
    """Run ``task`` in ``workspace`` to the end; raise RunFailed unless it is done."""
    settings = Settings(model="gpt-4o-mini", language="en")
    with Agent(workspace=workspace, settings=settings) as agent:
        return agent.run(task).raise_for_status()


def main(argv: list[str]) -> int:
    workspace = argv[1] if len(argv) > 1 else "."
    try:
        result = run_task(workspace, "List the TODO comments and write them to TODO.md")
    except RunFailed as exc:
        print(f"the run failed ({exc.kind}): {exc.message}", file=sys.stderr)
        if exc.result is not None:
            print(f"transcript: {exc.result.transcript_path}", file=sys.stderr)
        return 1
    except AgentkitError as exc:  # a configuration problem: no model, no key...
        print(f"agentkit: {exc}", file=sys.stderr)
        return 2
    print(result.final_text or "")
    usage: dict[str, object] = result.stats.get("token_usage", {})
    print(f"status {result.status}, tokens {usage}, transcript {result.transcript_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
