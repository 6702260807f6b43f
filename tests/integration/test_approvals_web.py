"""Approvals through the web chat's HTTP API and event stream, against the real server on
loopback (uvicorn in a thread, httpx, a scripted model; sub-agents are real workers):
docs/web-api.md "Approvals", docs/approvals.md §2, §6."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from subagent_helpers import Switch, call, calls, finish, script, wait_until
from web_helpers import JSON, SseReader, Web, settings_for

from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer

pytestmark = pytest.mark.slow

RULES = {"write_file": "ask", "run_command:git push*": "ask"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Web, Switch]]:
    switch = Switch()
    workspace = tmp_path_factory.mktemp("web").resolve()
    with FakeOpenAIServer(switch) as model:
        app = create_app(workspace, settings_for(model, approvals=RULES))
        server = BackgroundServer(app).start()
        client = httpx.Client(base_url=server.url, timeout=30)
        try:
            yield Web(server.url, client, model, server, workspace), switch
        finally:
            client.close()
            server.stop()


@pytest.fixture
def web(served: tuple[Web, Switch]) -> Web:
    served[0].model.clear()
    return served[0]


def write(name: str) -> dict[str, Any]:
    return {
        "name": "write_file",
        "id": f"call_{name}",
        "arguments": {"path": name, "content": "x\n"},
    }


def start(web: Web, text: str = "go") -> tuple[str, SseReader]:
    """A new conversation, its event stream, and a message posted to it."""
    cid = web.new_conversation()
    reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
    assert reader.connected.wait(10)
    assert web.post(f"/api/conversations/{cid}/messages", {"text": text}).status_code == 202
    return cid, reader


def requested(reader: SseReader, count: int = 1) -> list[dict[str, Any]]:
    assert wait_until(lambda: reader.types().count("ApprovalRequested") >= count), reader.types()
    return [e for e in reader.events if e["type"] == "ApprovalRequested"]


def answer(web: Web, cid: str, rid: str, decision: str, note: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"decision": decision}
    if note is not None:
        body["note"] = note
    return web.post(f"/api/conversations/{cid}/approvals/{rid}", body)


def last_results(web: Web) -> dict[str, str]:
    return {
        m["tool_call_id"]: m["content"]
        for m in web.model.requests[-1]["messages"]
        if m["role"] == "tool"
    }


def test_the_conversation_lists_a_pending_request_and_an_answer_runs_the_call(
    served: tuple[Web, Switch], web: Web
) -> None:
    script(served, [{"tool_calls": [write("a1.txt")]}, "written"])
    cid, reader = start(web)
    [asked] = requested(reader)
    assert (asked["tool"], asked["arguments"]["path"], asked["agent_id"]) == (
        "write_file",
        "a1.txt",
        None,
    )
    listed = web.client.get(f"/api/conversations/{cid}").json()["approvals"]
    assert [r["request_id"] for r in listed] == [asked["request_id"]]
    response = answer(web, cid, asked["request_id"], "allow")
    assert response.status_code == 200 and response.json()["decision"] == "allow"
    assert wait_until(lambda: "AllWorkDone" in reader.types())
    reader.close()
    assert (web.workspace / "a1.txt").exists()
    assert web.client.get(f"/api/conversations/{cid}").json()["approvals"] == []
    assert [e["decision"] for e in reader.events if e["type"] == "ApprovalAnswered"] == ["allow"]


def test_the_api_answers_deny_with_its_note_and_allow_always(
    served: tuple[Web, Switch], web: Web
) -> None:
    """The body's decision and note are the answer (what each does is
    tests/unit/test_approval_logic.py's)."""
    script(
        served, [{"tool_calls": [write("a2.txt")]}, "one", {"tool_calls": [write("a3.txt")]}, "two"]
    )
    cid, reader = start(web)
    [asked] = requested(reader)
    denied = answer(web, cid, asked["request_id"], "deny", "wrong folder")
    assert denied.status_code == 200 and denied.json()["request_id"] == asked["request_id"]
    assert wait_until(lambda: reader.types().count("RoundFinished") == 1)
    assert web.post(f"/api/conversations/{cid}/messages", {"text": "again"}).status_code == 202
    second = requested(reader, 2)[1]
    assert answer(web, cid, second["request_id"], "allow_always").status_code == 200
    assert wait_until(lambda: reader.types().count("RoundFinished") == 2)
    reader.close()
    answered = [e for e in reader.events if e["type"] == "ApprovalAnswered"]
    assert [(e["request_id"], e["decision"], e["note"]) for e in answered] == [
        (asked["request_id"], "deny", "wrong folder"),
        (second["request_id"], "allow_always", None),
    ]


