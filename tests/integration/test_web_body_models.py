"""Request bodies of the web API are read by strict models: an unknown key, a value of
the wrong type or a NaN is a 400 ``{"error": ...}`` naming the field, and changes
nothing (docs/web-api.md "Errors")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from web_helpers import JSON, running_web

CID = "{cid}"
SUB = "/api/conversations/{cid}/subagents/1"

# (method, path, body, words the error must hold)
REFUSED: list[tuple[str, str, Any, str]] = [
    ("POST", "/api/conversations", {"titel": "x"}, 'unknown key "titel" (known: title)'),
    ("POST", "/api/conversations", {"title": 5}, '"title" must be a string or null, not int'),
    ("PATCH", "/api/conversations/{cid}", {"title": "t", "x": 1}, 'unknown key "x"'),
    ("PATCH", "/api/conversations/{cid}", {"title": ["t"]}, '"title" must be a string, not list'),
    ("PATCH", "/api/conversations/{cid}", {}, 'give "title"'),
    ("POST", "/api/switch", {"leaving": None, "to": None, "new": True}, 'unknown key "new"'),
    ("POST", "/api/switch", {"leaving": None, "to": 7}, '"to" must be a string or null, not int'),
    ("POST", "/api/conversations/{cid}/messages", {"text": "hi", "role": "system"}, 'unknown key "role"'),
    ("POST", "/api/conversations/{cid}/messages", {"text": True}, '"text" must be a string, not bool'),
    ("POST", "/api/conversations/{cid}/messages", {"text": 1.5}, '"text" must be a string, not float'),
    ("POST", "/api/conversations/{cid}/approvals/ap_1", {"decision": "allow", "x": 1}, 'unknown key "x"'),
    ("POST", "/api/conversations/{cid}/approvals/ap_1", {"decision": 1}, '"decision" must be'),
    ("POST", SUB + "/answer", {"text": "blue", "extra": 1}, 'unknown key "extra"'),
    ("POST", SUB + "/message", {"text": {"a": 1}}, '"text" must be a non-empty string, not dict'),
    ("POST", SUB + "/continue", {"task": " "}, '"task": must not be empty'),
    ("POST", SUB + "/continue", {"text": "go"}, 'unknown key "text"'),
]  # fmt: skip

NAN_ROUTES = [
    ("POST", "/api/conversations", '{"title": NaN}'),
    ("PATCH", "/api/conversations/{cid}", '{"title": "t", "n": Infinity}'),
    ("POST", "/api/switch", '{"leaving": null, "to": null, "n": -Infinity}'),
    ("POST", "/api/conversations/{cid}/messages", '{"text": "hi", "n": NaN}'),
    ("POST", "/api/conversations/{cid}/approvals/ap_1", '{"decision": "allow", "n": NaN}'),
    ("POST", SUB + "/answer", '{"text": NaN}'),
]


def _state(web: Any, cid: str) -> tuple[list[str], list[Any], str]:
    listed = web.client.get("/api/conversations").json()["conversations"]
    one = web.client.get(f"/api/conversations/{cid}").json()
    return [c["id"] for c in listed], one["messages"], one["title"]


def test_bad_bodies_are_refused_naming_the_field_and_change_nothing(workspace: Path) -> None:
    with running_web(workspace, ["never asked"], subagent_control=True) as web:
        cid = web.new_conversation()
        web.client.patch(f"/api/conversations/{cid}", content=b'{"title": "kept"}', headers=JSON)
        before = _state(web, cid)
        for method, path, body, said in REFUSED:
            url = path.replace(CID, cid)
            answer = web.client.request(method, url, content=json.dumps(body), headers=JSON)
            assert answer.status_code == 400, (url, body, answer.text)
            error = answer.json()["error"]
            assert said in error, (url, body, error)
            if "/approvals/" in url:
                assert answer.json()["code"] == "invalid"
            else:
                assert list(answer.json()) == ["error"]
        for method, path, raw in NAN_ROUTES:
            url = path.replace(CID, cid)
            answer = web.client.request(method, url, content=raw.encode(), headers=JSON)
            assert answer.status_code == 400 and "not valid JSON" in answer.json()["error"], url
        assert _state(web, cid) == before
        assert web.model.requests == []  # no message reached the model


def test_good_bodies_still_work(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        for body in ({"title": None}, {"title": "named"}, {}):
            assert web.post("/api/conversations", body).status_code == 201, body
