"""``agentkit chat`` as people meet it (issue 26): the terminal in tmux, piped input, the
keyless demo, and the round flags. Real subprocesses against FakeOpenAIServer (or the
demo's own scripted server); sub-agents are real worker processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from subagent_helpers import Gate, Router, call, calls, finish, wait_until, who
from test_chat_cli_servers import NO_WORKERS, SLEEPER, background

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One program in a detached tmux session of its own server (socket in tmp)."""

    def __init__(self, tmp: Path) -> None:
        self.cmd = ["tmux", "-S", str(tmp / "tmux.sock")]
        self.status = tmp / "status"

    def start(self, command: str, env: dict[str, str]) -> None:
        line = f"{command}; echo $? > {self.status}; sleep 60"
        subprocess.run(
            [*self.cmd, "new-session", "-d", "-x", "120", "-y", "50", line], env=env, check=True
        )

    def screen(self) -> str:
        args = [*self.cmd, "capture-pane", "-p", "-S", "-200"]
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.cmd, "send-keys", *keys], check=True)

    def wait_for(self, text: str, timeout: float = 40) -> str:
        """Wait until ``text`` is on the screen (lines the pane wrapped rejoined)."""
        assert wait_until(lambda: text in self.screen().replace("\n", ""), timeout), self.screen()
        return self.screen()

    def exit_code(self, timeout: float = 40) -> int:
        assert wait_until(self.status.is_file, timeout), self.screen()
        return int(self.status.read_text().strip())

    def kill(self) -> None:
        subprocess.run([*self.cmd, "kill-server"], check=False, capture_output=True)


@contextmanager
def tmux_chat(
    tmp: Path, workspace: Path, server: FakeOpenAIServer, *args: str, **extra: str
) -> Iterator[Tmux]:
    """The chat in tmux against ``server``, started (its greeting shown); ``extra``:
    more environment."""
    tmux = Tmux(tmp)
    env = cli_env(server.base_url, TERM="xterm-256color", **extra)
    tmux.start(f"{sys.executable} -m agentkit chat -w {workspace} {' '.join(args)}", env)
    try:
        tmux.wait_for("/help lists the commands")
        yield tmux
    finally:
        tmux.kill()


# ----------------------------------------------------------------- terminal
@needs_tmux
def test_all_done_only_after_background_work_and_the_way_back(
    workspace: Path, tmp_path: Path
) -> None:
    router = Router(
        main=["Plain **answer**", background(1, "Quick job"), "started it", "read its result"],
        subs={1: [finish("quick job done")]},
    )
    with FakeOpenAIServer(router) as server, tmux_chat(tmp_path, workspace, server) as tmux:
        tmux.keys("hello", "Enter")
        tmux.wait_for("Plain answer")
        time.sleep(0.5)  # what would follow the answer has had time to print
        assert "all done" not in tmux.screen()  # an answer with nothing in the background
        tmux.keys("work in the background", "Enter")
        shown = tmux.wait_for("✓ all done")
        assert shown.count("✓ all done") == 1 and "read its result" in shown
        assert "· Creating sub-agent 1 (create_sub_agent)" in shown  # words, then the tool
        tmux.keys("/quit", "Enter")
        assert tmux.exit_code() == 0
        shown = tmux.screen()
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    unwrapped = shown.replace("\n", "")  # the long line wraps at the pane's 120 columns
    assert f"continue it with: agentkit chat --continue {saved.stem} -w {workspace}" in unwrapped


