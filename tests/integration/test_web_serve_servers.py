"""``agentkit serve`` as a real process, and its access rules (no browser)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from subagent_helpers import Router, call, calls, finish, wait_until
from web_helpers import tls_context

from agentkit import Settings
from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer, free_port, hosts_for

pytestmark = pytest.mark.slow


def test_serve_process_answers_on_loopback_and_stops_on_ctrl_c(workspace: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with FakeOpenAIServer(["hi"]) as model:
        argv = [
            sys.executable,
            "-m",
            "agentkit",
            "serve",
            "-w",
            str(workspace),
            "--port",
            str(port),
            "--model",
            "m",
            "--base-url",
            model.base_url,
            "--api-key",
            "k",
            "--token",
            "tok-1234567890abcdef",
        ]
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            first = proc.stdout.readline() if proc.stdout else ""
            assert (
                first.strip()
                == f"agentkit serve: open http://127.0.0.1:{port}/?token=tok-1234567890abcdef"
            )
            url = f"http://127.0.0.1:{port}"
            with _client(url) as client:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        visit = client.get("/?token=tok-1234567890abcdef")
                        break
                    except httpx.ConnectError:
                        assert time.monotonic() < deadline
                        time.sleep(0.05)
                assert visit.status_code == 303 and visit.headers["location"] == "/"
                client.cookies.clear()  # the visit's cookie: this asks without it
                assert client.get("/api/conversations").status_code == 401
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err  # the CLI's exit code for Ctrl-C
        assert (
            "tok-1234567890abcdef" not in out + err
        )  # printed once (the first line), never logged


STRONG = "0123456789abcdefXYZ"


def _settings() -> Settings:
    return Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", language="en")


@pytest.mark.parametrize("token", ["", "short"])
def test_serve_on_public_address_refuses_empty_or_short_token(workspace: Path, token: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    argv = [sys.executable, "-m", "agentkit", "serve", "-w", str(workspace), "--host", "0.0.0.0"]
    argv += ["--port", str(free_port()), "--model", "m", "--api-key", "k", "--token", token]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "token is too short" in line and "16" in line


def test_wildcard_bind_still_refuses_foreign_host_names(workspace: Path) -> None:
    hosts = hosts_for("0.0.0.0", ["Chat.Example.org"])
    app = create_app(workspace, _settings(), token=STRONG, allowed_hosts=hosts)
    with BackgroundServer(app) as server, _client(server.url) as client:
        auth = {"Authorization": f"Bearer {STRONG}"}
        port = server.port

        def status(host: str) -> int:
            headers = {**auth, "Host": host}
            return client.get("/api/conversations", headers=headers).status_code

        assert status(f"evil.example:{port}") == 421  # DNS rebinding, token or not
        assert status("evil.example") == 421
        assert status(f"{socket.gethostname()}:{port}") == 200
        assert status(f"chat.example.org:{port}") == 200  # --allowed-host
        assert status(f"localhost:{port}") == 200


def test_host_may_be_the_address_the_connection_arrived_on(workspace: Path) -> None:
    app = create_app(workspace, _settings(), token=STRONG, allowed_hosts=["chat.example.org"])
    with BackgroundServer(app) as server, _client(server.url) as client:
        auth = {"Authorization": f"Bearer {STRONG}"}

        def status(host: str) -> int:
            headers = {**auth, "Host": host}
            return client.get("/api/conversations", headers=headers).status_code

        assert status(f"127.0.0.1:{server.port}") == 200  # the local address, as a literal
        assert status(f"127.0.0.2:{server.port}") == 421
        assert status("localhost") == 421  # a name: only those listed


# For a serve that starts no sub-agent: workers would start by spawn, so it does not
# start and preload a worker process server beside itself (about a second of CPU).
NO_WORKERS = {"AGENTKIT_SUBAGENT_START_METHOD": "spawn"}


def _serve(workspace: Path, *args: str, **more_env: str) -> tuple[subprocess.Popen[str], str]:
    """``agentkit serve ARGS`` on a free port (``--port 0``): the process and its URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_"))}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), AGENTKIT_DEMO_LATENCY="0")
    env.update(more_env)
    argv = [sys.executable, "-m", "agentkit", "serve", "-w", str(workspace), "--port", "0", *args]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    assert first.startswith("agentkit serve: open http://127.0.0.1:"), first
    return proc, first.removeprefix("agentkit serve: open ").rstrip("/")


def _client(url: str) -> httpx.Client:
    """One client for a test's requests to ``url`` (a new client per request would
    load certifi's bundle each time: about 0.2 s of CPU, on a 2-core machine)."""
    return httpx.Client(base_url=url, timeout=10, verify=tls_context())


def _info(client: httpx.Client) -> dict[str, object]:
    """GET /api/info once the endpoint check has an answer."""
    answers: list[dict[str, object]] = []

    def checked() -> bool:
        try:
            info = client.get("/api/info").json()
        except httpx.ConnectError:
            return False
        answers.append(info)
        return bool(info["endpoint"]["status"] != "checking")

    assert wait_until(checked, 30)
    return dict(answers[-1])


