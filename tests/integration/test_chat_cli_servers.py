"""``agentkit chat`` as a real subprocess against FakeOpenAIServer.

The JSON-lines tests drive a conversation line by line, as a script would: write a
line, read events until the round ends, write the next. Sub-agents are real worker
processes; the ones that must stay busy run ``sleep`` (found afterwards by their
process mark) or wait on a Gate in the fake model. The terminal test drives the
real program in tmux.
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from shell_helpers import sleep_marks
from subagent_helpers import (
    Gate,
    Router,
    call,
    calls,
    finish,
    no_process_left,
    wait_until,
    who,
)

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

Event = dict[str, Any]


class JsonlChat:
    """``agentkit chat --jsonl`` as a subprocess: write lines, read JSON objects."""

    def __init__(self, workspace: Path, env: dict[str, str], *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace), *extra],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.seen: list[Event] = []
        self._taken: set[int] = set()  # indexes in seen that take() returned
        self.raw: list[str] = []
        self._items: queue.Queue[Event | None] = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._err_reader = threading.Thread(
            target=lambda: self._err.extend(self.proc.stderr or []), daemon=True
        )
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self._items.put(json.loads(line))  # stdout must stay valid JSON lines
        self._items.put(None)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, match: Callable[[Event], bool], timeout: float = 60) -> list[Event]:
        """Read objects until one matches; return those read (the match last)."""
        got: list[Event] = []
        deadline = time.monotonic() + timeout
        while True:
            item = self._items.get(timeout=max(0.01, deadline - time.monotonic()))
            assert item is not None, f"output ended before a match: {got}"
            self.seen.append(item)
            got.append(item)
            if match(item):
                return got

    def take(self, kind: str, timeout: float = 60) -> Event:
        """The first event of type ``kind`` not taken yet: one read already (a background
        sub-agent's may come before the round's end a test waited for first), else the
        next one read."""
        for index, event in enumerate(self.seen):
            if event["type"] == kind and index not in self._taken:
                self._taken.add(index)
                return event
        self.until(lambda e: e["type"] == kind, timeout)
        self._taken.add(len(self.seen) - 1)
        return self.seen[-1]

    def round_end(self) -> Event:
        return self.until(lambda e: e["type"] == "RoundFinished")[-1]

    def command(self, line: str) -> Event:
        self.send(line)
        return self.until(lambda e: e["type"] in ("CommandResult", "Error"))[-1]

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Close standard input, read the rest, return (exit code, stderr)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        while (item := self._items.get(timeout=timeout)) is not None:
            self.seen.append(item)
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> tuple[int, str]:
        """Wait for the exit; return (exit code, stderr)."""
        code = self.proc.wait(timeout)
        self._err_reader.join(10)
        return code, "".join(self._err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


def main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) is None]


def background(agent_id: int, summary: str) -> dict[str, Any]:
    return calls(
        call(
            "create_sub_agent",
            agent_id=agent_id,
            summary=summary,
            task="do the work",
            run_in_background=True,
        )
    )


SLEEPER = [calls(call("run_command", command="sleep 60")), finish()]
# For a chat that starts no sub-agent: workers would start by spawn, so the chat does
# not start and preload the worker process server beside it (a second of CPU each).
NO_WORKERS = {"AGENTKIT_SUBAGENT_START_METHOD": "spawn"}


# ------------------------------------------------------------- JSON lines
def test_rounds_around_background_subagents_and_end_of_input(workspace: Path) -> None:
    first, second = Gate(), Gate()
    summary = "已读完资料，结论写入 report.md。"
    router = Router(
        main=[
            background(1, "后台任务"),
            "started one",
            "second answer while #1 works",
            "read the result of #1",
            background(2, "another"),
            "started two",
            "read the result of #2",
        ],
        subs={1: [first.hold(finish(summary))], 2: [second.hold(finish("two done"))]},
    )
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url, AGENTKIT_LANGUAGE="zh"))
        try:
            chat.send("start the work")
            end = chat.round_end()
            assert end["final_text"] == "started one" and end["background"] == [1]
            # The user's second message is answered while #1 still works.
            chat.send("what now?")
            end = chat.round_end()
            assert end["final_text"] == "second answer while #1 works"
            assert end["background"] == [1]
            assert of_type(chat.seen, "AllWorkDone") == []

            # #1 completes between rounds: a round starts by itself with the user template.
            first.event.set()
            got = chat.until(lambda e: e["type"] == "RoundFinished")
            (started,) = of_type(got, "RoundStarted")
            assert started["trigger"] == "notification"
            (done,) = of_type(got, "SubAgentFinished")
            expected = (
                f"子智能体1 (后台任务) 已完成任务。\n\n{summary}\n\n"
                f"交付目录：{done['info']['deliverables_dir']}"
            )
            (note,) = of_type(got, "Notification")
            assert note["role"] == "user" and note["text"] == expected
            request = main_requests(server)[-1]
            assert request["messages"][-1] == {"role": "user", "content": expected}
            assert got[-1]["final_text"] == "read the result of #1"
            if not of_type(got, "AllWorkDone"):  # it may come just before RoundFinished
                chat.until(lambda e: e["type"] == "AllWorkDone")

            # End of input while #2 works: the chat waits for it and its round.
            chat.send("one more")
            assert chat.round_end()["background"] == [2]
            assert chat.proc.stdin is not None
            chat.proc.stdin.close()
            time.sleep(1.0)
            assert chat.proc.poll() is None, "the chat left before its sub-agent ended"
            second.event.set()
            code, err = chat.finish()
        finally:
            first.event.set()
            second.event.set()
            chat.kill()
    assert code == 0, err
    rounds = of_type(chat.seen, "RoundFinished")
    assert rounds[-1]["final_text"] == "read the result of #2"
    assert of_type(chat.seen, "RoundStarted")[-1]["trigger"] == "notification"
    assert all(e["seq"] > 0 for e in chat.seen if "seq" in e)


def test_message_sent_during_a_round_is_queued_after_the_tool_results(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    gate = Gate()
    router = Router(main=[gate.hold(calls(call("read_file", path="a.txt"))), "answered both"])
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url, **NO_WORKERS))
        try:
            chat.send("read a.txt")
            chat.until(lambda e: e["type"] == "RoundStarted")
            chat.send("and also say hello")  # the model's request is still held
            queued = chat.until(lambda e: e["type"] == "MessageQueued")[-1]
            assert queued["text"] == "and also say hello" and queued["position"] == 1
            gate.event.set()
            got = chat.until(lambda e: e["type"] == "RoundFinished")
            code, err = chat.finish()
        finally:
            gate.event.set()
            chat.kill()
    assert code == 0, err
    assert got[-1]["final_text"] == "answered both"
    assert [e["text"] for e in of_type(got, "UserMessage") if e["queued"]] == ["and also say hello"]
    messages = main_requests(server)[1]["messages"]
    assert messages[-2]["role"] == "tool" and "alpha" in messages[-2]["content"]
    assert messages[-1] == {"role": "user", "content": "and also say hello"}
    assert len(of_type(chat.seen, "RoundStarted")) == 1  # one round answered both


def test_quit_says_how_many_queued_messages_it_leaves_unsent(workspace: Path) -> None:
    # /quit leaves at once; a trial saw it drop queued messages without a word.
    gate = Gate()
    router = Router(main=[gate.hold("first answer"), "later"])
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url, **NO_WORKERS))
        try:
            chat.send("one")
            chat.until(lambda e: e["type"] == "RoundStarted")
            chat.send("two")
            chat.until(lambda e: e["type"] == "MessageQueued")
            result = chat.command("/quit")
            gate.event.set()
            code, err = chat.wait()
        finally:
            gate.event.set()
            chat.kill()
        assert code == 0, err
        assert result["unsent"] == 1 and "1 queued message not sent yet: kept" in result["text"]
        # Kept, as it says: continuing the conversation sends it.
        before = main_requests(server)
        conversation_id = next(e["conversation_id"] for e in chat.seen if e.get("conversation_id"))
        env = cli_env(server.base_url, **NO_WORKERS)
        again = JsonlChat(workspace, env, "--continue", conversation_id)
        try:
            again.until(lambda e: e["type"] == "RoundFinished")
            again.command("/quit")
            again.wait()
        finally:
            again.kill()
    two = {"role": "user", "content": "two"}
    assert not any(two in r["messages"] for r in before)  # left unsent...
    after = main_requests(server)[len(before) :]
    assert after and two in after[-1]["messages"]  # ...then sent by the next opening


def test_a_double_slash_sends_a_message_that_starts_with_a_slash(workspace: Path) -> None:
    with FakeOpenAIServer(["a path", "no command"]) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url, **NO_WORKERS))
        try:
            chat.send("//etc/hosts: what is it?")
            chat.round_end()
            error = chat.command("/etc/hosts: what is it?")
            long_line = "/bogus " + "x" * 200_000  # quoted back capped, not whole
            long_error = chat.command(long_line)
            chat.send("/ /")
            code, err = chat.finish()
        finally:
            chat.kill()
    assert code == 0, err
    assert error["type"] == "Error" and "unknown command /etc/hosts" in error["message"]
    assert error["input"] == "/etc/hosts: what is it?"
    assert long_error["type"] == "Error" and len(long_error["message"]) < 2000
    assert long_error["input"] == long_line[:1000] + "… (200,007 characters in all)"
    sent = main_requests(server)[0]["messages"][-1]
    assert sent == {"role": "user", "content": "/etc/hosts: what is it?"}
    assert len(main_requests(server)) == 1  # "/..." lines never reached the model


def test_commands_new_switch_stop_list_and_errors(workspace: Path) -> None:
    router = Router(
        main=[background(1, "Sleeper one"), "started", background(2, "Sleeper two"), "again"],
        subs={1: SLEEPER, 2: SLEEPER},
    )
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url))
        try:
            pid = chat.proc.pid
            chat.send("go A")
            end = chat.round_end()
            conv_a = end["conversation_id"]
            assert end["background"] == [1]
            assert wait_until(lambda: len(sleep_marks(pid)) == 1)
            (mark_a,) = sleep_marks(pid)

            listed = chat.command("/list")
            assert listed["ok"] and [c["id"] for c in listed["conversations"]] == [conv_a]

            new = chat.command("/new")
            assert new["ok"] and new["left"] == conv_a and new["subagents_ended"] == [1]
            assert new["conversation_id"] != conv_a
            assert wait_until(lambda: no_process_left(mark_a))
            ended = of_type(chat.seen, "SubAgentFinished")
            assert [e["info"]["status"] for e in ended] == ["terminated"]
            assert ended[0]["conversation_id"] == conv_a

            chat.send("go B")
            end = chat.round_end()
            conv_b = end["conversation_id"]
            assert conv_b == new["conversation_id"] and end["background"] == [1]
            assert wait_until(lambda: len(sleep_marks(pid)) == 1)
            (mark_b,) = sleep_marks(pid)
            stop = chat.command("/stop 1")
            assert stop["ok"] and stop["result"]["success"] is True
            assert wait_until(lambda: no_process_left(mark_b))
            # The conversation shows the stop as it shows any end (issue 35) ...
            (told,) = of_type(chat.seen, "Notification")  # said before the command's result
            assert told["agent_ids"] == [1] and "Stopped by the user" in told["text"]
            again = chat.command("/stop 1")
            assert again["ok"] is False and again["result"]["success"] is False

            chat.send("more work")
            assert chat.round_end()["background"] == [2]
            # ... and the model gets the seed's notification at its next request.
            asked = next(r for r in main_requests(server) if "more work" in str(r["messages"]))
            notes = [m["content"] for m in asked["messages"] if m["role"] == "system"]
            assert told["text"] in notes
            assert wait_until(lambda: len(sleep_marks(pid)) == 1)
            (mark_b2,) = sleep_marks(pid)
            status = chat.command("/status")
            assert [(r["agent_id"], r["status"]) for r in status["subagents"]] == [
                (1, "terminated"),
                (2, "running"),
            ]
            switched = chat.command(f"/switch {conv_a}")
            assert switched["ok"] and switched["conversation_id"] == conv_a
            assert switched["subagents_ended"] == [2]
            assert wait_until(lambda: no_process_left(mark_b2))

            for bad in ("/switch conv_nope", "/bogus", "/stop x", "/show 9", "/rename"):
                error = chat.command(bad)
                assert error["type"] == "Error" and error["message"], bad
            listed = chat.command("/list")
            assert {c["id"] for c in listed["conversations"]} == {conv_a, conv_b}
            assert listed["current"] == conv_a
            chat.send("/quit")
            code, err = chat.finish()
        finally:
            chat.kill()
    assert code == 0, err
    assert "Traceback" not in err


def test_show_renders_a_subagent_transcript(workspace: Path) -> None:
    router = Router(
        main=[background(1, "Quick one"), "started", "read it"],
        subs={1: [finish("quick result here")]},
    )
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url))
        try:
            chat.send("go")
            chat.until(lambda e: e["type"] == "AllWorkDone")
            shown = chat.command("/show 1")
            whole = chat.command("/show 1 --system")
            code, err = chat.finish()
        finally:
            chat.kill()
    assert code == 0, err
    assert shown["ok"] and shown["path"].endswith("conversations.json")
    text = shown["text"]
    assert text.startswith("sub-agent #1: Quick one") and "quick result here" in text
    # Task, status, result and tool calls first; the system prompt one line (issue 35).
    head = text.split("\n[system]")[0]
    assert "status: completed" in head and "tool calls: finish_task" in head
    assert "/show 1 --system shows it" in text, text
    assert len(whole["text"]) > len(text) + 500  # the system prompt, whole


def test_sigterm_ends_subagents_and_saves(workspace: Path) -> None:
    router = Router(main=[background(1, "Sleeper"), "started"], subs={1: SLEEPER})
    with FakeOpenAIServer(router) as server:
        chat = JsonlChat(workspace, cli_env(server.base_url))
        try:
            chat.send("go")
            chat.round_end()
            assert wait_until(lambda: len(sleep_marks(chat.proc.pid)) == 1)
            (mark,) = sleep_marks(chat.proc.pid)
            chat.proc.send_signal(signal.SIGTERM)
            _, err = chat.wait()
        finally:
            chat.kill()
    assert chat.proc.returncode == 143, err
    assert wait_until(lambda: no_process_left(mark))
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    (row,) = json.loads(saved.read_text())["subagents"]
    assert row["status"] == "terminated"


def test_usage_errors_exit_2_with_one_line(workspace: Path, tmp_path: Path) -> None:
    env = cli_env("http://127.0.0.1:9/v1")
    for args in (["-w", str(tmp_path / "missing")], ["--continue", "conv_nope"]):
        proc = subprocess.run(
            [sys.executable, "-m", "agentkit", "chat", "--jsonl", *args],
            env=env,
            cwd=workspace,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("agentkit: "), proc.stderr
        assert proc.stdout == ""


# ----------------------------------------------------------------- terminal
@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)
def test_terminal_chat_in_tmux(workspace: Path, tmp_path: Path) -> None:
    socket_path = str(tmp_path / "tmux.sock")
    status_file = tmp_path / "status"
    tmux = ["tmux", "-S", socket_path]

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False
        ).stdout

    router = Router(main=["Hello **from the model**\n\n- first point\n- second point"])
    with FakeOpenAIServer(router) as server:
        env = cli_env(server.base_url, TERM="xterm-256color", **NO_WORKERS)
        command = (
            f"{sys.executable} -m agentkit chat -w {workspace}; echo $? > {status_file}; sleep 60"
        )
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "120", "-y", "40", command],
            env=env,
            check=True,
        )
        try:
            assert wait_until(lambda: "/help lists the commands" in screen(), 30), screen()
            subprocess.run([*tmux, "send-keys", "hello there", "Enter"], check=True)
            # The rendered answer, once the status line's streaming preview (raw text,
            # "answer: …Hello **from…") has gone.
            assert wait_until(
                lambda: "• first point" in (now := screen()) and "answer: …" not in now, 30
            ), screen()
            shown = screen()
            assert "all done" not in shown  # said only after background work
            assert "from the model" in shown and "**" not in shown  # rendered as Markdown
            assert "• first point" in shown
            subprocess.run([*tmux, "send-keys", "/quit", "Enter"], check=True)
            assert wait_until(status_file.is_file, 30), screen()
            assert status_file.read_text().strip() == "0"
            assert "left: conversation conv_" in screen()
            assert "continue it with: agentkit chat --continue conv_" in screen()
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    assert json.loads(saved.read_text())["messages"][-1]["content"].startswith("Hello")


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)
def test_terminal_chat_takes_a_paste_sent_as_keys_and_ctrl_d_counts_unsent(
    workspace: Path, tmp_path: Path
) -> None:
    # A trial: a 100 KB paste the terminal did not bracket froze the chat for 41 s;
    # and leaving with Ctrl-D dropped queued messages without a word.
    socket_path = str(tmp_path / "tmux.sock")
    status_file = tmp_path / "status"
    tmux = ["tmux", "-S", socket_path]
    pasted = "all of this was pasted " * 4500  # ~100 KB on one line

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False
        ).stdout

    gate = Gate()
    router = Router(main=["got the paste", gate.hold("late answer")])
    with FakeOpenAIServer(router) as server:
        env = cli_env(server.base_url, TERM="xterm-256color", **NO_WORKERS)
        command = (
            f"{sys.executable} -m agentkit chat -w {workspace}; echo $? > {status_file}; sleep 60"
        )
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "120", "-y", "40", command], env=env, check=True
        )
        try:
            assert wait_until(lambda: "/help lists the commands" in screen(), 30), screen()
            (tmp_path / "paste.txt").write_text(pasted)
            subprocess.run([*tmux, "load-buffer", str(tmp_path / "paste.txt")], check=True)
            subprocess.run([*tmux, "paste-buffer", "-d"], check=True)  # as keys: no -p
            subprocess.run([*tmux, "send-keys", "Enter"], check=True)
            assert wait_until(lambda: "got the paste" in screen(), 90), screen()[-600:]
            subprocess.run([*tmux, "send-keys", "one", "Enter"], check=True)
            assert wait_until(lambda: len(main_requests(server)) == 2, 30)
            subprocess.run([*tmux, "send-keys", "two", "Enter"], check=True)
            # "two" queued: said after it ("one" may have been queued too, when "got the
            # paste" was seen in the status line's preview; Ctrl-D then followed "two" at
            # once, and the chat did not leave: 1 run in 3 under load).
            assert wait_until(
                lambda: "› two" in (now := screen()) and "queued (1)" in now.split("› two")[-1], 30
            ), screen()
            subprocess.run([*tmux, "send-keys", "C-d"], check=True)
            assert wait_until(status_file.is_file, 30), screen()
            gate.event.set()
            assert status_file.read_text().strip() == "0"
            # Spaces left out: tmux drops the one where the line wraps (the path's length).
            unwrapped = "".join(screen().split())
            assert "1queuedmessagenotsentyet:kept" in unwrapped, screen()[-900:]
        finally:
            gate.event.set()
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    first = main_requests(server)[0]["messages"][-1]
    assert first == {"role": "user", "content": pasted.strip()}


@pytest.mark.parametrize("controlling", [True, False], ids=["its-terminal", "a-pty"])
def test_closing_the_terminal_exits_129_and_saves(
    workspace: Path, tmp_path: Path, controlling: bool
) -> None:
    # A trial: closing the chat's pane exited 1 with "internal error: OSError EIO".
    # The pty is closed under a running round (output still coming); as the chat's
    # controlling terminal (a hang-up signal comes) or only its standard streams.
    import os
    import pty
    import select

    gate = Gate()
    with FakeOpenAIServer(Router(main=[gate.hold("too late")])) as server:
        env = cli_env(server.base_url, TERM="xterm-256color", **NO_WORKERS)
        master, slave = pty.openpty()
        err = (tmp_path / "stderr").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", "chat", "-w", str(workspace)],
            env=env,
            cwd=REPO,
            stdin=slave,
            stdout=slave,
            stderr=err,
            start_new_session=True,
            preexec_fn=(lambda: _take_terminal(0)) if controlling else None,
        )
        os.close(slave)
        shown = b""

        def read_until(needle: bytes) -> bool:
            nonlocal shown
            deadline = time.monotonic() + 60
            while needle not in shown and time.monotonic() < deadline:
                if select.select([master], [], [], 0.2)[0]:
                    try:
                        shown += os.read(master, 65536)
                    except OSError:
                        break
            return needle in shown

        try:
            assert read_until(b"/help lists the commands"), shown
            os.write(master, b"hello\r")
            assert wait_until(lambda: len(main_requests(server)) == 1, 30)
            os.close(master)  # the pane is gone
            code = proc.wait(60)
        finally:
            gate.event.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.close()
    stderr = (tmp_path / "stderr").read_text()
    assert code == 129, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    assert json.loads(saved.read_text())["state"] == "idle"


def _take_terminal(fd: int) -> None:
    """In the child, after setsid: make ``fd``'s terminal the controlling one."""
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