@needs_tmux
def test_a_chat_left_before_anything_was_said_keeps_no_conversation(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression (a fresh user's trial): a chat left at once saved an empty
    conversation, listed it, and offered `--continue` for it. A conversation opened
    with /new and left unused is not kept either; one where something was said is, and
    leaving names it as the way back."""
    with (
        FakeOpenAIServer(["kept answer"]) as server,
        tmux_chat(tmp_path, workspace, server) as tmux,
    ):
        tmux.keys("hello", "Enter")
        tmux.wait_for("kept answer")
        tmux.keys("/new", "Enter")
        tmux.wait_for("new conversation")
        tmux.keys("/quit", "Enter")
        assert tmux.exit_code() == 0
        shown = tmux.screen().replace("\n", "")
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    assert (
        "nothing was said in this conversation, so it was not kept; continue the one before"
        f" it with: agentkit chat --continue {saved.stem} -w {workspace}"
    ) in shown  # the way back to what /new left
    assert [m["content"] for m in json.loads(saved.read_text())["messages"][1:]] == [
        "hello",
        "kept answer",
    ]


def test_piped_chat_and_demo_with_no_input_leave_nothing_behind(
    workspace: Path, tmp_path: Path
) -> None:
    """`agentkit chat </dev/null` keeps no conversation and says why; the demo's copy
    of the sample project goes too (it said it stayed, with nothing in it)."""
    env = cli_env(AGENTKIT_DEMO_LATENCY="0", TMPDIR=str(tmp_path), **NO_WORKERS)
    with FakeOpenAIServer([]) as server:
        for extra in ([], ["--demo"]):
            where = [] if extra else ["-w", str(workspace)]
            proc = subprocess.run(
                [sys.executable, "-m", "agentkit", "chat", "--jsonl", *where, *extra],
                env={**env, **({} if extra else cli_env(server.base_url, TMPDIR=str(tmp_path)))},
                cwd=REPO, input="", capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            last = proc.stderr.strip().splitlines()[-1]
            assert last == "agentkit: nothing was said in this conversation, so it was not kept"
    assert list((workspace / ".agentkit" / "conversations").glob("*.json")) == []
    assert list(tmp_path.glob("agentkit-demo-*")) == []
    assert server.requests == []


def test_piped_chat_left_after_new_names_the_conversation_kept_before(workspace: Path) -> None:
    """The JSON-lines chat's way back, as the terminal's: after /new, a conversation
    where nothing was said points to the one /new left (a review found the JSON-lines
    chat said only that nothing was kept)."""
    with FakeOpenAIServer(["kept answer"]) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace)],
            env=cli_env(server.base_url, **NO_WORKERS), cwd=REPO, input="hello\n/new\n",
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    assert proc.stderr.strip().splitlines()[-1] == (
        "agentkit: nothing was said in this conversation, so it was not kept; continue the"
        f" one before it with: agentkit chat --continue {saved.stem} -w {workspace}"
    )


@needs_tmux
def test_new_and_ctrl_d_ask_before_ending_running_subagents(
    workspace: Path, tmp_path: Path
) -> None:
    router = Router(main=[background(1, "Sleeper"), "started"], subs={1: SLEEPER})
    with FakeOpenAIServer(router) as server, tmux_chat(tmp_path, workspace, server) as tmux:
        tmux.keys("go", "Enter")
        tmux.wait_for("started")
        assert wait_until(lambda: any(who(r) == 1 for r in server.requests), 30)
        tmux.keys("/new", "Enter")
        tmux.wait_for("Start a new one? [y/N]")
        tmux.wait_for("sub-agents #1 are still running: a new conversation ends them")
        tmux.keys("n", "Enter")
        tmux.wait_for("kept: the sub-agents go on")
        tmux.keys("C-d")
        tmux.wait_for("Leave? [y/N] (Ctrl-D again: yes)")
        tmux.keys("C-d")  # the second Ctrl-D confirms
        assert tmux.exit_code() == 0
        shown = tmux.screen()
    assert "ending sub-agents #1" in shown and "sub-agents #1 ended" in shown
    saved = json.loads(next((workspace / ".agentkit" / "conversations").glob("*.json")).read_text())
    assert len(list((workspace / ".agentkit" / "conversations").glob("*.json"))) == 1  # no /new
    assert saved["subagents"][0]["status"] == "terminated"


@needs_tmux
def test_sigterm_ends_the_chat_without_inviting_another_message(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression (a new user's trial): a SIGTERM during a round with background work
    printed "Send a message to go on." and "✓ all done" as the chat was exiting."""
    import psutil

    slow = calls(call("run_command", command="sleep 60"))
    router = Router(main=[background(1, "Sleeper"), slow], subs={1: SLEEPER})
    with FakeOpenAIServer(router) as server, tmux_chat(tmp_path, workspace, server) as tmux:
        tmux.keys("go", "Enter")
        assert wait_until(lambda: any(who(r) == 1 for r in server.requests), 30)
        assert wait_until(lambda: len(server.requests) >= 3, 30)  # the main agent's sleep
        tmux.wait_for("sleep 60")
        shell = subprocess.run(
            [*tmux.cmd, "display", "-p", "#{pane_pid}"], capture_output=True, text=True
        ).stdout.strip()
        (chat,) = [
            p for p in psutil.Process(int(shell)).children() if "agentkit" in " ".join(p.cmdline())
        ]
        chat.terminate()
        assert tmux.exit_code() == 143
        shown = tmux.screen()
    assert "Round stopped." in shown and "sub-agents #1 ended" in shown
    assert "Send a message to go on" not in shown and "all done" not in shown


@needs_tmux
def test_a_message_kept_from_before_is_shown_when_the_continued_chat_sends_it(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression (a new user's trial): `--continue` sent the message a left chat had
    kept unsent without showing it, so an answer came as if unasked."""
    gate = Gate()
    # The script follows the conversation: the cancelled round left no answer, so the
    # continued chat's round gets the first reply again (released by then).
    router = Router(main=[gate.hold("the answer")])
    with FakeOpenAIServer(router) as server:
        with tmux_chat(tmp_path, workspace, server, **NO_WORKERS) as tmux:
            tmux.keys("one", "Enter")
            assert wait_until(lambda: len(server.requests) == 1, 30)
            tmux.keys("the kept message", "Enter")
            tmux.wait_for("queued (1)")
            tmux.keys("C-d")
            assert tmux.exit_code() == 0
        gate.event.set()
        (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
        again = tmp_path / "again"
        again.mkdir()
        with tmux_chat(again, workspace, server, "--continue", saved.stem, **NO_WORKERS) as tmux:
            shown = tmux.wait_for("the answer")
    assert "· sent, kept from before: the kept message" in shown
    assert shown.count("kept from before") == 1


@needs_tmux
def test_a_failed_round_names_the_dead_endpoint_and_what_to_do(
    workspace: Path, tmp_path: Path
) -> None:
    dead = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    tmux = Tmux(tmp_path)
    env = cli_env(dead, TERM="xterm-256color", **NO_WORKERS)
    tmux.start(f"{sys.executable} -m agentkit chat -w {workspace}", env)
    try:
        tmux.wait_for("/help lists the commands")
        tmux.keys("hello", "Enter")
        shown = tmux.wait_for("Check that it is running").replace("\n", "")
        assert f"The round failed: cannot reach the model server at {dead} (" in shown
        assert "connection:" not in shown  # the error kind is said in words
        tmux.keys("/quit", "Enter")
        assert tmux.exit_code() == 0
    finally:
        tmux.kill()


# -------------------------------------------------------------- JSON lines
def _run_chat(workspace: Path, env: dict[str, str], text: str, *args: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "-w", str(workspace), *args],
        env=env, cwd=REPO, input=text, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    cid = events[0]["conversation_id"]
    way_back = f"agentkit: continue it with: agentkit chat --continue {cid} -w {workspace}"
    assert proc.stderr.strip().splitlines()[-1].startswith(way_back)  # stdout stays JSON
    return events


@pytest.mark.parametrize("middle", ["bg x", "B" * 200_000], ids=["short", "longer-than-a-read"])
def test_piped_lines_read_together_are_answered_one_by_one(workspace: Path, middle: str) -> None:
    """Regression (a fresh user's trial) for the long line: a line longer than one read
    of the pipe (64 KiB) split the input in two, and the second part, read while the
    first line's round worked, joined that round unanswered."""

    def echo(request: dict[str, Any]) -> str:
        return "ok: " + request["messages"][-1]["content"][:20]

    given = f"hello\n{middle}\nthird\n"
    with FakeOpenAIServer(echo) as server:
        events = _run_chat(workspace, cli_env(server.base_url, **NO_WORKERS), given)
        bodies = list(server.requests)
    answers = [e["final_text"] for e in events if e["type"] == "RoundFinished"]
    assert answers == ["ok: hello", f"ok: {middle[:20]}", "ok: third"]  # one request each
    users = [[m["content"] for m in b["messages"] if m["role"] == "user"] for b in bodies]
    assert users == [["hello"], ["hello", middle], ["hello", middle, "third"]]


def test_max_turns_and_no_stream_reach_the_chat_s_requests(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    reads = [calls(call("read_file", path="a.txt"))] * 3
    with FakeOpenAIServer(Router(main=[*reads, "never reached"])) as server:
        events = _run_chat(
            workspace,
            cli_env(server.base_url, **NO_WORKERS),
            "read it\n",
            "--max-turns",
            "2",
            "--no-stream",
        )
        bodies = list(server.requests)
    assert len(bodies) == 2  # --max-turns 2: two model requests in the round
    assert all(not b.get("stream") for b in bodies)
    (end,) = [e for e in events if e["type"] == "RoundFinished"]
    assert end["status"] != "done"


def test_the_keyless_demo_answers_and_starts_a_background_subagent(workspace: Path) -> None:
    (workspace / "app.py").write_text("# TODO: one thing\nprint('hi')\n")
    env = cli_env(AGENTKIT_DEMO_LATENCY="0")
    events = _run_chat(workspace, env, "hello\nreview this project in the background\n", "--demo")
    ends = [e for e in events if e["type"] == "RoundFinished"]
    assert "scripted demo" in ends[0]["final_text"] and ends[0]["background"] == []
    assert "sub-agent 1" in ends[1]["final_text"]
    # The second round started sub-agent 1 in the background. With no latency it may
    # finish while that round ends: its RoundFinished lists what ran when the round's
    # result was made: CI saw [] and, after SubAgentFinished had printed, [1].
    kinds = [(e["type"], (e.get("info") or {}).get("agent_id")) for e in events]
    second = [i for i, e in enumerate(events) if e["type"] == "RoundStarted"][1]
    assert ("SubAgentStarted", 1) in kinds[second : events.index(ends[1])]
    assert ends[1]["background"] in ([1], [])
    starts = [e["trigger"] for e in events if e["type"] == "RoundStarted"]
    assert starts == ["user", "user", "notification"]
    assert "TODO: one thing" in ends[2]["final_text"]  # it read the sub-agent's findings
    findings = workspace / "sub_agent_results" / "agent_1" / "findings.md"
    assert "TODO: one thing" in findings.read_text()
    assert events[-1]["type"] == "AllWorkDone"


def test_demo_refuses_endpoint_flags_with_one_line(workspace: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "--demo", "--model", "x", "-w", str(workspace)],
        env=cli_env(), cwd=REPO, input="", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == "agentkit: --demo brings its own model: drop --model"


def test_no_way_back_is_offered_for_a_conversation_that_could_not_be_saved(
    workspace: Path,
) -> None:
    """Regression (a new user's trial, on a read-only workspace): the chat printed
    `continue it with: agentkit chat --continue ID`, and that command then found no
    saved conversation. Here `.agentkit` is a file, so nothing can be saved."""
    (workspace / ".agentkit").write_text("not a folder\n")
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "-w", str(workspace), "--demo"],
        env=cli_env(AGENTKIT_DEMO_LATENCY="0", **NO_WORKERS), cwd=REPO, input="hello\n",
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    (end,) = [e for e in map(json.loads, proc.stdout.splitlines()) if e["type"] == "RoundFinished"]
    assert end["status"] == "failed" and "could not be saved" in end["error"]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("agentkit: nothing to continue: the conversation could not be saved")
    assert "--continue" not in last


def test_chat_checks_the_endpoint_at_start_as_serve_does(workspace: Path) -> None:
    """Regression (issue 35): `agentkit chat` said nothing of a dead endpoint until the
    first message failed; it now checks it at start, in serve's words."""

    def chat(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace), *extra],
            env=env, cwd=REPO, input="", capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    dead = chat(cli_env("http://127.0.0.1:9/v1", **NO_WORKERS))
    assert dead.returncode == 0, dead.stderr
    assert "agentkit: model endpoint: cannot reach the model endpoint http://127.0.0.1:9/v1" in (
        dead.stderr
    )
    with FakeOpenAIServer(Router(main=[]), models=["other-model"]) as server:
        unlisted = chat(cli_env(server.base_url, **NO_WORKERS))
        listed = chat(cli_env(server.base_url, AGENTKIT_MODEL="other-model", **NO_WORKERS))
    assert "does not list the model 'fake-model'" in unlisted.stderr
    assert "model endpoint" not in listed.stderr
    demo = chat(cli_env(AGENTKIT_DEMO_LATENCY="0", **NO_WORKERS), "--demo")
    assert demo.returncode == 0 and "model endpoint" not in demo.stderr


def test_a_demo_copy_is_said_at_exit_and_swept_a_day_later(tmp_path: Path) -> None:
    """Regression (issue 35): each `chat --demo` left a copy in the temp folder, and
    nothing said so. It says where and how to remove it; old copies go at the next start."""
    from agentkit.cli.demo_copies import MARKER

    env = cli_env(AGENTKIT_DEMO_LATENCY="0", TMPDIR=str(tmp_path), **NO_WORKERS)

    def demo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", "--demo"],
            env=env, cwd=REPO, input="hello\n", capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    first = demo()
    assert first.returncode == 0, first.stderr
    (copy,) = tmp_path.glob("agentkit-demo-*")
    said = first.stderr.strip().splitlines()[-1]
    assert said.startswith(f"agentkit: the demo's copy of the sample project stays in {copy}")
    assert f"rm -rf {copy}" in said
    stale = time.time() - 2 * 24 * 3600
    os.utime(copy / MARKER, (stale, stale))
    for saved in (copy / "inventory-project" / ".agentkit" / "conversations").rglob("*"):
        os.utime(saved, (stale, stale))
    os.utime(copy / "inventory-project" / ".agentkit" / "conversations", (stale, stale))
    assert demo().returncode == 0
    (second,) = tmp_path.glob("agentkit-demo-*")  # the old one swept, the new one kept
    assert second != copy and not copy.exists()
