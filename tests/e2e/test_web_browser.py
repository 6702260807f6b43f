"""The web chat in a real browser: headless Chromium (the distribution's, /usr/bin/chromium)
driven by Playwright for Python, against the real server with a scripted model.

Skipped when Playwright or /usr/bin/chromium is missing (.ci/run installs both).
Screenshots go to the test's tmp dir; AGENTKIT_WEB_SCREENSHOT=path saves the mid-run
one there too (the README's pictures come from docs/screenshots.py, a demo session).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Gate, Router, call, calls, finish, wait_until
from web_helpers import CuttableProxy, Web, running_web

from agentkit.testing import Reply

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium"),
]
playwright_api = pytest.importorskip("playwright.sync_api")
# A loaded machine (2 cores, the first round imports the openai package) needs more
# than expect()'s default 5 s; the page's timeouts are set per tab below.
playwright_api.expect.set_options(timeout=20_000)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.dialogs = []  # type: ignore[attr-defined]
    tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
    tab.set_default_timeout(20_000)
    yield tab
    context.close()


@contextmanager
def serving(page: Any, workspace: Path, handler: Any) -> Iterator[Web]:
    """``running_web(workspace, handler)`` whose ``page`` is closed before the server
    stops. An open page reopens its conversation when the server's stop closes it,
    and uvicorn then waits out its 3 s grace for that new event stream."""
    with running_web(workspace, handler) as web:
        try:
            yield web
        finally:
            page.close()


def expect(locator: Any) -> Any:
    return playwright_api.expect(locator)


def send(page: Any, text: str) -> None:
    page.get_by_test_id("composer").fill(text)
    page.get_by_test_id("send").click()


def assistant(page: Any) -> Any:
    return page.locator("[data-testid=message][data-role=assistant]")


def test_type_a_message_and_see_the_streamed_answer(workspace: Path, page: Any) -> None:
    reply = Reply(content="Here is **bold** and `code`.\n\n- one\n- two", chunk_delay=0.05)
    with serving(page, workspace, [reply]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "hello there")
        expect(page.locator("[data-testid=message][data-role=user]")).to_have_text("hello there")
        expect(assistant(page).locator("strong")).to_have_text("bold")
        expect(assistant(page).locator("li")).to_have_count(2)
        expect(page.get_by_test_id("state")).to_have_text("idle")
        # The composer stays usable: a second message is accepted at once.
        expect(page.get_by_test_id("composer")).to_be_editable()


def _router(gate: Gate, summary: str = "Write the report") -> Router:
    return Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary=summary,
                    task="read notes.txt and write report.md",
                    run_in_background=True,
                )
            ),
            "Started a sub-agent in the background.",
            "The report is **ready**.",
        ],
        subs={
            1: [
                calls(call("read_file", path="notes.txt")),
                calls(call("search_workspace", pattern="alpha")),
                calls(
                    call(
                        "write_file",
                        path="sub_agent_results/agent_1/report.md",
                        content="# Report\n<img src=x onerror=window.__pwned=9>\n",
                    )
                ),
                gate.hold(finish("Wrote report.md.")),
            ]
        },
    )


def test_background_subagent_runs_completes_and_notification_round_appears(
    workspace: Path, page: Any, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with serving(page, workspace, _router(gate)) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        page.evaluate("window.__notReloaded = true")
        send(page, "write a report in the background")
        row = page.locator('[data-testid=subagent][data-agent-id="1"]')
        expect(row).to_have_attribute("data-status", "running")
        # the counters in the chat's, show's and ACP's words (agentkit.chat.explain)
        expect(row.locator("[data-counter=files_read]")).to_have_text("1 file read")
        expect(row.locator("[data-counter=searches]")).to_have_text("1 search")
        expect(page.get_by_test_id("state")).to_have_text("waiting for 1 sub-agent")
        expect(page.get_by_test_id("state")).to_have_attribute(
            "data-state", "waiting_for_subagents"
        )
        expect(page.get_by_test_id("work")).to_have_text("background work still running")
        # The deliverables viewer shows the hostile file as text.
        assert wait_until(lambda: (workspace / "sub_agent_results/agent_1/report.md").exists())
        row.click()
        page.get_by_test_id("deliverable").first.click()
        expect(page.get_by_test_id("file-view")).to_contain_text("<img src=x onerror")
        shot = tmp_path / "page-mid-run.png"
        page.screenshot(path=str(shot))
        if os.environ.get("AGENTKIT_WEB_SCREENSHOT"):
            shutil.copy(shot, os.environ["AGENTKIT_WEB_SCREENSHOT"])
        gate.event.set()
        expect(row).to_have_attribute("data-status", "completed")
        notification = page.locator("[data-testid=message][data-role=notification]")
        expect(notification).to_have_count(1)
        expect(assistant(page).last.locator("strong")).to_have_text("ready")
        expect(page.get_by_test_id("state")).to_have_text("idle")
        expect(page.get_by_test_id("work")).to_have_text("all done")
        assert page.evaluate("window.__notReloaded") is True
        assert page.evaluate("window.__pwned") is None and page.dialogs == []
        assert shot.stat().st_size > 10_000


def started_in_background(page: Any, url: str) -> Any:
    """Open the page, send "go" (the model of ``_router`` starts sub-agent 1 in the
    background) and return sub-agent 1's row once it runs."""
    page.goto(url)
    expect(page.get_by_test_id("conversation")).to_have_count(1)
    send(page, "go")
    row = page.locator('[data-testid=subagent][data-agent-id="1"]')
    expect(row).to_have_attribute("data-status", "running")
    return row


