"""The web chat's HTTP API and event stream against the real server on loopback
(uvicorn in a thread, httpx, a scripted model on FakeOpenAIServer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from subagent_helpers import Gate, Router, call, calls, finish, wait_until
from web_helpers import SseReader, Web, running_web, tls_context

from agentkit.testing import FakeOpenAIServer, Reply

pytestmark = pytest.mark.slow


def test_conversations_create_list_get_rename_delete(workspace: Path) -> None:
    with running_web(workspace, ["hello"]) as web:
        cid = web.new_conversation()
        assert web.client.get(f"/api/conversations/{cid}").json()["messages"] == []
        assert (
            web.client.patch(
                f"/api/conversations/{cid}",
                content=b'{"title": "My notes"}',
                headers={"Content-Type": "application/json"},
            ).status_code
            == 200
        )
        listed = web.client.get("/api/conversations").json()["conversations"]
        assert [(c["id"], c["title"]) for c in listed] == [(cid, "My notes")]
        assert web.client.delete(f"/api/conversations/{cid}").status_code == 200
        assert web.client.get("/api/conversations").json()["conversations"] == []
        missing = web.client.get("/api/conversations/conv_nosuch")
        assert missing.status_code in (400, 404) and "error" in missing.json()


def test_message_returns_202_at_once_and_the_answer_streams(workspace: Path) -> None:
    gate = Gate()
    with running_web(workspace, [gate.hold(Reply(content="The **answer** is 42."))]) as web:
        cid = web.new_conversation()
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        assert reader.connected.wait(10)
        response = web.post(f"/api/conversations/{cid}/messages", {"text": "what is it?"})
        assert response.status_code == 202 and response.json()["accepted"] is True
        assert not gate.event.is_set() and "RoundFinished" not in reader.types()
        gate.event.set()  # the model answers only now
        assert wait_until(lambda: "AllWorkDone" in reader.types())
        reader.close()
        types = reader.types()
        assert types.index("UserMessage") < types.index("TextDelta") < types.index("RoundFinished")
        text = "".join(e["text"] for e in reader.events if e["type"] == "TextDelta")
        assert text == "The **answer** is 42."
        seqs = [e["seq"] for e in reader.events]
        assert seqs == list(range(1, len(seqs) + 1))
        assert reader.ids == [str(s) for s in seqs]
        detail = web.client.get(f"/api/conversations/{cid}").json()
        assert [m["kind"] for m in detail["messages"]] == ["system", "user", "assistant"]
        assert detail["state"] == "idle"


def test_messages_sent_during_a_round_queue_and_are_answered(workspace: Path) -> None:
    gate = Gate()
    script = [gate.hold(calls(call("run_command", command="echo hi"))), "both answered"]
    with running_web(workspace, script) as web:
        cid = web.new_conversation()
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        assert web.post(f"/api/conversations/{cid}/messages", {"text": "one"}).status_code == 202
        assert wait_until(lambda: "RoundStarted" in reader.types())
        second = web.post(f"/api/conversations/{cid}/messages", {"text": "two"})
        assert second.status_code == 202 and second.json()["state"] == "running"
        assert wait_until(lambda: "MessageQueued" in reader.types())
        gate.event.set()
        assert wait_until(lambda: "AllWorkDone" in reader.types())
        reader.close()
        users = [(e["text"], e["queued"]) for e in reader.events if e["type"] == "UserMessage"]
        assert users == [("one", False), ("two", True)]
        final = [e for e in reader.events if e["type"] == "RoundFinished"]
        assert [f["final_text"] for f in final] == ["both answered"]


def test_stream_resumes_after_last_event_id_without_loss_or_repeat(workspace: Path) -> None:
    script = [Reply(content="one two three four five", chunk_delay=0.02), "second answer"]
    with running_web(workspace, script) as web:
        cid = web.new_conversation()
        web.post(f"/api/conversations/{cid}/messages", {"text": "first"})
        session = web.server.app.state.agentkit.workspace.get(cid)
        assert session.wait_idle(20)
        cut = session.bus.last_seq // 2
        web.post(f"/api/conversations/{cid}/messages", {"text": "again"})
        assert session.wait_idle(20)
        url = f"{web.url}/api/conversations/{cid}/events"
        reader = SseReader(url, headers={"Last-Event-ID": str(cut)})
        assert wait_until(lambda: len(reader.events) >= session.bus.last_seq - cut)
        reader.close()
        assert [e["seq"] for e in reader.events] == list(range(cut + 1, session.bus.last_seq + 1))
        # Ids beyond what the conversation has (numbering restarted): a reset first.
        reader = SseReader(url, headers={"Last-Event-ID": "99999"})
        assert wait_until(lambda: len(reader.events) >= 1)
        reader.close()
        assert reader.events[0] == {"type": "reset", "last_seq": session.bus.last_seq}


def test_stream_sends_reset_when_history_lost(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        session = web.server.app.state.agentkit.workspace.get(cid)
        from agentkit import events as ev

        for i in range(1100):  # more than the bus keeps
            session.publish(ev.TextDelta(text=str(i)))
        reader = SseReader(
            f"{web.url}/api/conversations/{cid}/events", headers={"Last-Event-ID": "5"}
        )
        assert wait_until(lambda: len(reader.events) >= 1)
        session.publish(ev.TextDelta(text="live"))
        assert wait_until(lambda: len(reader.events) >= 2)
        reader.close()
        assert reader.events[0] == {"type": "reset", "last_seq": 1100}
        assert reader.events[1]["seq"] == 1101 and reader.events[1]["text"] == "live"


def _background_router(gate: Gate) -> Router:
    return Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="Write the report",
                    task="read notes.txt and write report.md",
                    run_in_background=True,
                )
            ),
            "Started a sub-agent in the background.",
            "The report is ready.",
        ],
        subs={
            1: [
                calls(call("read_file", path="notes.txt")),
                calls(
                    call(
                        "write_file",
                        path="sub_agent_results/agent_1/report.md",
                        content="# Report\n<script>alert(1)</script>\n",
                    )
                ),
                gate.hold(finish("Wrote report.md.")),
            ]
        },
    )


def _start_background_work(web: Web) -> tuple[str, str]:
    """A new conversation whose round started sub-agent 1 (``_background_router``):
    ``(its id, its sub-agents' route)``, once the sub-agent is listed."""
    cid = web.new_conversation()
    web.post(f"/api/conversations/{cid}/messages", {"text": "go"})
    base = f"/api/conversations/{cid}/subagents"
    assert wait_until(lambda: web.client.get(base).json()["subagents"])
    return cid, base


def test_background_subagent_rows_transcript_files_and_notification(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    (workspace / "secret.txt").write_text("top secret\n")
    gate = Gate()
    with running_web(workspace, _background_router(gate)) as web:
        cid = web.new_conversation()
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        web.post(f"/api/conversations/{cid}/messages", {"text": "write a report"})
        base = f"/api/conversations/{cid}/subagents"
        assert wait_until(
            lambda: any(r["files_read"] == 1 for r in web.client.get(base).json()["subagents"])
        )
        assert wait_until(lambda: "RoundFinished" in reader.types())
        finished = next(e for e in reader.events if e["type"] == "RoundFinished")
        assert finished["background"] == [1]
        assert web.client.get(f"/api/conversations/{cid}").json()["state"] == (
            "waiting_for_subagents"
        )
        # Wait for the file itself: write_file's temp file (.report.md.XXXX.tmp) may be
        # listed for a moment before its rename on a loaded machine.
        assert wait_until(
            lambda: any(
                f["path"] == "report.md"
                for f in web.client.get(f"{base}/1/files").json().get("files") or []
            )
        )
        listing = web.client.get(f"{base}/1/files").json()
        assert [f["path"] for f in listing["files"]] == ["report.md"]
        report = web.client.get(f"{base}/1/files/report.md").json()
        assert report["text"] == "# Report\n<script>alert(1)</script>\n" and not report["binary"]
        folder = workspace / "sub_agent_results" / "agent_1"
        (folder / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
        blob = web.client.get(f"{base}/1/files/blob.bin").json()
        assert blob["binary"] is True and blob["text"] is None and blob["size"] == 30
        os.symlink(workspace / "secret.txt", folder / "link.txt")
        assert web.client.get(f"{base}/1/files/link.txt").status_code == 403
        assert web.client.get(f"{base}/1/files/..%2F..%2Fsecret.txt").status_code in (400, 403)
        assert web.client.get(f"{base}/1/files/../../secret.txt").status_code in (400, 403, 404)
        transcript = web.client.get(f"{base}/1/transcript").json()
        assert transcript["agent_id"] == 1 and transcript["messages"]
        # Each tool call comes with its words, as the conversation's (issue 35).
        calling = [m for m in transcript["messages"] if m.get("tool_calls")]
        words = [w for m in calling for w in m["actions"].values()]
        assert "Writing sub_agent_results/agent_1/report.md" in words, words
        gate.event.set()
        assert wait_until(lambda: "AllWorkDone" in reader.types())
        reader.close()
        rounds = [e for e in reader.events if e["type"] == "RoundStarted"]
        assert [r["trigger"] for r in rounds] == ["user", "notification"]
        final = [e for e in reader.events if e["type"] == "RoundFinished"][-1]
        assert final["final_text"] == "The report is ready." and final["background"] == []
        kinds = [m["kind"] for m in web.client.get(f"/api/conversations/{cid}").json()["messages"]]
        assert "notification" in kinds


def test_a_refused_switch_leaves_the_conversation_and_its_sub_agent_as_they_were(
    workspace: Path,
) -> None:
    """Regression (a new user's trial): a switch to a conversation that cannot be
    opened answered 400 but had already stopped the sub-agents of the one it left."""
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with running_web(workspace, _background_router(gate)) as web:
        cid, base = _start_background_work(web)
        damaged = workspace / ".agentkit" / "conversations" / "conv_deadbeef0001.json"
        damaged.write_text('{"conversation_id": "conv_deadbeef0001", "messages": [1,2')
        for target in ("conv_deadbeef0001", "conv_000000000000"):  # damaged, missing
            refused = web.post("/api/switch", {"leaving": cid, "to": target})
            assert refused.status_code in (400, 404), refused.text
            assert "error" in refused.json()
        rows = web.client.get(base).json()["subagents"]
        assert [r["status"] for r in rows] == ["running"]
        assert web.client.get(f"/api/conversations/{cid}").json()["state"] != "closed"
        gate.event.set()
        assert wait_until(
            lambda: web.client.get(base).json()["subagents"][0]["status"] == "completed"
        )


def test_terminate_subagent_and_switch_ends_subagents(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with running_web(workspace, _background_router(gate)) as web:
        cid, base = _start_background_work(web)
        stopped = web.post(f"{base}/1/terminate")
        assert stopped.status_code == 200 and stopped.json()["success"] is True
        rows = web.client.get(base).json()["subagents"]
        assert rows[0]["status"] == "terminated"
        assert web.post(f"{base}/7/terminate").status_code == 404
        # A second conversation with a running sub-agent; switching away ends it.
        other = web.new_conversation()
        web.post(f"/api/conversations/{other}/messages", {"text": "go"})
        obase = f"/api/conversations/{other}/subagents"
        assert wait_until(
            lambda: [r["status"] for r in web.client.get(obase).json()["subagents"]] == ["running"]
        )
        switched = web.post("/api/switch", {"leaving": other, "to": cid})
        assert switched.status_code == 200 and switched.json()["id"] == cid
        listed = {c["id"]: c for c in web.client.get("/api/conversations").json()["conversations"]}
        assert listed[other]["subagents_running"] == 0
        gate.event.set()


def test_new_conversation_twice_from_an_untouched_one_makes_one(workspace: Path) -> None:
    """Regression (a new user's trial): each click on "New conversation" saved another
    empty conversation; from an untouched one, a new one is that one again."""
    with running_web(workspace, ["answered"]) as web:
        first = web.post("/api/switch", {"leaving": None, "to": None}).json()["id"]
        again = web.post("/api/switch", {"leaving": first, "to": None}).json()["id"]
        assert again == first
        web.post(f"/api/conversations/{first}/messages", {"text": "hello"})
        assert wait_until(
            lambda: web.client.get(f"/api/conversations/{first}").json()["state"] == "idle"
        )
        said = web.post("/api/switch", {"leaving": first, "to": None}).json()["id"]
        assert said != first  # once something was said, New is a new conversation
        listed = [c["id"] for c in web.client.get("/api/conversations").json()["conversations"]]
        assert sorted(listed) == sorted([first, said])


def test_titles_hold_no_control_or_bidirectional_characters(workspace: Path) -> None:
    """Regression (a new user's trial): a title kept NUL and U+202E, which made the
    page show "Renamed ... live" for a title ending in "evil"."""
    with running_web(workspace, ["answered"]) as web:
        cid = web.new_conversation()
        body = json.dumps({"title": "a\nb\x00c \u202eevil\u2066 x\x1b[31m"})
        renamed = web.client.patch(
            f"/api/conversations/{cid}", content=body, headers={"content-type": "application/json"}
        )
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["title"] == "a b c evil x [31m"
        assert web.client.get(f"/api/conversations/{cid}").json()["title"] == "a b c evil x [31m"
        other = web.new_conversation()
        web.post(f"/api/conversations/{other}/messages", {"text": "\u202edlrow olleh\x07 hi"})
        assert wait_until(
            lambda: (
                web.client.get(f"/api/conversations/{other}").json()["title"] == "dlrow olleh hi"
            )
        )


def test_gate_refuses_foreign_host_origin_and_non_json(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        page = web.client.get("/")
        assert page.status_code == 200 and "data-testid" in page.text
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert (
            web.client.get("/api/conversations", headers={"Host": "evil.example"}).status_code
            == 421
        )
        port = web.server.port
        local = web.client.get("/api/conversations", headers={"Host": f"localhost:{port}"})
        assert local.status_code == 200
        assert (
            web.post(
                "/api/conversations", {}, headers={**JSON_H, "Origin": "http://evil.example"}
            ).status_code
            == 403
        )
        assert (
            web.post(
                "/api/conversations", {}, headers={**JSON_H, "Sec-Fetch-Site": "cross-site"}
            ).status_code
            == 403
        )
        form = web.client.post(
            "/api/conversations",
            content=b"title=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415
        cid = web.new_conversation()
        evil_stream = web.client.get(
            f"/api/conversations/{cid}/events", headers={"Origin": "http://evil.example"}
        )
        assert evil_stream.status_code == 403
        same = web.post("/api/conversations", {}, headers={**JSON_H, "Origin": web.url})
        assert same.status_code == 201


JSON_H = {"Content-Type": "application/json"}


def test_token_header_cookie_visit_and_redirect(workspace: Path) -> None:
    import httpx

    with running_web(workspace, ["ok"], token="s3cret-token-0123456789") as web:
        bare = httpx.Client(base_url=web.url, timeout=10, verify=tls_context())
        assert bare.get("/api/conversations").status_code == 401
        assert bare.get("/").status_code == 401
        assert bare.get("/?token=wrong").status_code == 401
        visit = bare.get("/?token=s3cret-token-0123456789")
        assert visit.status_code == 303 and visit.headers["location"] == "/"
        cookie = visit.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert bare.get("/api/conversations").status_code == 200  # the cookie now
        assert web.client.get("/api/conversations").status_code == 200  # the header
        bare.close()


def test_missing_web_extra_gives_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['sse_starlette'] = None\n"
        "from agentkit.cli import main\n"
        "sys.exit(main(['serve', '-w', sys.argv[1], '--model', 'm', '--api-key', 'k']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    from agentkit.extras import install_hint

    assert done.returncode == 2
    # The hint installs this project's extra (never the index's other "agentkit").
    assert done.stderr.strip().splitlines() == [
        f"agentkit: the web chat needs the web extra: {install_hint('web')} "
        "(missing: sse_starlette)"
    ]
    assert "agentkit[" not in done.stderr


def test_nan_and_infinity_are_not_json(workspace: Path) -> None:
    """Regression (a new user's trial): Python's parser took ``NaN`` and answered 202;
    docs/web-api.md says every body is JSON."""
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        for word in ("NaN", "Infinity", "-Infinity"):
            body = f'{{"text": "hi", "x": {word}}}'.encode()
            url = f"/api/conversations/{cid}/messages"
            answer = web.client.post(url, content=body, headers=JSON_H)
            assert answer.status_code == 400 and "not valid JSON" in answer.json()["error"]
        assert web.client.get(f"/api/conversations/{cid}").json()["messages"] == []


LONE = '"\\ud800 and \\udfff"'  # JSON escapes of lone surrogates


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/conversations", '{"title": LONE}'),
        ("PATCH", "/api/conversations/{cid}", '{"title": LONE}'),
        ("POST", "/api/conversations/{cid}/messages", '{"text": LONE}'),
        ("POST", "/api/conversations/{cid}/messages", '{"text": "ok", LONE: 1}'),
        ("POST", "/api/switch", '{"leaving": null, "to": LONE}'),
    ],
)
def test_lone_surrogates_in_any_text_are_refused_and_break_nothing(
    workspace: Path, method: str, path: str, body: str
) -> None:
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        web.client.patch(f"/api/conversations/{cid}", content=b'{"title": "kept"}', headers=JSON_H)
        url, content = path.replace("{cid}", cid), body.replace("LONE", LONE).encode()
        answer = web.client.request(method, url, content=content, headers=JSON_H)
        assert answer.status_code == 400 and "lone surrogate" in answer.json()["error"]
        listed = web.client.get("/api/conversations")
        assert listed.status_code == 200
        assert [c["title"] for c in listed.json()["conversations"]] == ["kept"]
        one = web.client.get(f"/api/conversations/{cid}")
        assert one.status_code == 200 and one.json()["messages"] == []


def test_unknown_api_routes_and_methods_answer_json_errors(workspace: Path) -> None:
    """Regression (a new user's trial): Starlette's own 404 and 405 answered plain
    text, where docs/web-api.md promises ``{"error": ...}`` for the API."""
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        for method, path, status in [
            ("GET", "/api/conversations/..%2F..%2Fetc%2Fpasswd", 404),
            ("GET", "/api/no-such-route", 404),
            ("PUT", f"/api/conversations/{cid}", 405),
            ("DELETE", "/api/switch", 405),
        ]:
            answer = web.client.request(method, path, headers={"Content-Type": "application/json"})
            assert answer.status_code == status, (method, path, answer.text)
            assert answer.headers["content-type"].startswith("application/json"), path
            assert answer.json()["error"], path
            if status == 405:
                assert "allow" in answer.headers
        page = web.client.get("/no-such-file.js")  # the page's files: plain, as before
        assert page.status_code == 404 and not page.headers["content-type"].startswith(
            "application/json"
        )


def test_damaged_conversations_on_disk_are_listed_or_skipped_never_500(workspace: Path) -> None:
    from agentkit.chat.store import conversations_dir

    with running_web(workspace, ["ok"]) as web:
        cids = [web.new_conversation() for _ in range(3)]
        for cid in cids:
            web.post(f"/api/conversations/{cid}/messages", {"text": f"hello {cid}"})
        session = web.server.app.state.agentkit.workspace
        assert wait_until(lambda: all(s.state == "idle" for s in session.sessions()))
    folder = conversations_dir(workspace)
    files = {cid: folder / f"{cid}.json" for cid in cids}
    data = json.loads(files[cids[0]].read_text())
    data["title"] = "\ud800 bad"
    data["messages"][-1]["content"] = "answer \udfff"
    files[cids[0]].write_text(json.dumps(data))  # ASCII escapes: valid JSON on disk
    data = json.loads(files[cids[1]].read_text())
    data["stats"] = {"turns": "many"}
    files[cids[1]].write_text(json.dumps(data))
    with running_web(workspace, ["ok"]) as web:
        listed = web.client.get("/api/conversations")
        assert listed.status_code == 200
        titles = {c["id"]: c["title"] for c in listed.json()["conversations"]}
        assert titles[cids[0]] == "\ufffd bad" and cids[2] in titles
        one = web.client.get(f"/api/conversations/{cids[0]}")
        assert one.status_code == 200 and one.json()["title"] == "\ufffd bad"
        assert one.json()["messages"][-1]["content"] == "answer \ufffd"


def test_events_with_lone_surrogates_stream_as_replacement_characters(workspace: Path) -> None:
    from agentkit import events as ev

    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        session = web.server.app.state.agentkit.workspace.get(cid)
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        assert reader.connected.wait(10)
        session.publish(ev.TextDelta(text="bad \ud800"))
        session.publish(ev.TextDelta(text="next"))
        assert wait_until(lambda: len(reader.events) >= 2)
        reader.close()
        assert [e["text"] for e in reader.events] == ["bad \ufffd", "next"]


BAD_IDS = ["9" * 5000, "abc", "-5", "²", "1e3", "12x", "9" * 19]


def test_absurd_or_non_numeric_event_ids_mean_unknown_and_reset(workspace: Path) -> None:
    from agentkit import events as ev

    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        url = f"{web.url}/api/conversations/{cid}/events"
        readers = [SseReader(url, headers={"Last-Event-ID": bad.encode()}) for bad in BAD_IDS]
        readers += [SseReader(f"{url}?after={quote(bad)}") for bad in BAD_IDS]
        assert wait_until(lambda: all(len(r.events) >= 1 for r in readers))
        web.server.app.state.agentkit.workspace.get(cid).publish(ev.TextDelta(text="wake"))
        assert wait_until(lambda: all(len(r.events) >= 2 for r in readers))
        for reader in readers:
            reader.close()
            assert reader.events[0] == {"type": "reset", "last_seq": 0}
            assert [(e["seq"], e["text"]) for e in reader.events[1:]] == [(1, "wake")]


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_deeply_nested_json_bodies_get_400(workspace: Path, depth: int) -> None:
    with running_web(workspace, ["ok"]) as web:
        for body in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
            answer = web.client.post("/api/conversations", content=body, headers=JSON_H)
            assert answer.status_code == 400 and "error" in answer.json()
        assert web.client.get("/api/conversations").status_code == 200


def test_an_unexpected_error_in_a_handler_is_a_json_500_and_logged(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from starlette.routing import Route

    def broken(request: object) -> None:
        raise RuntimeError(f"boom at {workspace}")

    with running_web(workspace, ["ok"]) as web:
        web.server.app.router.routes.insert(0, Route("/api/broken", broken))
        with caplog.at_level("ERROR", logger="agentkit.webchat"):
            answer = web.client.get("/api/broken")
        assert answer.status_code == 500
        assert answer.json() == {"error": "internal error (logged on the server)"}
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        assert any("GET /api/broken failed" in r.getMessage() for r in caplog.records)
        assert web.client.get("/api/conversations").status_code == 200


def test_reads_open_nothing_and_cross_site_reads_are_refused(workspace: Path) -> None:
    with running_web(workspace, ["first answer"]) as web:
        cid = web.new_conversation()
        web.post(f"/api/conversations/{cid}/messages", {"text": "hi"})
        live = web.server.app.state.agentkit.workspace
        assert wait_until(lambda: live.get(cid) is not None and live.get(cid).state == "idle")
        assert wait_until(lambda: len(live.get(cid).conversation.messages) == 3)
        web.post("/api/switch", {"leaving": cid, "to": None})
        assert live.get(cid) is None
        detail = web.client.get(f"/api/conversations/{cid}")
        assert detail.status_code == 200 and detail.json()["state"] == "idle"
        assert [m["kind"] for m in detail.json()["messages"]] == ["system", "user", "assistant"]
        assert web.client.get(f"/api/conversations/{cid}/subagents").json() == {"subagents": []}
        assert web.client.get(f"/api/conversations/{cid}/subagents/1/files").status_code == 404
        stream = web.client.get(f"/api/conversations/{cid}/events")
        assert stream.status_code == 409 and "POST /api/switch" in stream.json()["error"]
        assert live.get(cid) is None  # no GET opened it
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            for path in ("/api/conversations", f"/api/conversations/{cid}"):
                assert web.client.get(path, headers=headers).status_code == 403
        same = {"Origin": web.url, "Sec-Fetch-Site": "same-origin"}
        assert web.client.get("/api/conversations", headers=same).status_code == 200
        assert web.client.get("/", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200


def test_errors_show_no_absolute_server_paths(workspace: Path, tmp_path: Path) -> None:
    from agentkit import Settings
    from agentkit.chat.store import conversations_dir
    from agentkit.webchat import files

    with running_web(workspace, ["ok"]) as web:
        folder = conversations_dir(workspace)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "conv_0123456789ab.json").write_text("{not json")
        for path in ("/api/conversations/conv_0123456789ab", "/api/switch"):
            if path == "/api/switch":
                answer = web.post(path, {"leaving": None, "to": "conv_0123456789ab"})
            else:
                answer = web.client.get(path)
            assert answer.status_code == 400, answer.text
            assert str(tmp_path) not in answer.text and "conv_0123456789ab" in answer.text
    (tmp_path / "secret.txt").write_text("x")
    where = workspace / "sub_agent_results" / "agent_1"
    where.mkdir(parents=True)
    os.symlink(tmp_path / "secret.txt", where / "out.txt")
    settings = Settings(model="m", api_key="k")
    with pytest.raises(files.ViewError) as refused:
        files.read_file(workspace, settings, "sub_agent_results/agent_1", "out.txt")
    assert refused.value.status == 403 and str(tmp_path) not in str(refused.value)
    with pytest.raises(files.ViewError) as refused:
        files.list_files(workspace, settings, "../outside")
    assert refused.value.status == 403 and str(tmp_path) not in str(refused.value)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"text": 123}, '"text" must be a string, not int'),
        ({"text": ["a"]}, '"text" must be a string, not list'),
        ({"text": "   "}, "the message is empty"),
        ({}, "the message is empty"),
    ],
)
def test_a_message_that_is_not_text_says_so(workspace: Path, body: dict, said: str) -> None:
    with running_web(workspace, ["never asked"]) as web:
        cid = web.new_conversation()
        response = web.post(f"/api/conversations/{cid}/messages", body)
    assert response.status_code == 400 and said in response.json()["error"], response.text


# ------------------------------------------------------------ issue 26 additions
def test_info_names_the_workspace_model_and_the_endpoint_check(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        assert wait_until(
            lambda: web.client.get("/api/info").json()["endpoint"]["status"] != "checking"
        )
        info = web.client.get("/api/info").json()
        base_url = web.model.base_url
        paths = [r.path for r in web.model.records]
    assert info["workspace"] == str(workspace) and info["model"] == "fake-model"
    assert info["base_url"] == base_url and info["demo"] is False
    endpoint = info["endpoint"]
    assert endpoint["status"] == "ok" and endpoint["models"] == ["fake-model"]
    assert endpoint["message"] == f"fake-model at {base_url}: reachable"
    assert paths.count("/v1/models") == 1


def test_endpoint_check_words_each_outcome(workspace: Path) -> None:
    import http.server
    import threading

    from agentkit import Settings
    from agentkit.webchat.endpoint import check_endpoint

    dead = check_endpoint(Settings(model="m", api_key="k", base_url="http://127.0.0.1:9/v1"))
    assert dead.status == "failed"
    assert dead.message.startswith("cannot reach the model endpoint http://127.0.0.1:9/v1: ")
    with FakeOpenAIServer(["x"], models=["other-model", "second"]) as model:
        unlisted = check_endpoint(Settings(model="mine", api_key="k", base_url=model.base_url))
        auth = model.base_url.replace("://", "://user:secret@") + "?key=hidden"
        shown = check_endpoint(Settings(model="other-model", api_key="k", base_url=auth))
    assert unlisted.status == "warning" and "does not list the model 'mine'" in unlisted.message
    assert "other-model, second" in unlisted.message
    assert shown.status == "ok" and "secret" not in shown.message and "hidden" not in shown.url

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        refused = check_endpoint(Settings(model="m", api_key="wrong", base_url=base))
    finally:
        server.shutdown()
        server.server_close()
    assert refused.status == "failed"
    assert refused.message == f"the model endpoint {base} refused the API key (HTTP 401)"


def test_a_reload_shows_tool_call_words_round_ends_and_usage(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    script = [calls(call("read_file", path="notes.txt")), "read it", gate.hold("too late")]
    with running_web(workspace, script) as web:
        cid = web.new_conversation()
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        web.post(f"/api/conversations/{cid}/messages", {"text": "read notes"})
        assert wait_until(lambda: "RoundFinished" in reader.types())
        web.post(f"/api/conversations/{cid}/messages", {"text": "and more"})
        assert wait_until(lambda: reader.types().count("RoundStarted") == 2)
        assert web.post(f"/api/conversations/{cid}/cancel").json() == {"cancelled": True}
        assert wait_until(lambda: reader.types().count("RoundFinished") == 2)
        reader.close()
        detail = web.client.get(f"/api/conversations/{cid}").json()
        summary = web.client.get(f"/api/conversations/{cid}/summary").json()
        gate.event.set()
    (asked,) = [m for m in detail["messages"] if m.get("tool_calls")]
    assert list(asked["actions"].values()) == ["Reading notes.txt"]
    (end,) = detail["round_ends"]
    assert end["status"] == "cancelled" and end["round"] == 2 and end["background"] == []
    assert detail["messages"][end["after"] - 1]["content"] == "and more"
    assert "messages" not in summary and summary["usage"] == detail["usage"]
    assert summary["usage"]["main_tokens"] == summary["stats"]["total_tokens"] > 0
    assert summary["usage"]["cost_usd"] is None


def test_a_failed_round_is_explained_naming_the_endpoint(workspace: Path) -> None:
    from agentkit import Settings
    from agentkit.webchat import create_app
    from agentkit.webchat.serve import BackgroundServer

    dead = "http://127.0.0.1:9/v1"
    settings = Settings(model="m", api_key="k", base_url=dead, language="en", max_retries=0)
    app = create_app(workspace, settings, check_endpoint=False)
    import httpx

    with (
        BackgroundServer(app) as server,
        httpx.Client(base_url=server.url, timeout=30, verify=tls_context()) as client,
    ):
        cid = client.post("/api/conversations", content=b"{}", headers=JSON_H).json()["id"]
        reader = SseReader(f"{server.url}/api/conversations/{cid}/events?after=0")
        client.post(f"/api/conversations/{cid}/messages", content=b'{"text": "hi"}', headers=JSON_H)
        assert wait_until(lambda: "RoundFinished" in reader.types())
        reader.close()
        (finished,) = [e for e in reader.events if e["type"] == "RoundFinished"]
        detail = client.get(f"/api/conversations/{cid}").json()
        assert client.get("/api/info").json()["endpoint"]["status"] == "checking"  # not asked
    assert finished["status"] == "failed" and finished["error_kind"] == "connection"
    explanation = finished["explanation"]
    assert explanation.startswith(f"The round failed: cannot reach the model server at {dead} (")
    assert explanation.endswith(
        "Check that it is running and that the base URL is right, then send the message again."
    )
    assert detail["round_ends"][0]["explanation"] == explanation


def test_subagent_rows_carry_their_tokens(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with running_web(workspace, _background_router(gate)) as web:
        cid = web.new_conversation()
        reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
        web.post(f"/api/conversations/{cid}/messages", {"text": "write a report"})
        base = f"/api/conversations/{cid}/subagents"
        assert wait_until(
            lambda: any(
                r["token_usage"].get("total", 0) > 0
                for r in web.client.get(base).json()["subagents"]
            )
        )
        gate.event.set()
        assert wait_until(lambda: "AllWorkDone" in reader.types())
        reader.close()
        summary = web.client.get(f"/api/conversations/{cid}/summary").json()
    progress = [e for e in reader.events if e["type"] == "SubAgentProgress"]
    assert progress and all("token_usage" in e["info"] for e in progress)
    assert summary["usage"]["subagent_tokens"] > 0
    assert summary["usage"]["total_tokens"] == (
        summary["usage"]["main_tokens"] + summary["usage"]["subagent_tokens"]
    )
