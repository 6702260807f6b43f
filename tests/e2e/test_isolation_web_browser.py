"""An isolated sub-agent's changes on the page (issue 34; docs/guide/web.md): in a real
browser, the Changes tab of an isolated sub-agent shows its file with +/- counts and
its diff (added and removed lines marked, the text escaped), Merge writes the file in
the real git workspace, the second sub-agent's merge reports the conflict in words
and writes nothing, and Discard asks first (dismissed: nothing dropped) and then
drops its branch. A shared sub-agent has no Changes tab."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from isolation_front_helpers import git, make_repo, two_isolated_and_a_shared, version
from web_helpers import running_web

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium")
def test_merge_and_discard_from_the_changes_tab(workspace: Path, tmp_path: Path) -> None:
    api = pytest.importorskip("playwright.sync_api")
    make_repo(workspace)
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    router = two_isolated_and_a_shared()
    with (
        running_web(workspace, router, subagent_isolation="available") as web,
        api.sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(web.url)
            api.expect(page.get_by_test_id("conversation")).to_have_count(1)
            page.get_by_test_id("composer").fill("two versions")
            page.get_by_test_id("send").click()
            api.expect(page.get_by_test_id("state")).to_have_text("idle", timeout=30_000)
            for agent_id in (1, 2, 3):
                row = page.locator(f'[data-testid=subagent][data-agent-id="{agent_id}"]')
                api.expect(row).to_have_attribute("data-status", "completed")

            # A shared sub-agent: no Changes tab.
            page.locator('[data-testid=subagent][data-agent-id="3"]').get_by_test_id(
                "subagent-open"
            ).click()
            api.expect(page.get_by_test_id("tab-changes")).to_be_hidden()
            page.get_by_test_id("subagent-detail-close").click()

            page.locator('[data-testid=subagent][data-agent-id="1"]').get_by_test_id(
                "subagent-open"
            ).click()
            page.get_by_test_id("tab-changes").click()
            changes = page.get_by_test_id("changes")
            api.expect(changes.get_by_test_id("changes-summary")).to_have_text(
                "sub-agent #1: 1 file changed, +1 -1 (not merged)"
            )
            api.expect(changes.get_by_test_id("changed-file")).to_have_text("app.py modified +1 -1")
            diff = changes.get_by_test_id("file-diff")
            api.expect(diff.locator(".add")).to_have_text("+    return 2\n")
            api.expect(diff.locator(".del")).to_have_text("-    return 1\n")
            page.screenshot(path=str(tmp_path / "changes.png"))
            changes.get_by_test_id("merge").click()
            api.expect(changes.get_by_test_id("merge-report")).to_contain_text(
                "merged sub-agent #1's changes into 1 file"
            )
            api.expect(changes.get_by_test_id("merged-note")).to_be_visible()
            assert (workspace / "app.py").read_text() == version(1)

            page.get_by_test_id("subagent-detail-close").click()
            page.locator('[data-testid=subagent][data-agent-id="2"]').get_by_test_id(
                "subagent-open"
            ).click()
            page.get_by_test_id("tab-changes").click()
            api.expect(changes.get_by_test_id("changes-summary")).to_contain_text("sub-agent #2")
            changes.get_by_test_id("merge").click()
            report = changes.get_by_test_id("merge-report")
            api.expect(report).to_contain_text("nothing was written")
            api.expect(report).to_contain_text(
                "app.py: the workspace and the sub-agent changed the same lines"
            )
            assert (workspace / "app.py").read_text() == version(1)

            discard = changes.get_by_test_id("discard")
            assert "danger" in (discard.get_attribute("class") or "")
            questions: list[str] = []
            page.once("dialog", lambda d: (questions.append(d.message), d.dismiss()))
            discard.click()
            assert api.expect(changes.get_by_test_id("discard")).to_be_enabled() is None
            assert questions and "NOT merged" in questions[0]
            assert "agent-2" in git(workspace, "branch", "--list", "agentkit/*")
            page.once("dialog", lambda d: d.accept())
            discard.click()
            api.expect(changes).to_contain_text("Discarded sub-agent 2's copy and branch")
            assert "agent-2" not in git(workspace, "branch", "--list", "agentkit/*")
        finally:
            browser.close()


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium")
def test_deleting_a_conversation_with_unmerged_work_asks_what_to_do(workspace: Path) -> None:
    """The sidebar's Delete, when the API says the sub-agents' copies are not merged:
    a dialog says so in words; Cancel deletes nothing; Discard (destructive) drops the
    branches and deletes the conversation."""
    api = pytest.importorskip("playwright.sync_api")
    make_repo(workspace)
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    router = two_isolated_and_a_shared()
    with (
        running_web(workspace, router, subagent_isolation="available") as web,
        api.sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(web.url)
            api.expect(page.get_by_test_id("conversation")).to_have_count(1)
            cid = page.get_by_test_id("conversation").get_attribute("data-id")
            page.get_by_test_id("composer").fill("two versions")
            page.get_by_test_id("send").click()
            api.expect(page.get_by_test_id("state")).to_have_text("idle", timeout=30_000)
            for agent_id in (1, 2):
                row = page.locator(f'[data-testid=subagent][data-agent-id="{agent_id}"]')
                api.expect(row).to_have_attribute("data-status", "completed")
            delete = page.get_by_test_id("delete-conversation")
            dialog = page.get_by_test_id("copies-dialog")
            delete.click()
            delete.click()  # the second click confirms; the server asks about the copies
            api.expect(dialog).to_be_visible()
            api.expect(dialog).to_contain_text("2 sub-agents' work is not merged")
            api.expect(dialog).to_contain_text("#1 (agentkit/")
            page.get_by_test_id("copies-cancel").click()
            api.expect(dialog).to_be_hidden()
            assert web.client.get(f"/api/conversations/{cid}").status_code == 200
            assert git(workspace, "branch", "--list", "agentkit/*").count("agent-") == 2

            # Keep, on a second conversation: the notice shows the git commands it
            # speaks of (a fresh user's trial found them only in the API's answer).
            current = page.locator("[data-testid=conversation].current")
            page.get_by_test_id("new-conversation").click()
            api.expect(current).not_to_have_attribute("data-id", cid or "")
            kept = page.evaluate("location.hash.slice(1)")
            page.get_by_test_id("composer").fill("two versions")
            page.get_by_test_id("send").click()
            for agent_id in (1, 2):  # the page's state is idle before the round starts
                row = page.locator(f'[data-testid=subagent][data-agent-id="{agent_id}"]')
                api.expect(row).to_have_attribute("data-status", "completed")
            api.expect(page.get_by_test_id("state")).to_have_text("idle", timeout=30_000)
            drop = page.locator(f'[data-testid=conversation][data-id="{kept}"]')
            drop.get_by_test_id("delete-conversation").click()
            drop.get_by_test_id("delete-conversation").click()
            page.get_by_test_id("copies-keep").click()
            notice = page.locator('[data-testid=notice][data-key="kept-branches"]')
            api.expect(notice).to_contain_text("branches were kept in git")
            commands = notice.get_by_test_id("notice-commands").inner_text().splitlines()
            listed = ("branch", "--list", "--format=%(refname:short)", "agentkit/*")
            branches = git(workspace, *listed).split()
            assert len(commands) == 6 and all(c.startswith("git --git-dir=") for c in commands)
            for command in commands:  # run as shown: the kept copies go
                subprocess.run(shlex.split(command), cwd=workspace, check=True, capture_output=True)
            assert git(workspace, *listed).split() == [b for b in branches if kept not in b]
            page.locator(f'[data-testid=conversation][data-id="{cid}"] .name').click()
            api.expect(current).to_have_attribute("data-id", cid or "")
            delete = current.get_by_test_id("delete-conversation")

            delete.click()
            delete.click()
            discard = page.get_by_test_id("copies-discard")
            api.expect(discard).to_have_text("Discard work and delete")
            assert "danger" in (discard.get_attribute("class") or "")
            discard.click()
            api.expect(page.locator(f'[data-testid=conversation][data-id="{cid}"]')).to_have_count(
                0
            )
            assert web.client.get(f"/api/conversations/{cid}").status_code == 404
            assert git(workspace, "branch", "--list", "agentkit/*") == ""
        finally:
            browser.close()