def test_stop_a_running_subagent_from_its_button(workspace: Path, page: Any) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with serving(page, workspace, _router(gate)) as web:
        row = started_in_background(page, web.url)
        boxes = [row.locator(sel).bounding_box() for sel in (".line", ".last", ".counters")]
        stop = row.get_by_test_id("subagent-stop").bounding_box()
        for box in boxes:  # the Stop button covers none of the row's text
            assert box["x"] + box["width"] <= stop["x"] or box["y"] >= stop["y"] + stop["height"]
        row.get_by_test_id("subagent-stop").click()
        expect(row).to_have_attribute("data-status", "terminated")
        expect(row.get_by_test_id("subagent-stop")).to_be_hidden()
        gate.event.set()


def test_leaving_a_conversation_whose_sub_agent_works_asks_first(
    workspace: Path, page: Any
) -> None:
    """Switching ends the conversation's sub-agents (§8.5): the page says so and lets
    the person stay (a new user's trial: the work was stopped without a word)."""
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with serving(page, workspace, _router(gate)) as web:
        row = started_in_background(page, web.url)
        first = page.evaluate("location.hash")
        leave = page.get_by_test_id("leave-dialog")
        page.get_by_test_id("new-conversation").click()
        expect(leave).to_be_visible()
        # Worded by what was clicked (New, not a switch); the button that stops work
        # is styled as destructive, the one that stays is not (issue 35).
        expect(leave).to_contain_text(
            "1 sub-agent still working. Starting a new conversation stops it;"
        )
        expect(page.get_by_test_id("leave-go")).to_have_text("Start new and stop it")
        colour = "el => getComputedStyle(el).backgroundColor"
        assert page.get_by_test_id("leave-go").evaluate(colour) == "rgb(179, 38, 30)"
        assert page.get_by_test_id("leave-stay").evaluate(colour) != "rgb(179, 38, 30)"
        page.get_by_test_id("leave-stay").click()
        expect(leave).to_be_hidden()
        expect(row).to_have_attribute("data-status", "running")
        current = page.locator("[data-testid=conversation].current")
        expect(current.locator(".meta")).to_contain_text("waiting for 1 sub-agent")
        current.get_by_role("button", name="Delete").click()  # armed: it says what it ends
        expect(current.get_by_role("button", name="Delete")).to_have_text(
            "delete and stop its sub-agent?"
        )
        page.keyboard.press("n")  # the shortcut asks too; Esc stays
        expect(leave).to_be_visible()
        page.keyboard.press("Escape")
        expect(leave).to_be_hidden()
        assert page.evaluate("location.hash") == first
        expect(row).to_have_attribute("data-status", "running")
        page.get_by_test_id("new-conversation").click()
        page.get_by_test_id("leave-go").click()
        expect(page.get_by_test_id("conversation")).to_have_count(2)
        expect(page.get_by_test_id("message")).to_have_count(0)
        assert page.evaluate("location.hash") != first
        cid = first.removeprefix("#")
        rows = web.client.get(f"/api/conversations/{cid}/subagents").json()["subagents"]
        assert [r["status"] for r in rows] == ["terminated"]
        gate.event.set()
        assert page.dialogs == []  # no browser alert: the page's own dialog


