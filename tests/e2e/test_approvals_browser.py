"""Approval cards in a real browser: headless Chromium (the distribution's) driven by
Playwright for Python, against the real server on loopback with a scripted model;
sub-agents are real worker processes (docs/web-api.md "Approvals", static/approvals.js).

Skipped when Playwright or /usr/bin/chromium is missing (.ci/run installs both).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from subagent_helpers import Switch, call, calls, finish, script, wait_until
from web_helpers import Web, running_web

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium"),
]
playwright_api = pytest.importorskip("playwright.sync_api")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
RULES = {"write_file": "ask"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Web, Switch]]:
    switch = Switch()
    workspace = tmp_path_factory.mktemp("web").resolve()
    with running_web(workspace, switch, approvals=RULES) as web:
        yield web, switch


@pytest.fixture
def web(served: tuple[Web, Switch]) -> Web:
    served[0].model.clear()
    return served[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(60_000)
    # A machine shared by busy builds can take seconds per event: waits, not timings.
    playwright_api.expect.set_options(timeout=60_000)
    yield context
    playwright_api.expect.set_options(timeout=5_000)
    context.close()


def expect(locator: Any) -> Any:
    return playwright_api.expect(locator)


def write(name: str, content: str = "x") -> dict[str, Any]:
    arguments = {"path": name, "content": content}
    return {"name": "write_file", "id": f"call_{name}", "arguments": arguments}


def new_conversation(context: Any, web: Web, text: str = "go") -> Any:
    """A tab on a new conversation, with ``text`` sent from its composer."""
    tab = context.new_page()
    tab.goto(web.url)
    expect(tab.get_by_test_id("state")).to_have_attribute("data-state", "idle")
    tab.get_by_test_id("new-conversation").click()
    expect(tab.locator("[data-testid=conversation].current")).to_have_count(1)
    tab.get_by_test_id("composer").fill(text)
    tab.get_by_test_id("send").click()
    return tab


def cards(tab: Any) -> Any:
    return tab.locator("#approvals [data-testid=approval]")


def tool_result(web: Web, call_id: str) -> str:
    for request in reversed(web.model.requests):
        for message in request["messages"]:
            if message["role"] == "tool" and message["tool_call_id"] == call_id:
                return str(message["content"])
    raise AssertionError(f"no result for {call_id}")


def test_a_card_asks_survives_a_reload_and_allow_runs_the_call(
    served: tuple[Web, Switch], web: Web, context: Any
) -> None:
    script(served, [{"tool_calls": [write("b1.txt")]}, "written"])
    tab = new_conversation(context, web)
    card = cards(tab)
    expect(card).to_have_count(1)
    expect(card).to_contain_text("write_file")
    expect(card.locator(".args")).to_contain_text("b1.txt")
    expect(tab.get_by_test_id("state")).to_have_attribute("data-state", "running")
    tab.reload()  # the pending request comes back from the conversation's GET
    expect(cards(tab)).to_have_count(1)
    expect(cards(tab)).to_contain_text("b1.txt")
    assert not (web.workspace / "b1.txt").exists()
    cards(tab).get_by_test_id("approval-allow").click()
    expect(cards(tab)).to_have_count(0)
    expect(tab.get_by_test_id("state")).to_have_attribute("data-state", "idle")
    assert (web.workspace / "b1.txt").exists()
    expect(tab.locator("[data-testid=message][data-role=assistant]")).to_have_text("written")


def test_deny_sends_the_reason_typed_on_the_card_to_the_model(
    served: tuple[Web, Switch], web: Web, context: Any
) -> None:
    hostile = "<img src=x onerror=window.__pwned=1>"
    script(served, [{"tool_calls": [write("b2.txt", hostile)]}, "understood"])
    tab = new_conversation(context, web)
    expect(cards(tab)).to_have_count(1)
    expect(cards(tab).locator(".args")).to_contain_text(hostile)  # shown as text, inert
    assert tab.evaluate("window.__pwned") is None and cards(tab).locator("img").count() == 0
    cards(tab).get_by_test_id("approval-reason").fill("not in this folder")
    cards(tab).get_by_test_id("approval-deny").click()
    expect(cards(tab)).to_have_count(0)
    expect(tab.get_by_test_id("state")).to_have_attribute("data-state", "idle")
    assert '"not in this folder"' in tool_result(web, "call_b2.txt")
    assert not (web.workspace / "b2.txt").exists()


def test_always_allow_answers_allow_always(
    served: tuple[Web, Switch], web: Web, context: Any
) -> None:
    """The card's Always button answers ``allow_always`` (that the conversation then
    asks no more is tests/unit/test_approval_logic.py's)."""
    script(served, [{"tool_calls": [write("b3.txt")]}, "one"])
    tab = new_conversation(context, web)
    expect(cards(tab)).to_have_count(1)
    expect(cards(tab).get_by_test_id("approval-always")).to_contain_text("write_file")
    cards(tab).get_by_test_id("approval-always").click()
    expect(tab.locator("[data-testid=message][data-role=assistant]")).to_have_text("one")
    expect(cards(tab)).to_have_count(0)
    assert (web.workspace / "b3.txt").exists()
    files = (web.workspace / ".agentkit" / "conversations").glob("*.json")
    kept = [json.loads(f.read_text(encoding="utf-8")).get("approvals") for f in files]
    assert {"always": ["write_file"]} in kept


def test_a_background_sub_agents_card_is_on_its_row_and_answered_while_the_agent_is_idle(
    served: tuple[Web, Switch], web: Web, context: Any
) -> None:
    background = call(
        "create_sub_agent", agent_id=1, summary="writer", task="t", run_in_background=True
    )
    path = "sub_agent_results/agent_1/n.txt"
    sub = [calls(call("write_file", path=path, content="n")), finish()]
    script(served, [calls(background), "started", "heard"], {1: sub})
    tab = new_conversation(context, web)
    row = tab.locator('[data-testid=subagent][data-agent-id="1"]')
    expect(row.get_by_test_id("approval")).to_have_count(1)
    expect(cards(tab)).to_have_count(1)
    expect(cards(tab)).to_contain_text("Sub-agent #1")
    expect(tab.get_by_test_id("state")).to_have_attribute("data-state", "waiting_for_subagents")
    expect(row).to_have_attribute("data-status", "running")
    row.get_by_test_id("approval-allow").click()
    expect(row.get_by_test_id("approval")).to_have_count(0)
    expect(cards(tab)).to_have_count(0)
    expect(row).to_have_attribute("data-status", "completed")
    assert (web.workspace / path).exists()
    expect(tab.locator("[data-testid=message][data-role=assistant]").last).to_have_text("heard")


def test_an_answer_in_one_tab_removes_the_card_in_the_other(
    served: tuple[Web, Switch], web: Web, context: Any
) -> None:
    script(served, [{"tool_calls": [write("b5.txt")]}, "ok"])
    first = new_conversation(context, web)
    expect(cards(first)).to_have_count(1)
    second = context.new_page()
    second.goto(first.url)  # the same conversation (its id is in the address)
    expect(cards(second)).to_have_count(1)
    cards(second).get_by_test_id("approval-allow").click()
    expect(cards(first)).to_have_count(0)
    expect(cards(second)).to_have_count(0)
    assert wait_until(lambda: (web.workspace / "b5.txt").exists())
    expect(first.get_by_test_id("state")).to_have_attribute("data-state", "idle")
