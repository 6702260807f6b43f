"""The command line's one set of options (issue 35): every command that runs an agent
has every shared option, a mistyped option or command gets "did you mean", the help
groups the commands, the error messages suggest only what the command accepts, ACP's
refusal names --model and --demo, and the live sub-agent table keeps its id, status,
runtime and last action at 80 and 100 columns. In-process: the parser and the
renderers, no subprocess."""

from __future__ import annotations

import argparse
import asyncio
import io
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentkit.cli import build_parser, main
from agentkit.cli.common import (
    AGENT_COMMANDS,
    UsageError,
    check_cli_settings,
    make_settings,
    settings_from_args,
)
from agentkit.cli.guide import GROUPS, NEW_HERE, option_hint
from agentkit.cli.progress import LiveDisplay

SHARED = (
    "-w",
    "--workspace",
    "--model",
    "--base-url",
    "--api-key",
    "--lang",
    "--demo",
    "--local",
    "--log-level",
    "--subagent-control",
    "--subagent-isolation",
)


def command_parser(name: str) -> argparse.ArgumentParser:
    commands = getattr(build_parser(), "commands", None)
    assert commands is not None
    return commands[name]


def options_of(name: str) -> set[str]:
    return {o for a in command_parser(name)._actions for o in a.option_strings}


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_every_agent_command_has_every_shared_option(command: str) -> None:
    options = options_of(command)
    assert set(SHARED) <= options, sorted(set(SHARED) - options)
    # --yes where someone is asked about tool calls: the terminal, the editor.
    assert ("--yes" in options) == (command in ("run", "chat", "serve", "acp"))


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_the_shared_options_parse_alike_on_every_agent_command(command: str) -> None:
    words = [command, "-w", "/tmp", "--lang", "en", "--log-level", "debug", "--demo"]
    words += ["--subagent-control", "--subagent-isolation", "available"]
    words += ["a task"] if command == "run" else []
    args = build_parser().parse_args(words)
    assert (args.workspace, args.lang, args.log_level, args.demo) == ("/tmp", "en", "debug", True)
    assert args.subagent_control is True and args.local is False
    assert args.subagent_isolation == "available"
    assert settings_from_args(args).subagent_isolation == "available"


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_the_endpoint_errors_suggest_only_flags_the_command_accepts(command: str) -> None:
    options = options_of(command)
    for settings in (make_settings({"model": None}), make_settings({"model": "m"})):
        settings = settings.model_copy(update={"api_key": None, "base_url": None})
        with pytest.raises(UsageError) as caught:
            check_cli_settings(settings)
        named = {w.strip("(),;:") for w in str(caught.value).split() if w.startswith(("--", "(--"))}
        assert named and named <= options, (command, named - options)


def test_a_mistyped_option_gets_did_you_mean_with_the_command_s_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["chat", "--modle", "gpt"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: agentkit chat")  # the command's usage, not the top level's
    assert err.rstrip().endswith(
        "agentkit chat: error: unrecognized arguments: --modle gpt; did you mean --model?"
    )
    with pytest.raises(SystemExit):
        main(["serve", "--locl"])
    assert "did you mean --local?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "task", "--base-ulr=http://x"])
    assert "did you mean --base-url?" in capsys.readouterr().err


NUMBERS = [
    (["serve", "--port", "99999"], "argument --port: must be from 0 to 65535 (got 99999)"),
    (["serve", "--port", "-1"], "argument --port: must be from 0 to 65535 (got -1)"),
    (["serve", "--port", "abc"], "argument --port: invalid int value: 'abc'"),
    *(
        ([command, *task, "--max-turns", value], f"argument --max-turns: must be from 1 to {top}")
        for command, task in [("run", ["hi"]), ("chat", []), ("serve", []), ("acp", [])]
        for value, top in [("0", "1000000 (got 0)"), ("1" + "0" * 20, "1000000 (got 1000")]
    ),
]


@pytest.mark.parametrize(("argv", "message"), NUMBERS)
def test_a_number_flag_out_of_range_is_a_usage_error_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A trial's `agentkit serve --port 99999` ended with "internal error: OverflowError".
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_number_flags_in_range_parse_and_match_the_settings_bound() -> None:
    from agentkit.cli.common import MAX_TURNS
    from agentkit.settings._types import MAX_COUNT

    assert MAX_TURNS == MAX_COUNT
    args = build_parser().parse_args(["serve", "--port", "0", "--max-turns", str(MAX_COUNT)])
    assert (args.port, args.max_turns) == (0, MAX_COUNT)
    assert build_parser().parse_args(["serve", "--port", "65535"]).port == 65535


def test_option_hint_suggests_only_close_options() -> None:
    known = ["--model", "--max-turns", "--demo", "-w"]
    assert option_hint(["--modle"], known) == "; did you mean --model?"
    assert option_hint(["--dmeo", "--max-turn"], known) == "; did you mean --demo or --max-turns?"
    assert option_hint(["--zzzzzz", "task"], known) == ""  # nothing close; not an option


def test_a_mistyped_command_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctr"]) == 2
    assert "unknown command 'doctr'; did you mean 'doctor'?" in capsys.readouterr().err


def test_help_starts_with_new_here_and_groups_the_commands() -> None:
    text = build_parser().format_help()
    assert text.splitlines()[0] == NEW_HERE == "New here? agentkit chat --demo"
    titles = [text.index(f"\n{title}:\n") for title, _ in GROUPS]
    assert titles == sorted(titles)  # Start, Inspect, Configure, in that order
    expected = {
        "Start": ["chat", "serve", "acp", "run", "demo"],
        "Inspect": ["conversations", "show", "transcript"],
        "Configure": ["profiles", "skills", "doctor", "help"],
    }
    for title, names in expected.items():
        block = text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in block.splitlines()] == names
    assert "{chat," not in text  # argparse's own unordered list is gone