def test_deleting_the_current_conversation_asks_nothing_of_it_afterwards(
    workspace: Path, page: Any
) -> None:
    """Regression (a new user's trial): deleting the conversation on screen while its
    sub-agent worked left its event stream open; the sub-agent's end then made the
    page fetch the deleted conversation (404s in the console)."""
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    with serving(page, workspace, _router(gate)) as web:
        errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        started_in_background(page, web.url)
        current = page.locator("[data-testid=conversation].current")
        gone = current.get_attribute("data-id")
        current.get_by_test_id("delete-conversation").click()
        current.get_by_test_id("delete-conversation").click()
        expect(page.locator(f'[data-testid=conversation][data-id="{gone}"]')).to_have_count(0)
        expect(page.get_by_test_id("message")).to_have_count(0)
        gate.event.set()
        page.wait_for_timeout(4000)  # past EventSource's reconnection delay (3 s)
        assert errors == []


def test_switch_between_conversations(workspace: Path, page: Any) -> None:
    with serving(
        page, workspace, lambda request: "ok: " + request["messages"][-1]["content"]
    ) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "first conversation")
        expect(assistant(page)).to_have_text("ok: first conversation")
        page.get_by_test_id("new-conversation").click()
        expect(page.get_by_test_id("conversation")).to_have_count(2)
        expect(page.get_by_test_id("message")).to_have_count(0)
        send(page, "second conversation")
        expect(assistant(page)).to_have_text("ok: second conversation")
        page.get_by_test_id("conversation").filter(has_text="first conversation").locator(
            ".name"
        ).click()
        expect(page.locator("[data-testid=message][data-role=user]")).to_have_text(
            "first conversation"
        )
        expect(assistant(page)).to_have_text("ok: first conversation")


HOSTILE = "\n\n".join(
    [
        "<img src=x onerror=\"window.__pwned='img'\">",
        "<script>window.__pwned='script'</script>",
        "[click me](javascript:window.__pwned='link')",
        "[spaced]( JaVaScRiPt:alert('x'))",
        "![pic](javascript:alert('img'))",
        "![tracker](http://127.0.0.1:9/t.png)",
        "[data](data:text/html,<script>alert(1)</script>)",
        '<a href="javascript:alert(1)">raw anchor</a>',
        "**<svg onload=alert(1)>**",
        "`<img src=x onerror=alert(2)>`",
        "```html\n<svg onload=alert(3)></svg>\n```",
        "[fine](https://example.com/ok)",
    ]
)


