"""Which deliverables folders a created sub-agent tries (agentkit.subagent.placement):
the seed's default, then its conversation's own; a named folder alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.subagent.admission import reserved_folder, resolve_deliverables
from agentkit.subagent.placement import default_folder, folder_choices, own_folder


def test_without_a_folder_the_seed_default_comes_first_then_the_conversations_own() -> None:
    assert folder_choices(None, 1, "conv_3f2a9c1b7d4e") == (
        "sub_agent_results/agent_1",
        "sub_agent_results/conv_3f2a9c1b7d4e/agent_1",
    )
    assert folder_choices("  ", 7, "conv_a")[0] == default_folder(7) == "sub_agent_results/agent_7"
    assert folder_choices("", 2, "conv_a") == folder_choices(None, 2, "conv_a")


def test_a_named_folder_is_the_only_choice() -> None:
    assert folder_choices("docs/api", 1, "conv_a") == ("docs/api",)
    # Naming the default folder is naming it: refused, never moved, while held.
    assert folder_choices("sub_agent_results/agent_1", 1, "conv_a") == (
        "sub_agent_results/agent_1",
    )


@pytest.mark.parametrize(
    "conversation_id", ["../../etc", ".subagent", "a/b", "", ".agentkit", "x" * 500, "会话\x00"]
)
def test_the_own_folder_is_one_plain_folder_inside_sub_agent_results(
    tmp_path: Path, conversation_id: str
) -> None:
    """Whatever the conversation id, the own folder is admitted as a folder of its own:
    inside the workspace, one level below sub_agent_results, no record or state folder."""
    workspace = tmp_path.resolve()
    folder = own_folder(conversation_id, 3)
    parent, key, leaf = folder.split("/")
    assert (parent, leaf) == ("sub_agent_results", "agent_3")
    assert key and not key.startswith(".") and len(key) <= 64
    resolved = resolve_deliverables(workspace, 3, folder)
    assert resolved == (folder, workspace / folder)
    assert reserved_folder(workspace, workspace / folder) is None
