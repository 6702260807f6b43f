"""Shared by the agentkit programs: settings, the typed tool, the typed sub-agent profile."""

from __future__ import annotations

import os
import tempfile
from collections import Counter

from pydantic import BaseModel, Field

from agentkit import AgentProfile, Settings, Tool, ToolContext

BASE_URL = os.environ.get("FAKE_BASE_URL", "http://127.0.0.1:8911/v1")


class WordStatsParams(BaseModel):
    text: str = Field(description="The text to analyse.")
    top_n: int = Field(3, ge=1, le=10, description="How many frequent words to return.")


def _word_stats(params: WordStatsParams, ctx: ToolContext) -> dict[str, object]:
    words = params.text.lower().split()
    return {"words": len(words), "top": Counter(words).most_common(params.top_n)}


# agents="both": the main agent and every sub-agent (workers import it as common:WORD_STATS).
WORD_STATS = Tool(
    "word_stats",
    WordStatsParams,
    _word_stats,
    description="Count the words of a text and list the most frequent ones.",
    agents="both",
)


class Finding(BaseModel):
    topic: str
    key_points: list[str]
    confidence: float = Field(ge=0, le=1)


# A sub-agent kind whose finish_task result must be a Finding (SubAgentFinished.output is one).
RESEARCHER = AgentProfile(
    name="researcher",
    description="Researches one topic and returns a Finding.",
    tools=("word_stats",),
    output_type=Finding,
)


def settings() -> Settings:
    return Settings(model="fake", base_url=BASE_URL, api_key="x", agent_profiles=[RESEARCHER])


def workspace() -> str:
    return tempfile.mkdtemp(prefix="agentkit-ws-")