def test_hostile_reply_and_tool_output_stay_inert(workspace: Path, page: Any) -> None:
    (workspace / "evil.html").write_text(
        "<script>window.__pwned='tool'</script><img src=x onerror=alert(1)>"
    )
    script = [calls(call("read_file", path="evil.html")), HOSTILE]
    with serving(page, workspace, script) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "be evil")
        expect(assistant(page).locator("a")).to_have_count(2)
        expect(page.get_by_test_id("state")).to_have_text("idle")
        page.locator("[data-testid=tool-call] summary").first.click()
        expect(page.locator("[data-testid=tool-call] .output").first).to_contain_text("<script>")
        for text in ("click me", "spaced", "raw anchor"):
            page.get_by_text(text).first.click()
        hrefs = assistant(page).locator("a").evaluate_all("(as) => as.map((a) => a.href)")
        assert hrefs == ["http://127.0.0.1:9/t.png", "https://example.com/ok"]
        inert = page.evaluate(
            """() => ({
                pwned: window.__pwned ?? null,
                images: document.querySelectorAll('#messages img').length,
                scripts: document.querySelectorAll('#messages script').length,
                svgs: document.querySelectorAll('#messages svg').length,
            })"""
        )
        assert inert == {"pwned": None, "images": 0, "scripts": 0, "svgs": 0}
        assert page.dialogs == []
        assert "<img src=x" in assistant(page).first.inner_text()


def test_dropped_event_stream_resumes_without_loss_or_repeat(workspace: Path, page: Any) -> None:
    words = " ".join(f"w{i}" for i in range(60))
    gate = Gate()
    # 12 s of stream: on a loaded machine "w5" may show seconds late, and a cut after
    # the answer's end would test no resumption (CI saw one connection only).
    script = [gate.hold(Reply(content=words, chunk_delay=0.2))]
    with serving(page, workspace, script) as web:
        proxy = CuttableProxy(web.server.port)
        try:
            page.goto(proxy.url)
            expect(page.get_by_test_id("conversation")).to_have_count(1)
            send(page, "stream a long answer")
            gate.event.set()
            expect(assistant(page)).to_contain_text("w5")
            proxy.cut()  # the stream (and any other connection) drops mid-answer
            expect(assistant(page)).to_have_text(words)
            expect(page.get_by_test_id("state")).to_have_text("idle")
            page.wait_for_function("() => window.agentkitDebug.connections >= 2")
            debug = page.evaluate("window.agentkitDebug")
            assert proxy.cuts == 1
        finally:
            proxy.close()
        seqs = debug["seqs"]
        assert debug["connections"] >= 2
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


def test_rename_and_delete_from_the_sidebar(workspace: Path, page: Any) -> None:
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "keep me")
        expect(assistant(page)).to_have_text("ok")
        page.get_by_test_id("new-conversation").click()
        expect(page.get_by_test_id("conversation")).to_have_count(2)
        first = page.get_by_test_id("conversation").filter(has_text="keep me")
        first.get_by_title("Rename").click()
        page.get_by_test_id("rename-input").fill("Renamed <b>x</b>")
        page.get_by_test_id("rename-input").press("Enter")
        renamed = page.get_by_test_id("conversation").filter(has_text="Renamed <b>x</b>")
        expect(renamed).to_have_count(1)
        renamed.get_by_title("Delete").click()
        renamed.get_by_title("Delete").click()  # the second click confirms
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        listed = web.client.get("/api/conversations").json()["conversations"]
        assert all(c["title"] != "Renamed <b>x</b>" for c in listed)


RENDER = """async (cases) => {
    const md = await import("/markdown.js");
    return cases.map((source) => {
        const box = document.createElement("div");
        box.append(md.renderMarkdown(source));
        const pick = (sel) => [...box.querySelectorAll(sel)];
        return {
            text: box.textContent,
            html: box.innerHTML,
            links: pick("a").map((a) => [a.textContent, a.href, a.parentElement.tagName]),
            tags: pick("*").map((n) => n.tagName.toLowerCase()),
            items: pick("li").map((li) => [li.parentElement.tagName, li.firstChild.textContent]),
            cells: pick("th, td").map((c) => c.textContent),
            start: pick("ol").map((o) => o.start),
        };
    });
}"""


def _render(page: Any, cases: list[str]) -> list[dict[str, Any]]:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    out: list[dict[str, Any]] = page.evaluate(RENDER, cases)
    assert errors == [] and page.evaluate("window.agentkitDebug.renderErrors ?? 0") == 0
    return out