def test_two_tabs_answering_at_once_one_wins_the_other_hears_why(
    served: tuple[Web, Switch], web: Web
) -> None:
    script(served, [{"tool_calls": [write("a5.txt")]}, "ok"])
    cid, reader = start(web)
    [asked] = requested(reader)
    barrier = threading.Barrier(2)
    responses: list[httpx.Response] = []

    def tab(decision: str) -> None:
        with httpx.Client(base_url=web.url, timeout=30) as client:
            barrier.wait()
            path = f"/api/conversations/{cid}/approvals/{asked['request_id']}"
            responses.append(
                client.post(path, content=json.dumps({"decision": decision}), headers=JSON)
            )

    threads = [threading.Thread(target=tab, args=(d,)) for d in ("allow", "deny")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(r.status_code for r in responses) == [200, 409]
    lost = next(r for r in responses if r.status_code == 409).json()
    assert lost["code"] == "answered" and "already answered" in lost["error"]
    assert wait_until(lambda: "AllWorkDone" in reader.types())
    reader.close()
    assert [e["type"] for e in reader.events].count("ApprovalAnswered") == 1


def test_a_reconnecting_reader_sees_the_pending_request(
    served: tuple[Web, Switch], web: Web
) -> None:
    script(served, [{"tool_calls": [write("a6.txt")]}, "ok"])
    cid, reader = start(web)
    [asked] = requested(reader)
    seen = reader.ids[-1]
    reader.close()  # the page went away (a reload, a dropped network)
    page = web.client.get(f"/api/conversations/{cid}").json()
    assert [r["request_id"] for r in page["approvals"]] == [asked["request_id"]]
    again = SseReader(f"{web.url}/api/conversations/{cid}/events", headers={"Last-Event-ID": seen})
    assert again.connected.wait(10)
    assert answer(web, cid, asked["request_id"], "allow").status_code == 200
    assert wait_until(lambda: "AllWorkDone" in again.types())
    again.close()
    assert "ApprovalRequested" not in again.types() and "ApprovalAnswered" in again.types()


def test_bad_answers_are_refused_clearly(served: tuple[Web, Switch], web: Web) -> None:
    script(served, [{"tool_calls": [write("a7.txt")]}, "ok"])
    cid, reader = start(web)
    [asked] = requested(reader)
    path = f"/api/conversations/{cid}/approvals/{asked['request_id']}"
    assert answer(web, cid, "ap_nope", "allow").status_code == 404
    refused = answer(web, cid, asked["request_id"], "perhaps")
    assert refused.status_code == 400 and "allow, allow_always or deny" in refused.json()["error"]
    assert web.post(path, {}).status_code == 400
    assert web.post(path, {"decision": "deny", "note": 5}).status_code == 400
    assert web.client.post(path, content=b"[1]", headers=JSON).status_code == 400
    assert answer(web, "conv_nosuch", asked["request_id"], "allow").status_code in (400, 404)
    assert answer(web, cid, asked["request_id"], "allow").status_code == 200  # still answerable
    assert answer(web, cid, asked["request_id"], "allow").status_code == 409
    assert wait_until(lambda: "AllWorkDone" in reader.types())
    reader.close()


def test_a_background_sub_agent_is_answered_while_the_main_agent_is_idle(
    served: tuple[Web, Switch], web: Web
) -> None:
    background = call(
        "create_sub_agent", agent_id=1, summary="writer", task="t", run_in_background=True
    )
    sub = [calls(call("write_file", path="sub_agent_results/agent_1/n.txt", content="n")), finish()]
    script(served, [calls(background), "started", "heard"], {1: sub})
    cid, reader = start(web)
    [asked] = requested(reader)
    assert asked["agent_id"] == 1
    page = web.client.get(f"/api/conversations/{cid}").json()
    assert page["state"] == "waiting_for_subagents" and page["approvals"][0]["agent_id"] == 1
    assert answer(web, cid, asked["request_id"], "allow").status_code == 200
    assert wait_until(lambda: reader.types().count("RoundFinished") == 2, 60)
    reader.close()
    assert (web.workspace / "sub_agent_results/agent_1/n.txt").exists()


def test_leaving_a_conversation_withdraws_its_requests(
    served: tuple[Web, Switch], web: Web
) -> None:
    script(served, [{"tool_calls": [write("a8.txt")]}, "ok"])
    cid, reader = start(web)
    [asked] = requested(reader)
    assert web.post("/api/switch", {"leaving": cid, "to": None}).status_code == 200
    assert wait_until(lambda: "ApprovalWithdrawn" in reader.types())
    reader.close()
    assert web.client.get(f"/api/conversations/{cid}").json()["approvals"] == []
    refused = answer(web, cid, asked["request_id"], "allow")  # opens it again
    assert refused.status_code == 404  # a new session: the id is not one of its own
    assert not (Path(web.workspace) / "a8.txt").exists()