def test_serve_demo_needs_no_key_and_says_it_is_scripted(workspace: Path) -> None:
    proc, url = _serve(workspace, "--demo", **NO_WORKERS)
    client = _client(url)
    try:
        info = _info(client)
        assert info["demo"] is True and info["model"] == "agentkit-demo-scripted"
        endpoint: dict[str, object] = info["endpoint"]  # type: ignore[assignment]
        assert endpoint["status"] == "ok"
        assert endpoint["message"] == "a scripted demo model (no real model, no network)"
        cid = client.post("/api/conversations", json={}).json()["id"]
        client.post(f"/api/conversations/{cid}/messages", json={"text": "hi"})

        def answers() -> list[str]:
            detail = client.get(f"/api/conversations/{cid}").json()
            return [m["content"] for m in detail["messages"] if m["kind"] == "assistant"]

        # The answer itself, not the turn counter: a turn counts at the model's reply,
        # a moment before its message is in the conversation.
        assert wait_until(lambda: bool(answers()), 60)
        assert "scripted demo" in answers()[-1]
    finally:
        client.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "model endpoint: a scripted demo model" in out
    assert "SCRIPTED DEMO" in err
    # Ctrl-C says what it ended (issue 35): here an idle conversation, nothing running.
    assert "agentkit serve: stopped: closed 1 conversation (saved); nothing was running" in out


def test_serve_starts_on_a_dead_endpoint_and_says_so(workspace: Path) -> None:
    dead = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    proc, url = _serve(workspace, *dead, **NO_WORKERS)
    client = _client(url)
    try:
        endpoint = _info(client)["endpoint"]
        assert endpoint["status"] == "failed"  # type: ignore[index]
        assert "cannot reach the model endpoint http://127.0.0.1:9/v1" in endpoint["message"]  # type: ignore[index]
        assert client.get("/api/conversations").status_code == 200  # it serves
    finally:
        client.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert (
        "agentkit serve: model endpoint: cannot reach the model endpoint http://127.0.0.1:9/v1"
        in out
    )
    assert out.strip().splitlines()[-1] == "agentkit serve: stopped: no conversation was open"


def test_ctrl_c_says_which_sub_agents_it_terminated(workspace: Path) -> None:
    sleeper = [calls(call("run_command", command="sleep 60")), finish()]
    start = calls(
        call("create_sub_agent", agent_id=1, summary="Sleeper", task="t", run_in_background=True)
    )
    with FakeOpenAIServer(Router(main=[start, "started"], subs={1: sleeper})) as model:
        proc, url = _serve(workspace, "--model", "fake-model", "--base-url", model.base_url)
        client = _client(url)
        try:
            cid = client.post("/api/conversations", json={}).json()["id"]
            client.post(f"/api/conversations/{cid}/messages", json={"text": "go"})

            def running() -> bool:
                rows = client.get(f"/api/conversations/{cid}/subagents").json()
                return any(r["status"] == "running" for r in rows["subagents"])

            assert wait_until(running, 60)
        finally:
            client.close()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    (stopped,) = [line for line in out.splitlines() if line.startswith("agentkit serve: stopped")]
    # (the round that started it may still be finishing: then it says that too)
    assert stopped.startswith("agentkit serve: stopped: closed 1 conversation (saved): "), err
    assert stopped.endswith(f"sub-agent #1 of {cid} terminated"), stopped


@pytest.mark.parametrize("problem", ["busy port", "short token", "no turns"])
def test_a_refused_demo_start_says_one_line_and_leaves_no_copy(
    tmp_path: Path, problem: str
) -> None:
    """Regression (a new user's trial): a busy port printed the other server's URL,
    then uvicorn's own error, and exited 3; every refused `serve --demo` start left
    a copy of the sample project in the temp folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_"))}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), TMPDIR=str(temp))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1] if problem == "busy port" else free_port()
        flags = {"short token": ["--token", "short"], "no turns": ["--max-turns", "0"]}
        argv = [sys.executable, "-m", "agentkit", "serve", "--demo", "--port", str(port)]
        done = subprocess.run(
            [*argv, *flags.get(problem, [])], env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2, done.stderr
    assert "open http" not in done.stdout and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    last = lines[-1]
    if problem == "no turns":  # argparse refuses it first: a usage error naming the flag
        assert "argument --max-turns" in last and "ERROR" not in done.stderr
    else:
        assert last.startswith("agentkit: ") and "ERROR" not in done.stderr
    if problem != "no turns":  # refused before the demo's model starts: one line
        assert lines == [last], lines
    if problem == "busy port":
        assert f"cannot listen on 127.0.0.1:{port}" in last and "--port" in last
    assert list(temp.iterdir()) == []  # the demo's copy went with the refused start


@pytest.mark.parametrize("yes", [True, False])
def test_serve_yes_allows_what_the_rules_would_ask(workspace: Path, yes: bool) -> None:
    """`agentkit serve --yes` as `run --yes` (issue 35): an ask is allowed at once;
    without it the call waits for the page's answer."""
    write = calls(call("write_file", path="a.txt", content="written"))
    with FakeOpenAIServer(Router(main=[write, "done"])) as model:
        flags = ["--model", "fake-model", "--base-url", model.base_url]
        rules = '{"write_file": "ask"}'
        yes_flag = ["--yes"] if yes else []
        proc, url = _serve(workspace, *flags, *yes_flag, AGENTKIT_APPROVALS=rules, **NO_WORKERS)
        client = _client(url)
        try:
            cid = client.post("/api/conversations", json={}).json()["id"]
            client.post(f"/api/conversations/{cid}/messages", json={"text": "go"})

            def settled() -> bool:
                detail = client.get(f"/api/conversations/{cid}").json()
                return bool(detail["approvals"]) or (workspace / "a.txt").exists()

            assert wait_until(settled, 60)
            waiting = client.get(f"/api/conversations/{cid}").json()["approvals"]
        finally:
            client.close()
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    if yes:
        assert (workspace / "a.txt").read_text() == "written" and waiting == []
    else:
        assert [w["tool"] for w in waiting] == ["write_file"]
        assert not (workspace / "a.txt").exists()
