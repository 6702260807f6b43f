"""What command_deny / command_allow do NOT stop (hardening item 11).

The lists match the words a command line starts with; they steer a model's habits and
are no security boundary (README "Security"). These tests pin the plain cases that are
caught and record evasions that are not, so that nobody later takes the lists for
confinement. If the parser ever catches one of the evasions, move it to the caught list
and keep the README honest: shell can build any command at run time, so the list of
evasions never ends; the command sandbox (planned) is the boundary.
"""

from __future__ import annotations

import pytest

from agentkit.errors import ToolError
from agentkit.tools.shell._policy import check_policy


def blocked(command: str, allow: list[str], deny: list[str]) -> bool:
    try:
        check_policy(command, allow, deny)
    except ToolError as exc:
        assert exc.code == "blocked_command"
        return True
    return False


@pytest.mark.parametrize("command", ["rm -rf x", "ls; rm x", "/bin/rm x", "echo $(rm x)"])
def test_deny_list_catches_the_plain_forms(command: str) -> None:
    assert blocked(command, [], ["rm"])


@pytest.mark.parametrize(
    "command",
    [
        "sh -c 'rm -rf x'",
        "eval 'rm x'",
        "X=rm; $X -rf x",
        "$(echo rm) x",
        "env rm x",
        "echo x | xargs rm",
        "find . -name x -exec rm {} +",
        "python3 -c 'import os; os.remove(\"x\")'",
    ],
)
def test_deny_list_is_not_a_boundary(command: str) -> None:
    assert not blocked(command, [], ["rm"])


@pytest.mark.parametrize("command", ['ls "$(rm -rf x)"', "ls <(rm -rf x)"])
def test_allow_list_is_not_a_boundary(command: str) -> None:
    assert not blocked(command, ["ls"], [])
    assert blocked("rm -rf x", ["ls"], [])