# ------------------------------------------------------------------ ACP refusal
def test_acp_refusal_names_model_and_demo() -> None:
    pytest.importorskip("acp")
    from agentkit.cli.acp import refusal

    no_model = refusal(make_settings({"model": None}))
    assert no_model is not None and "--model" in no_model and "--demo" in no_model
    settings = make_settings({"model": "m"}).model_copy(update={"api_key": None, "base_url": None})
    no_key = refusal(settings)
    assert no_key is not None and "--api-key" in no_key and "--demo" in no_key
    assert refusal(make_settings({"model": "m", "api_key": "k"})) is None


# ------------------------------------------------------------------ live table
def table_text(width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    view = LiveDisplay(console)
    now = time.monotonic()
    rows: dict[int, tuple[dict[str, Any], float]] = {
        7: ({"agent_id": 7, "summary": "Collect the TODO and FIXME notes of the whole project",
             "status": "completed", "runtime_seconds": 3725, "tokens": 123456, "cost_usd": 0.5,
             "last_action": "writing sub_agent_results/agent_7/findings.md with every note"}, now),
        123: ({"agent_id": 123, "summary": "Measure", "status": "timeout",
               "runtime_seconds": 65, "last_action": "running wc -l"}, now),
    }  # fmt: skip
    console.print(view._table(sorted(rows.items())))
    text: str = console.file.getvalue()  # type: ignore[attr-defined]
    return text


@pytest.mark.parametrize("width", [80, 100])
def test_the_live_table_keeps_id_status_runtime_and_last_action(width: int) -> None:
    text = table_text(width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    header = next(line for line in lines if " id " in line)
    for name in ("id", "status", "runtime", "last action"):
        assert f" {name} " in header, header
    assert "…" not in header  # no header cut to "st…"
    row_7 = next(line for line in lines if " 7 │" in line)
    assert " done " in row_7 and "1h02m" in row_7 and "writing" in row_7
    row_123 = next(line for line in lines if "│123 │" in line)
    assert "timed out" in row_123 and "1m05s" in row_123 and "running wc -l" in row_123


def test_the_wide_live_table_shows_the_counters_too() -> None:
    header = next(line for line in table_text(140).splitlines() if " id " in line)
    for name in ("files", "searches", "web", "cmds", "tokens", "cost", "last action"):
        assert f" {name} " in header, header


def test_acp_w_makes_one_folder_every_session_s_workspace(tmp_path: Path) -> None:
    pytest.importorskip("acp")
    from agentkit.acp.agent import AcpAgent

    chosen, other = tmp_path / "chosen", tmp_path / "other"
    chosen.mkdir()
    other.mkdir()
    settings = make_settings({"model": "m", "api_key": "k"})

    def initialized(agent: AcpAgent) -> AcpAgent:
        asyncio.run(agent.initialize(protocol_version=1))  # session requests come after it
        return agent

    agent = initialized(AcpAgent(settings, workspace=chosen.resolve()))
    opened = agent._workspace(str(other))
    try:
        assert opened.path == chosen.resolve()
    finally:
        opened.close()
    plain = initialized(AcpAgent(settings))._workspace(str(other))
    try:
        assert plain.path == other.resolve()
    finally:
        plain.close()


# ------------------------------------------------------------------ doctor
@pytest.mark.parametrize(
    ("platform", "words"),
    [("darwin", "macOS: no bubblewrap sandbox"), ("win32", "Windows: no bubblewrap sandbox")],
)
def test_doctor_says_what_is_missing_off_linux(
    monkeypatch: pytest.MonkeyPatch, platform: str, words: str
) -> None:
    from agentkit.cli.doctor import Check, _system, render

    monkeypatch.setattr("sys.platform", platform)
    found = _system()
    assert found.state == "warning" and found.text.startswith(words)
    assert "no pid namespaces" in found.text and "environment mark" in found.text
    report = render([found, Check("Endpoint", "ok", "m at x: reachable", essential=True)], 80)
    assert max(len(line) for line in report.splitlines()) <= 80
    assert report.endswith("the essentials are there")
