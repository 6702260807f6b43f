"""Program 4: one typed tool for the main agent and the sub-agents; a typed sub-agent result.

word_stats and the researcher profile (output_type=Finding) are in common.py.
"""

from __future__ import annotations

from common import WORD_STATS, Finding, settings, workspace

from agentkit import Agent, Event, SubAgentFinished

findings: list[Finding] = []


def collect(event: Event) -> None:
    if isinstance(event, SubAgentFinished) and isinstance(event.output, Finding):
        findings.append(event.output)  # validated in this process: a Finding, not JSON


with Agent(workspace(), settings(), tools=[WORD_STATS]) as agent:
    result = agent.run("Research alpha and beta with the researcher profile.", on_event=collect)
    print(result.final_text)
for finding in findings:
    print(type(finding).__name__, finding.topic, finding.confidence, finding.key_points)
assert {f.topic for f in findings} == {"alpha", "beta"}
