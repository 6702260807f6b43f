"""A typed result: the main agent answers with a validated pydantic instance.

    python examples/typed_output.py

``agent.run(task, output_type=Model)`` offers the model a ``final_result`` tool whose
parameters are the model's JSON schema; a wrong answer is refused naming the failing
field and the model tries again (``output_retries``, default 2), so
``result.output`` is a ``Model`` instance, typed for mypy as ``Model | None`` (None
when the run failed). This program runs with no key and no network:
agentkit.testing.FakeOpenAIServer plays the model, getting a field wrong once.
"""

from __future__ import annotations

import tempfile

from pydantic import BaseModel

from agentkit import Agent, AgentProfile, RunResult, Settings
from agentkit.testing import FakeOpenAIServer


class Review(BaseModel):
    """A review of a file."""

    verdict: str
    score: int
    issues: list[str] = []


def review(workspace: str, settings: Settings) -> Review:
    """Review the workspace; return the typed verdict (RunFailed if there is none)."""
    with Agent(workspace=workspace, settings=settings) as agent:
        result: RunResult[Review] = agent.run("Review this project.", output_type=Review)
        checked = result.raise_for_status().output
        assert checked is not None  # a run that is done has its output
        return checked


# Sub-agents too: the profile's finish_task result is checked against Review's schema,
# and SubAgentFinished.output is a Review in this process.
REVIEWER = AgentProfile(name="reviewer", description="Reviews one file.", output_type=Review)


def main() -> int:
    script = [
        {"tool_calls": [{"name": "final_result", "arguments": {"verdict": "ok", "score": "high"}}]},
        {"tool_calls": [{"name": "final_result", "arguments": {"verdict": "ok", "score": 8}}]},
    ]
    with FakeOpenAIServer(script) as server:
        settings = Settings(
            model="fake",
            base_url=server.base_url,
            api_key="x",
            language="en",
            agent_profiles=[REVIEWER],
        )
        verdict = review(tempfile.mkdtemp(), settings)
        refusal = server.requests[1]["messages"][-1]["content"]
    print(f"{verdict.verdict} {verdict.score} | first try refused: {'score' in refusal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
