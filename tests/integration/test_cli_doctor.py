"""``agentkit doctor``, ``agentkit --version`` and ``agentkit run --demo`` as a person
types them (issue 35): real subprocesses, the endpoint a FakeOpenAIServer on 127.0.0.1
(reachable) or a port nothing listens on (unreachable)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from cli_helpers import REPO, agentkit, cli_env

from agentkit.testing import FakeOpenAIServer, Reply


def dead_port() -> int:
    """A 127.0.0.1 port that nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def doctor(env: dict[str, str], workspace: Path) -> subprocess.CompletedProcess[str]:
    return agentkit("doctor", "-w", str(workspace), env=env)


STATES = ("ok", "warning", "missing", "failed", "info")


def line_of(text: str, name: str) -> str:
    """The report's entry for the check ``name`` (its state first, then its text and
    fix, wrapped lines joined by single spaces)."""
    lines = text.splitlines()
    words = name.split()
    at = next(i for i, line in enumerate(lines) if line.split()[1 : 1 + len(words)] == words)
    block = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.strip() or line.split()[0] in STATES:
            break
        block.append(line)
    return " ".join(" ".join(block).split())


def test_doctor_with_a_reachable_endpoint_says_so_and_exits_0(tmp_path: Path) -> None:
    with FakeOpenAIServer(lambda request: Reply(content="unused")) as server:
        env = cli_env(server.base_url, OPENAI_API_KEY="sk-doctor-secret-0123456789")
        proc = doctor(env, tmp_path)
        paths = [r.path for r in server.records]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.splitlines()[0].startswith("agentkit ") and "the essentials are there" in out
    endpoint = line_of(out, "Endpoint")
    assert endpoint.split()[0] == "ok" and "fake-model" in endpoint and "reachable" in endpoint
    assert paths == ["/v1/models"]  # one models request, nothing else
    assert "sk-doctor-secret" not in out + proc.stderr  # the key is never shown
    for name in ("Python", "System", "Processes", "Sandbox", "ripgrep", "Tokens"):
        line_of(out, name)  # every part has its line
    conversations = line_of(out, "Conversations")
    assert str(tmp_path / ".agentkit" / "conversations") in conversations
    for extra in ("web", "acp", "mcp", "ray", "otel", "pdf", "local"):
        assert f" extra {extra} " in out
    local = line_of(out, "extra local") if " missing  extra local" in out else ""
    assert not local or "pip install" in local and "[local]" in local


def test_doctor_with_a_dead_endpoint_says_so_how_to_fix_it_and_exits_1(tmp_path: Path) -> None:
    env = cli_env(f"http://127.0.0.1:{dead_port()}/v1")
    proc = doctor(env, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    endpoint = line_of(proc.stdout, "Endpoint")
    assert endpoint.split()[0] == "failed" and "cannot reach the model endpoint" in endpoint
    assert "--base-url" in endpoint and "OPENAI_BASE_URL" in endpoint  # how to fix it
    assert "missing essentials: Endpoint" in proc.stdout


def test_doctor_with_no_model_names_the_flags_and_the_demo(tmp_path: Path) -> None:
    proc = doctor(cli_env(), tmp_path)
    assert proc.returncode == 1
    endpoint = line_of(proc.stdout, "Endpoint")
    assert "no model configured" in endpoint and "--model" in endpoint
    assert "agentkit chat --demo" in endpoint


def test_doctor_without_bubblewrap_says_why_and_the_install_command(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with FakeOpenAIServer(lambda request: Reply(content="unused")) as server:
        env = cli_env(server.base_url, PATH=str(empty))  # no bwrap, no setpriv, no rg
        proc = doctor(env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # not an essential
    sandbox = line_of(proc.stdout, "Sandbox")
    assert sandbox.split()[0] == "missing" and "bubblewrap (bwrap) is not installed" in sandbox
    assert "commands run unconfined" in sandbox
    assert "sudo apt-get install bubblewrap" in sandbox
    processes = line_of(proc.stdout, "Processes")
    assert processes.split()[0] == "missing" and "environment mark" in processes


def test_version_is_one_line() -> None:
    proc = agentkit("--version", env=cli_env())
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("agentkit ")


def test_run_demo_runs_the_scripted_model(tmp_path: Path) -> None:
    env = cli_env(AGENTKIT_DEMO_LATENCY="0.01", AGENTKIT_TOKENIZER="estimate")
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "run", "--demo", "-w", str(tmp_path), "hello"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "This is a scripted demo" in proc.stdout and "SCRIPTED DEMO" in proc.stderr
    assert os.listdir(tmp_path / ".agentkit" / "conversations")  # a real run, saved