def test_markdown_bare_urls_and_autolinks_render_as_links(workspace: Path, page: Any) -> None:
    many = " ".join(f"https://example.com/{i}" for i in range(300))
    cases = [
        "see https://example.com/x and more",
        "**bold https://x.org**",
        "*it https://x.org/a_b* and __under http://x.org/u__",
        "`https://x.org/code` and ```https://x.org/fence```",
        "<https://example.org> and <mailto:a@example.org>",
        "[https://x.org/label](https://y.org/target)",
        "(see https://x.org/a).",
        many,
        "**" * 3000 + "https://x.org/deep" + "**" * 3000,
    ]
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        out = _render(page, cases)
    assert out[0]["links"] == [["https://example.com/x", "https://example.com/x", "P"]]
    assert out[0]["text"] == cases[0]
    assert out[1]["links"] == [["https://x.org", "https://x.org/", "STRONG"]]
    assert out[2]["links"] == [
        ["https://x.org/a_b", "https://x.org/a_b", "EM"],
        ["http://x.org/u", "http://x.org/u", "STRONG"],
    ]
    assert out[3]["links"] == [] and out[3]["tags"].count("code") == 2
    assert out[4]["links"] == [
        ["https://example.org", "https://example.org/", "P"],
        ["mailto:a@example.org", "mailto:a@example.org", "P"],
    ]
    assert out[4]["text"] == "https://example.org and mailto:a@example.org"
    assert out[5]["links"] == [["https://x.org/label", "https://y.org/target", "P"]]
    assert out[6]["links"] == [["https://x.org/a", "https://x.org/a", "P"]]
    assert len(out[7]["links"]) == 300 and out[7]["text"] == many
    assert "https://x.org/deep" in out[8]["text"]


def test_markdown_underscores_inside_words_are_not_emphasis(workspace: Path, page: Any) -> None:
    """Regression: `my_var_name` rendered `my<em>var</em>name`. As CommonMark says, `_`
    and `__` open only after a non-alphanumeric character and close only before one;
    `*` still works inside words, and code spans are never touched."""
    cases = {
        "my_var_name and sub_agent_results/agent_1/x_y.md": "<p>my_var_name and sub_agent_results/agent_1/x_y.md</p>",
        "x__y__z and 日本_語_です and _a_1": "<p>x__y__z and 日本_語_です and _a_1</p>",
        "_whole words_ and __strong words__": "<p><em>whole words</em> and <strong>strong words</strong></p>",
        "_foo_bar_ (_paren_) a_b *c*": "<p><em>foo_bar</em> (<em>paren</em>) a_b <em>c</em></p>",
        "un*frigging*believable and a**b**c": "<p>un<em>frigging</em>believable and a<strong>b</strong>c</p>",
        "`my_var_name` and `_x_/y_z.md`": "<p><code>my_var_name</code> and <code>_x_/y_z.md</code></p>",
    }  # fmt: skip
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        out = _render(page, list(cases))
    assert [o["html"] for o in out] == list(cases.values())


