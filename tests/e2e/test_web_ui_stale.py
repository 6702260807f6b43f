"""The web chat when a conversation cannot be opened or changes in another tab (a new
user's trial), in a real browser: a message typed for a conversation that cannot be
opened comes back to the message box and goes nowhere else; a refused switch leaves the
page where it was and says why once; start-up skips damaged files; a conversation
deleted or closed in another tab is noticed and said so in words.

Headless Chromium (/usr/bin/chromium) driven by Playwright for Python, against the real
server and FakeOpenAIServer, as in test_web_ui.py. Skipped without either.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Gate, call, calls, finish, wait_until, who
from web_helpers import Web, running_web

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium"),
]
pw = pytest.importorskip("playwright.sync_api")
pw.expect.set_options(timeout=30_000)  # a loaded 2-core machine; nothing here is timed
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
DAMAGED = "conv_deadbeef0001"
OTHER_DAMAGED = "conv_deadbeef0002"


def expect(locator: Any) -> Any:
    return pw.expect(locator)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with pw.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@contextmanager
def tabs(browser: Any, width: int = 1280) -> Iterator[Any]:
    """A browser context (its pages are tabs of one window), ``new_tab()`` opens one."""
    context = browser.new_context(viewport={"width": width, "height": 800})
    context.set_default_timeout(30_000)
    try:
        yield context
    finally:
        context.close()


def send(page: Any, text: str) -> None:
    page.get_by_test_id("composer").fill(text)
    page.get_by_test_id("composer").press("Enter")


def messages(page: Any, role: str) -> Any:
    return page.locator(f"#messages [data-testid=message][data-role={role}]")


def item(page: Any, cid: str) -> Any:
    return page.locator(f'[data-testid=conversation][data-id="{cid}"]')


def pick(page: Any, cid: str) -> None:
    """Click conversation ``cid`` in the sidebar (opening the drawer when narrow)."""
    toggle = page.get_by_test_id("sidebar-toggle")
    if toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    item(page, cid).locator("button.name").click()


def shows(page: Any, cid: str, title: str) -> None:
    """The page is on conversation ``cid``: highlighted, its title in the header."""
    expect(page.locator("[data-testid=conversation].current")).to_have_attribute("data-id", cid)
    expect(page.get_by_test_id("title")).to_have_text(title)


def damage(workspace: Path, cid: str = DAMAGED, text: str | None = None, age: float = 0) -> None:
    """A conversation file that is not JSON (``age`` seconds old)."""
    path = workspace / ".agentkit" / "conversations" / f"{cid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text or f'{{"conversation_id": "{cid}", "messages": [1,2')
    if age:
        then = time.time() - age
        os.utime(path, (then, then))


def echo(seen: list[str] | None = None) -> Any:
    """A model answering "ok: <the last message>" (and noting each message it got)."""

    def handler(request: dict[str, Any]) -> str:
        text = request["messages"][-1]["content"] or ""
        if seen is not None:
            seen.append(text)
        return "ok: " + text

    return handler


def background(gate: Gate) -> Any:
    """A model that starts background sub-agent 1 on "go" (it works until ``gate``)
    and otherwise echoes."""

    def handler(request: dict[str, Any]) -> Any:
        if who(request) is not None:
            gate.event.wait(30)
            return finish("done")
        last = request["messages"][-1]
        if last["role"] == "tool":
            return "started"
        if last["content"] == "go":
            return calls(call("create_sub_agent", agent_id=1, summary="Slow job", task="wait",
                              run_in_background=True))  # fmt: skip
        return "ok: " + (last["content"] or "")

    return handler


def said(web: Web, text: str) -> str:
    """A conversation (made through the API) where ``text`` was answered."""
    cid = web.new_conversation()
    assert web.post(f"/api/conversations/{cid}/messages", {"text": text}).status_code == 202

    def answered() -> bool:
        shown = web.client.get(f"/api/conversations/{cid}").json()
        return any(m["kind"] == "assistant" and m.get("content") for m in shown["messages"])

    assert wait_until(answered)
    return cid


def user_texts(web: Web) -> list[str]:
    """Every user message (and queued one) of every conversation that can be read."""
    texts: list[str] = []
    for c in web.client.get("/api/conversations").json()["conversations"]:
        if c["state"] != "damaged":
            shown = web.client.get(f"/api/conversations/{c['id']}").json()
            texts += [m["content"] for m in shown["messages"] if m["kind"] == "user"]
            texts += shown["queued"]
    return texts


@contextmanager
def held_elsewhere(workspace: Path, cid: str) -> Iterator[None]:
    """Conversation ``cid`` claimed by another process (as another agentkit holds it)."""
    code = (
        "import sys, time; from pathlib import Path;"
        "from agentkit.chat.lock import claim_conversation;"
        "from agentkit.chat.store import conversation_path;"
        "ws, cid = Path(sys.argv[1]), sys.argv[2];"
        "claim_conversation(conversation_path(ws, cid).with_suffix('.lock'), cid, lambda: True);"
        "print('held', flush=True); time.sleep(120)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(workspace), cid], env=env,
                            stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        yield
    finally:
        proc.kill()
        proc.wait(30)


def overflow(page: Any) -> int:
    return int(page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth"))


# ------------------------------------------------- 1. the message stays its own
@pytest.mark.parametrize("why", ["damaged", "held"])
def test_a_message_typed_for_a_conversation_that_cannot_be_opened_comes_back_and_goes_nowhere_else(
    browser: Any, workspace: Path, why: str
) -> None:
    seen: list[str] = []
    with running_web(workspace, echo(seen)) as web, tabs(browser) as context, ExitStack() as stack:
        healthy = said(web, "healthy one")
        if why == "damaged":
            target = DAMAGED
            damage(workspace, age=3600)
        else:
            target = said(web, "held one")
            web.server.app.state.agentkit.workspace.close_session(target)
            stack.enter_context(held_elsewhere(workspace, target))
        page = context.new_page()
        page.goto(f"{web.url}/#{healthy}")
        shows(page, healthy, "healthy one")
        held: list[Any] = []

        def hold_switch(route: Any) -> None:
            if json.loads(route.request.post_data or "{}").get("to") == target:
                held.append(route)
            else:
                route.continue_()

        page.route("**/api/switch", hold_switch)
        with page.expect_request("**/api/switch"):
            pick(page, target)
        send(page, "PENDING-IN-DAMAGED")  # typed while the page opens the target
        expect(page.locator(".message.user.pending")).to_have_text("PENDING-IN-DAMAGED")
        assert len(held) == 1
        held[0].continue_()  # refused by the server
        composer = page.get_by_test_id("composer")
        expect(composer).to_have_value("PENDING-IN-DAMAGED")
        notice = page.get_by_test_id("notice")
        expect(notice).to_have_count(1)
        expect(notice).to_contain_text("Could not open")
        expect(notice).to_contain_text("it is back in the message box")
        words = notice.inner_text()
        assert "pid" not in words
        if why == "held":
            expect(notice).to_contain_text("open in another agentkit process")
            assert target not in words and "“held one”" in words
        expect(page.locator(".message.pending")).to_have_count(0)
        expect(page.get_by_test_id("send")).to_have_text("Send")
        shows(page, healthy, "healthy one")
        # Switching on (to a new conversation) carries nothing along.
        page.get_by_test_id("new-conversation").click()
        expect(page.locator("[data-testid=conversation].current")).not_to_have_attribute(
            "data-id", healthy
        )
        page.wait_for_timeout(500)  # a post would go out at once
        expect(composer).to_have_value("PENDING-IN-DAMAGED")
        assert "PENDING-IN-DAMAGED" not in user_texts(web)
        assert "PENDING-IN-DAMAGED" not in seen


# ------------------------------------------------------- 2. a refused switch
def test_a_refused_switch_stays_where_it_was_and_says_why_once(
    browser: Any, workspace: Path
) -> None:
    gate = Gate()
    with running_web(workspace, background(gate)) as web, tabs(browser) as context:
        other = said(web, "other one")
        damage(workspace, DAMAGED, age=3600)
        damage(workspace, OTHER_DAMAGED, text='{"messages": [', age=3600)
        page = context.new_page()
        page.goto(web.url)
        shows(page, other, "other one")
        page.get_by_test_id("new-conversation").click()
        expect(page.get_by_test_id("conversation")).to_have_count(4)
        send(page, "go")  # a background sub-agent works in this one
        row = page.locator('[data-testid=subagent][data-agent-id="1"]')
        expect(row).to_have_attribute("data-status", "running")
        cid = page.evaluate("location.hash.slice(1)")
        assert cid != other
        errors = page.locator("#chat").get_by_text(re.compile("is damaged"))
        for _ in range(2):  # each click says it again: still once
            pick(page, DAMAGED)
            expect(page.get_by_test_id("notice")).to_contain_text("char 57")
            expect(errors).to_have_count(1)
            shows(page, cid, "go")
        pick(page, OTHER_DAMAGED)  # the previous one's error goes
        expect(page.get_by_test_id("notice")).to_contain_text("char 14")
        expect(errors).to_have_count(1)
        assert "char 57" not in page.locator("#chat").inner_text()
        # Still on it, its sub-agent still working, its stream followed.
        shows(page, cid, "go")
        expect(page.get_by_test_id("state")).to_have_text("waiting for 1 sub-agent")
        expect(row).to_have_attribute("data-status", "running")
        rows = web.client.get(f"/api/conversations/{cid}/subagents").json()["subagents"]
        assert [r["status"] for r in rows] == ["running"]
        assert page.get_by_test_id("leave-dialog").is_hidden()  # nothing was asked
        send(page, "still here")
        expect(messages(page, "assistant").last).to_have_text("ok: still here")
        # A switch that succeeds clears the error.
        pick(page, other)
        page.get_by_test_id("leave-go").click()
        shows(page, other, "other one")
        expect(page.get_by_test_id("notice")).to_have_count(0)
        expect(errors).to_have_count(0)
        gate.event.set()


def test_start_up_opens_the_newest_conversation_that_can_be_opened(
    browser: Any, workspace: Path
) -> None:
    with running_web(workspace, echo()) as web, tabs(browser) as context:
        healthy = said(web, "healthy one")
        damage(workspace, age=-60)  # the newest file
        listed = web.client.get("/api/conversations").json()["conversations"]
        assert [c["id"] for c in listed] == [DAMAGED, healthy]
        page = context.new_page()
        page.goto(web.url)
        shows(page, healthy, "healthy one")
        expect(messages(page, "assistant")).to_have_text("ok: healthy one")
        expect(page.get_by_test_id("notice")).to_have_count(0)
        # Asked for by its address: tried, refused in words, and the next one opens.
        page.goto(f"{web.url}/#{DAMAGED}")
        page.reload()
        shows(page, healthy, "healthy one")
        notice = page.get_by_test_id("notice")
        expect(notice).to_have_count(1)
        expect(notice).to_contain_text("Could not open a damaged conversation")
        assert page.evaluate("location.hash") == f"#{healthy}"


def test_new_conversation_clicked_before_the_list_arrives_stays_shown(
    browser: Any, workspace: Path
) -> None:
    """The person's "+ New" wins over start-up's choice (the newest conversation), and
    the list asked at start-up, answered last, does not hide the new one (CI: the page
    moved back to the older conversation and its approval card never showed)."""
    with running_web(workspace, echo()) as web, tabs(browser) as context:
        earlier = said(web, "earlier one")
        page = context.new_page()
        held: list[tuple[Any, Any]] = []

        def hold_first_list(route: Any) -> None:
            if held or route.request.method != "GET":
                route.continue_()
            else:  # answered now (one conversation), delivered later
                held.append((route, route.fetch()))

        page.route("**/api/conversations", hold_first_list)
        page.goto(web.url)
        for _ in range(3000):  # the start-up's list, waited for while events are handled
            if held:
                break
            page.wait_for_timeout(20)
        assert len(held) == 1
        send(page, "typed at start")  # for start-up's choice, which the click replaces
        page.get_by_test_id("new-conversation").click()
        current = page.locator("[data-testid=conversation].current")
        expect(current).not_to_have_attribute("data-id", earlier)
        cid = page.evaluate("location.hash.slice(1)")
        assert cid and cid != earlier
        held[0][0].fulfill(response=held[0][1])
        page.wait_for_function("() => window.agentkitDebug.settled >= 2")
        expect(current).to_have_attribute("data-id", cid)
        assert page.evaluate("location.hash.slice(1)") == cid
        expect(page.get_by_test_id("conversation")).to_have_count(2)
        expect(page.get_by_test_id("composer")).to_have_value("typed at start")
        expect(page.locator(".message.pending")).to_have_count(0)
        page.get_by_test_id("composer").fill("")
        send(page, "in the new one")
        expect(messages(page, "assistant")).to_have_text("ok: in the new one")
        assert user_texts(web) == ["in the new one", "earlier one"]  # newest first


def test_a_notice_fits_a_360_px_screen(browser: Any, workspace: Path) -> None:
    with running_web(workspace, echo()) as web, tabs(browser, 360) as context:
        healthy = said(web, "healthy one")
        damage(workspace, age=3600)
        page = context.new_page()
        page.goto(web.url)
        shows(page, healthy, "healthy one")
        pick(page, DAMAGED)
        notice = page.get_by_test_id("notice")
        expect(page.get_by_test_id("sidebar-toggle")).to_have_attribute("aria-expanded", "false")
        expect(notice).to_be_in_viewport()
        assert overflow(page) == 0
        box = notice.get_by_role("button", name="Dismiss").bounding_box()
        assert box["width"] >= 40 and box["height"] >= 40
        notice.get_by_role("button", name="Dismiss").click()
        expect(notice).to_have_count(0)


# ------------------------------------------------ 3. another tab changed it
def two_tabs_on_background_work(web: Web, context: Any) -> tuple[Any, Any, str]:
    """Tab ``a`` starts sub-agent 1 in the background; tab ``b`` opens the same
    conversation. Returns ``(a, b, conversation id)``."""
    a = context.new_page()
    a.goto(web.url)
    send(a, "go")
    expect(a.locator('[data-testid=subagent][data-agent-id="1"]')).to_have_attribute(
        "data-status", "running"
    )
    cid = a.evaluate("location.hash.slice(1)")
    b = context.new_page()
    b.goto(f"{web.url}/#{cid}")
    return a, b, str(cid)


def test_a_conversation_deleted_in_another_tab_is_left_in_words(
    browser: Any, workspace: Path
) -> None:
    gate = Gate()
    with running_web(workspace, background(gate)) as web, tabs(browser) as context:
        a, b, cid = two_tabs_on_background_work(web, context)
        expect(b.get_by_test_id("state")).to_have_text("waiting for 1 sub-agent")
        b.get_by_test_id("composer").fill("half-typed draft")
        delete = item(a, cid).get_by_role("button", name="Delete")
        delete.click()
        expect(delete).to_have_text("delete and stop its sub-agent?")
        delete.click()
        notice = b.get_by_test_id("notice")
        expect(notice).to_have_text(re.compile(r"^“go” was deleted \(in another tab or window\)\."))
        expect(item(b, cid)).to_have_count(0)
        expect(b.locator("[data-testid=conversation].current")).to_have_count(1)
        expect(b.get_by_test_id("title")).not_to_have_text("…")
        expect(b.get_by_test_id("composer")).to_have_value("half-typed draft")
        expect(b.get_by_test_id("state")).to_have_text("idle")
        expect(b.get_by_test_id("work")).not_to_have_text("background work still running")
        assert cid not in b.locator("body").inner_text()
        assert "no conversation" not in b.locator("body").inner_text()
        gate.event.set()


def test_a_message_sent_to_a_conversation_deleted_elsewhere_comes_back(
    browser: Any, workspace: Path
) -> None:
    with running_web(workspace, echo()) as web, tabs(browser) as context:
        other = said(web, "other one")
        gone = said(web, "doomed one")
        page = context.new_page()
        page.goto(f"{web.url}/#{gone}")
        shows(page, gone, "doomed one")
        # Its stream cannot say so (reconnections fail): the send is the first to hear.
        page.route("**/api/conversations/*/events*", lambda route: route.abort())
        assert web.client.delete(f"/api/conversations/{gone}").status_code == 200
        send(page, "after the delete")
        notice = page.get_by_test_id("notice")
        expect(notice).to_contain_text("“doomed one” was deleted (in another tab or window).")
        expect(notice).to_contain_text("it is back in the message box")
        expect(page.get_by_test_id("composer")).to_have_value("after the delete")
        page.unroute("**/api/conversations/*/events*")
        shows(page, other, "other one")
        expect(item(page, gone)).to_have_count(0)
        assert "no conversation" not in page.locator("body").inner_text()
        assert "after the delete" not in user_texts(web)


HEAD = """() => {
  window.headSeen = [];
  const note = () => window.headSeen.push([
    ...['state', 'title', 'work'].map((id) => document.getElementById(id).textContent),
    document.querySelectorAll('[data-testid=subagent][data-status=running]').length,
  ]);
  new MutationObserver(note).observe(document.body, { subtree: true, childList: true, characterData: true });
  note();
}"""


def stale(head: list[Any]) -> bool:
    """A header that is out of date or unreadable: a state word without its count, an
    id, or background work said to run while no sub-agent runs."""
    state, title, work, running = head
    return (
        state == "waiting for sub-agents"
        or "conv_" in f"{state}{title}{work}"
        or (work == "background work still running" and running == 0)
    )


def test_a_conversation_closed_by_another_tab_shows_its_fresh_state_and_reopens(
    browser: Any, workspace: Path
) -> None:
    gate = Gate()
    with running_web(workspace, background(gate)) as web, tabs(browser) as context:
        a, b, cid = two_tabs_on_background_work(web, context)
        row = b.locator('[data-testid=subagent][data-agent-id="1"]')
        expect(row).to_have_attribute("data-status", "running")
        b.evaluate(HEAD)
        a.get_by_test_id("new-conversation").click()
        a.get_by_test_id("leave-go").click()  # A leaves it: its sub-agent is stopped
        expect(row).to_have_attribute("data-status", "terminated")
        expect(b.get_by_test_id("notice")).to_contain_text("was closed in another tab or window")
        expect(b.get_by_test_id("state")).to_have_text("idle")
        expect(b.get_by_test_id("work")).not_to_have_text("background work still running")
        shows(b, cid, "go")
        send(b, "after the close")
        expect(messages(b, "assistant").last).to_have_text("ok: after the close")
        assert web.server.app.state.agentkit.workspace.get(cid) is not None
        seen = b.evaluate("window.headSeen")
        assert [head for head in seen if stale(head)] == [], seen
        gate.event.set()


BUSY = "the server has 64 conversations open and every one is busy; try again when one is idle"


def test_a_conversation_that_cannot_be_reopened_says_why_until_the_user_acts(
    browser: Any, workspace: Path
) -> None:
    with running_web(workspace, echo()) as web, tabs(browser) as context:
        cid = said(web, "shared one")
        a, b = context.new_page(), context.new_page()
        for tab in (a, b):
            tab.goto(f"{web.url}/#{cid}")
            shows(tab, cid, "shared one")
        busy = json.dumps({"error": BUSY})
        b.route(
            "**/api/switch",
            lambda route: route.fulfill(status=503, body=busy, content_type="application/json"),
        )
        a.get_by_test_id("new-conversation").click()  # A leaves it: closed on the server
        notice = b.get_by_test_id("notice")
        expect(notice).to_contain_text("“shared one” was closed")
        expect(notice).to_contain_text(f"could not be opened again: {BUSY}.")
        expect(notice).to_contain_text("Send a message or click it to try again.")
        expect(b.get_by_test_id("state")).to_have_text("idle")
        pick(b, cid)  # clicking it tries again: the same words, once
        expect(notice).to_have_count(1)
        send(b, "refused again")
        expect(notice).to_contain_text("it is back in the message box")
        expect(b.get_by_test_id("composer")).to_have_value("refused again")
        b.unroute("**/api/switch")
        b.get_by_test_id("send").click()  # the user acts: it is opened again
        expect(messages(b, "assistant").last).to_have_text("ok: refused again")
        expect(notice).to_have_count(0)
        expect(b.get_by_test_id("composer")).to_have_value("")
        shows(b, cid, "shared one")