def test_bidirectional_overrides_in_messages_are_shown_not_obeyed(
    workspace: Path, page: Any
) -> None:
    """Regression (a new user's trial): U+202E in a message made "evil" read "live";
    titles dropped such controls, message bodies obeyed them. Now each is shown as
    its code point, in the Markdown of an answer and in a user's message alike."""
    tricky = "gninibmoc \u202eevil\u202c and \u2067x\u2069"
    with serving(page, workspace, ["the answer " + tricky]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        (out,) = _render(page, [tricky])
        assert out["text"] == "gninibmoc [U+202E]evil[U+202C] and [U+2067]x[U+2069]"
        page.get_by_test_id("composer").fill("mine " + tricky)
        page.get_by_test_id("send").click()
        answer = page.locator("[data-testid=message][data-role=assistant]")
        expect(answer).to_have_text("the answer " + out["text"])
        user = page.locator("[data-testid=message][data-role=user]")
        expect(user).to_have_text("mine " + out["text"])
        sent = web.client.get("/api/conversations").json()["conversations"][0]["id"]
        said = web.client.get(f"/api/conversations/{sent}").json()["messages"]
        assert any(m["content"] == "mine " + tricky for m in said)  # stored as written


def test_markdown_lists_tables_and_entities(workspace: Path, page: Any) -> None:
    cases = [
        "- a\n- b\n  - c\n  - d\n- e\n\n1. one\n2. two\n   1. two.a\n3. three",
        "- bullet\n1. number",
        "3. third\n4. fourth",
        "Scores:\n| name | score |\n|:-----|------:|\n| <b>ann</b> | 3 |\n| bo \\| b | 4 |\n\nafter",
        "&lt;b&gt;x&lt;/b&gt; &amp; &#60;i&#x3E; &bogus; `&lt;kept&gt;`",
    ]
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        out = _render(page, cases)
    assert out[0]["items"] == [
        ["UL", "a"], ["UL", "b"], ["UL", "c"], ["UL", "d"], ["UL", "e"],
        ["OL", "one"], ["OL", "two"], ["OL", "two.a"], ["OL", "three"],
    ]  # fmt: skip
    assert out[0]["tags"] == [
        "ul",
        "li",
        "li",
        "ul",
        "li",
        "li",
        "li",
        "ol",
        "li",
        "li",
        "ol",
        "li",
        "li",
    ]
    assert out[1]["tags"] == ["ul", "li", "ol", "li"]
    assert out[2]["start"] == [3]
    assert out[3]["cells"] == ["name", "score", "<b>ann</b>", "3", "bo | b", "4"]
    assert "b" not in out[3]["tags"] and out[3]["tags"][0] == "p" and out[3]["tags"][-1] == "p"
    assert out[4]["text"] == "<b>x</b> & <i> &bogus; &lt;kept&gt;"
    assert "b" not in out[4]["tags"] and "i" not in out[4]["tags"]


def test_urls_in_answers_render_and_survive_a_reload(workspace: Path, page: Any) -> None:
    first = (
        "see https://example.com/x and more\n\n- **bold https://x.org**\n- <https://example.org>"
    )
    with serving(page, workspace, [first, "second answer"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "links please")
        expect(assistant(page).first.locator("a")).to_have_count(3)
        send(page, "again")
        expect(assistant(page)).to_have_count(2)
        expect(page.get_by_test_id("work")).to_have_text("all done")
        page.reload()
        expect(assistant(page)).to_have_count(2)
        expect(page.get_by_test_id("work")).to_have_text("all done")  # as live
        expect(assistant(page).nth(1)).to_have_text("second answer")
        expect(assistant(page).first.locator("a")).to_have_count(3)
        expect(page.locator("[data-testid=message][data-role=error]")).to_have_count(0)
        style = (
            assistant(page)
            .first.locator("li")
            .first.evaluate("(li) => getComputedStyle(li).listStyleType")
        )
        assert style == "disc"


def test_a_renderer_failure_shows_that_message_as_plain_text(workspace: Path, page: Any) -> None:
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        shown = page.evaluate(
            """async () => {
                const md = await import("/markdown.js");
                const box = document.createElement("div");
                const real = Document.prototype.createElement;
                Document.prototype.createElement = () => { throw new Error("boom"); };
                try { box.append(md.renderMarkdown("**x** https://x.org")); }
                finally { Document.prototype.createElement = real; }
                return [box.textContent, window.agentkitDebug.renderErrors];
            }"""
        )
        assert shown == ["**x** https://x.org", 1]


def _stream_status(web: Any, cid: str) -> int:
    """The status a conversation's event stream answers, its body unread (an open
    conversation's stream never ends)."""
    with web.client.stream("GET", f"/api/conversations/{cid}/events") as response:
        return int(response.status_code)


def test_page_reopens_its_conversation_when_the_stream_is_refused(
    workspace: Path, page: Any
) -> None:
    with serving(
        page, workspace, lambda request: "ok: " + request["messages"][-1]["content"]
    ) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "first")
        expect(assistant(page)).to_have_text("ok: first")
        cid = page.get_by_test_id("conversation").get_attribute("data-id")
        refused: list[int] = []

        def check_then_reopen(route: Any) -> None:
            # The page reopens at once (f49989a): its switch waits here while the stream
            # is asked, or the GET raced it, found it open and streamed on (a 120 s hang).
            refused.append(_stream_status(web, cid))
            route.continue_()

        page.route("**/api/switch", check_then_reopen)
        # Another client leaves it: the stream ends, a GET of it opens nothing (409),
        # and the page opens it again with a POST.
        with page.expect_response("**/api/switch") as reopened:
            other = web.post("/api/switch", {"leaving": cid, "to": None}).json()["id"]
        assert refused == [409]
        assert reopened.value.ok and reopened.value.request.post_data_json["to"] == cid
        assert web.server.app.state.agentkit.workspace.get(cid) is not None
        send(page, "still here")
        expect(assistant(page).nth(1)).to_have_text("ok: still here")
        assert other != cid


def test_a_message_sent_before_the_page_has_its_conversation_arrives(
    workspace: Path, page: Any
) -> None:
    """Regression (a held-back check failed one run in three): a message sent before
    the page had a conversation was silently dropped. The page's switch is held here
    until the message is typed and sent, so the early send happens every time."""
    held: list[Any] = []
    page.route("**/api/switch", lambda route: route.continue_() if held else held.append(route))
    with serving(
        page, workspace, lambda request: "ok: " + request["messages"][-1]["content"]
    ) as web:
        with page.expect_request("**/api/switch"):
            page.goto(web.url)
        send(page, "sent at once")
        expect(page.locator("[data-testid=message][data-role=user]")).to_have_text("sent at once")
        assert web.client.get("/api/conversations").json()["conversations"] == []
        held[0].continue_()
        expect(assistant(page)).to_have_text("ok: sent at once", timeout=20_000)
        expect(page.locator("[data-testid=message][data-role=user]")).to_have_text("sent at once")
        expect(page.locator(".message.user.queued")).to_have_count(0)
        listed = web.client.get("/api/conversations").json()["conversations"]
        assert [c["title"] for c in listed] == ["sent at once"]


HEADING_SIZES = """() => {
  const answer = [...document.querySelectorAll("[data-testid=message][data-role=assistant]")].pop();
  const size = (sel) => parseFloat(getComputedStyle(answer.querySelector(sel)).fontSize);
  return { h1: size("h3"), h2: size("h4"), h3: size("h5"), h4: size("h6"), body: size("p") };
}"""


def test_markdown_headings_are_larger_than_the_text(workspace: Path, page: Any) -> None:
    """Regression (issue 35): `###` rendered smaller than the body text (an h5)."""
    answer = "# One\n\n## Two\n\n### Three\n\n#### Four\n\nThe body text."
    with serving(page, workspace, [answer]) as web:
        page.goto(web.url)
        send(page, "headings please")
        expect(assistant(page)).to_contain_text("The body text.")
        sizes = page.evaluate(HEADING_SIZES)
    assert sizes["h1"] > sizes["h2"] > sizes["h3"] >= sizes["body"], sizes
    assert sizes["h4"] >= sizes["body"], sizes


def test_a_new_conversation_has_the_same_title_in_the_header_and_the_list(
    workspace: Path, page: Any
) -> None:
    """Regression (polish): while the page opened a new conversation its header said
    "…" and the sidebar "New conversation". The page's switch is held here so that
    moment is seen every time."""
    held: list[Any] = []
    page.route("**/api/switch", lambda route: route.continue_() if held else held.append(route))
    with serving(page, workspace, ["ok"]) as web:
        web.post("/api/conversations", {})  # saved, untitled: the one the page opens
        with page.expect_request("**/api/switch"):
            page.goto(web.url)
        listed = page.get_by_test_id("conversation").locator(".text")
        expect(listed).to_have_text("New conversation")
        expect(page.get_by_test_id("title")).to_have_text("New conversation")
        held[0].continue_()
        expect(page.get_by_test_id("conversation")).to_have_attribute("aria-current", "true")
        expect(page.get_by_test_id("title")).to_have_text("New conversation")
        page.get_by_test_id("new-conversation").click()  # nothing said: it stays
        expect(page.get_by_test_id("title")).to_have_text("New conversation")


AGENTS_HEADER = """() => {
  const header = document.querySelector("#agents > header");
  const box = (n) => n.getBoundingClientRect();
  const line = box(header.querySelector("strong")).height;
  return [...header.querySelectorAll("span")].filter((s) => s.textContent).map((s) => ({
    id: s.id, text: s.textContent, lines: Math.round(box(s).height / line),
    cut: s.scrollWidth > s.clientWidth,
  }));
}"""


def test_the_intro_card_names_the_agents_panel_by_its_title(workspace: Path, page: Any) -> None:
    """Regression (polish): the intro card said "the Sub-agents panel" of a panel titled
    "Agents"."""
    with serving(page, workspace, ["ok"]) as web:
        page.goto(web.url)
        panel = page.locator("#agents > header strong").inner_text()
        expect(page.get_by_test_id("empty-state")).to_contain_text(f"in the {panel} panel")


def test_the_agents_header_keeps_each_figure_on_one_line(
    workspace: Path, page: Any, tmp_path: Path
) -> None:
    """Regression (polish): at 1280 px the Agents header's "0 running · 2 ended" wrapped
    onto two lines next to the token figure (and so did the figure)."""
    router = Router(
        main=[
            calls(
                *(
                    call("create_sub_agent", agent_id=i, summary=f"part {i}", task="t")
                    for i in (1, 2)
                )
            ),
            "Both parts are done.",
        ],
        subs={i: [finish(f"part {i} done")] for i in (1, 2)},
    )
    with serving(page, workspace, router) as web:
        page.goto(web.url)
        send(page, "two parts")
        expect(assistant(page)).to_have_text("Both parts are done.")
        expect(page.locator("#agents-summary")).to_have_text("0 running · 2 ended")
        expect(page.get_by_test_id("conversation-cost")).to_contain_text("tokens")
        page.screenshot(path=str(tmp_path / "agents-header.png"))
        spans = page.evaluate(AGENTS_HEADER)
    assert [s["lines"] for s in spans] == [1, 1] and not any(s["cut"] for s in spans), spans


ORDER = """() => [...document.querySelectorAll(
  "#messages [data-testid=message], #messages [data-testid=tool-call]")].map((n) =>
  n.dataset.testid === "tool-call" ? "tool" : `${n.dataset.role}: ${n.innerText.trim()}`)"""


def test_a_queued_message_sits_where_the_model_got_it_live_and_after_a_reload(
    workspace: Path, page: Any
) -> None:
    """Regression (a fresh user's trial): live, a message sent while a round ran
    stayed where it was typed, above what the round showed meanwhile; a reload put it
    where the model received it, below."""
    (workspace / "notes.txt").write_text("a note\n")
    gate = Gate()
    script = [gate.hold(calls(call("read_file", path="notes.txt"))), "read it, and heard you"]
    with serving(page, workspace, script) as web:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "read the notes")
        expect(page.get_by_test_id("state")).to_have_attribute("data-state", "running")
        send(page, "and one more thing")  # joins the round at its next boundary
        expect(page.locator(".message.user.queued")).to_have_count(1)
        gate.event.set()
        expect(assistant(page)).to_have_text("read it, and heard you")
        expect(page.get_by_test_id("state")).to_have_text("idle")
        live = page.evaluate(ORDER)
        page.reload()
        expect(assistant(page)).to_have_text("read it, and heard you")
        reloaded = page.evaluate(ORDER)
    assert live == [
        "user: read the notes",
        "tool",
        "user: and one more thing",
        "assistant: read it, and heard you",
    ], live
    assert reloaded == live
