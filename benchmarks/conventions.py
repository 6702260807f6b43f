"""What AGENTS.md and Agent Skills cost: prompt tokens and time per round.

Prompt tokens: a real Agent (openai client, HTTP) answers one message against
FakeOpenAIServer, once in an empty workspace and once with N skills in
``.agents/skills``; the difference of the first request's ``prompt_tokens`` (the fake
server counts them with tiktoken, as agentkit does) is what the skills add: the list
in the system prompt plus the load_skill tool's schema. The skills have realistic
descriptions (100-300 characters, what and when, as the specification asks), so the
list is capped by ``skills_list_max_chars`` (descriptions shortened); "uncapped" shows
the same list with whole descriptions. Time: ``gather`` (what each round does: read
AGENTS.md, find and parse the skills, render) for 20 skills, first call and warm.

Run: python benchmarks/conventions.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentkit import Agent, Settings
from agentkit.context import schema_tokens
from agentkit.conventions import gather
from agentkit.conventions.section import render_skill_list
from agentkit.conventions.skills import discover_skills
from agentkit.conventions.tool import LOAD_SKILL
from agentkit.testing import FakeOpenAIServer
from agentkit.tokens import count_text

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

DESCRIPTIONS = [
    ("pdf-tools", "Extract text and tables from PDF files, fill PDF forms, merge and split documents. Use when the user mentions a PDF or gives a .pdf file to read, change or create."),
    ("spreadsheets", "Read, clean and analyse spreadsheets (.xlsx, .csv): formulas, pivot tables, charts. Use when a task involves tabular data in Excel or CSV files."),
    ("release-notes", "Write release notes from the git history since the last tag, grouped by feature, fix and breaking change. Use before tagging a release."),
    ("api-docs", "Generate reference documentation for a REST API from its route handlers and schemas, one page per resource. Use when asked to document endpoints."),
    ("db-migrations", "Create and review database schema migrations (Alembic): naming, reversible steps, data backfills, locking on large tables. Use for any schema change."),
    ("frontend-tests", "Write and fix Playwright end-to-end tests for the web front end: selectors, fixtures, flaky waits. Use when UI behaviour must be tested or a UI test fails."),
    ("security-review", "Review a change for security problems: injection, authentication, secrets in code, unsafe deserialisation, path traversal. Use before merging code that handles input."),
    ("docker", "Write and debug Dockerfiles and compose files: small images, multi-stage builds, caching, non-root users. Use when containerising a service."),
    ("k8s-deploy", "Deploy services to the Kubernetes cluster with the team's Helm charts; check rollouts, probes and resource limits. Use for deployments and rollbacks."),
    ("incident-report", "Write a post-incident report: timeline, impact, root cause, follow-up actions, in the team's template. Use after an outage or a serious bug."),
    ("perf-profiling", "Profile Python code with py-spy and cProfile, find hot paths and propose fixes with measurements. Use when something is slow."),
    ("i18n", "Add and check translations (gettext catalogs), find strings not marked for translation, keep plural forms right. Use when user-facing text changes."),
    ("code-style", "Apply the project's code style beyond the linters: naming, module layout, docstrings, error messages. Use when writing or reviewing Python code here."),
    ("data-cleaning", "Clean messy datasets: types, missing values, duplicates, outliers, units, with a report of every change made. Use before analysing a new dataset."),
    ("changelog", "Keep CHANGELOG.md in the Keep a Changelog format: one entry per user-visible change, linked to its pull request. Use after a feature or fix lands."),
    ("onboarding", "Explain the repository to a newcomer: layout, how to build, test and run, where the main flows live. Use when asked how the project works."),
    ("sql-queries", "Write and optimise SQL for the analytics warehouse (PostgreSQL): window functions, indexes, EXPLAIN plans. Use for reporting queries."),
    ("email-drafts", "Draft clear, short emails to customers in the support team's tone, with the facts checked against the ticket. Use when a reply must be written."),
    ("diagrams", "Draw architecture and sequence diagrams as Mermaid in Markdown, kept next to the code they describe. Use when a design needs a picture."),
    ("dependency-upgrade", "Upgrade third-party dependencies safely: read changelogs, bump one at a time, run the tests, note breaking changes. Use for version bumps."),
]  # fmt: skip
BODY = "## Steps\n\n" + "\n".join(f"{i}. Do step {i} carefully and check it." for i in range(1, 40))


def make_skills(workspace: Path, count: int) -> None:
    for name, description in DESCRIPTIONS[:count]:
        folder = workspace / ".agents" / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n{BODY}\n"
        )


def prompt_tokens(workspace: Path, language: str) -> int:
    """The prompt tokens of one request, as the fake server reports them (usage)."""
    with FakeOpenAIServer(["done"]) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language=language,
                            max_retries=0)  # fmt: skip
        with Agent(workspace=workspace, settings=settings, subagents=False) as agent:
            result = agent.run("hello")
    assert result.stats["turns"] == 1 and not result.stats["usage_estimated"]
    return int(result.stats["prompt_tokens"])


def timing(workspace: Path, settings: Settings) -> tuple[float, float]:
    started = time.perf_counter()
    gather(workspace, settings)
    first = (time.perf_counter() - started) * 1000
    warm = []
    for _ in range(50):
        started = time.perf_counter()
        gather(workspace, settings)
        warm.append((time.perf_counter() - started) * 1000)
    return first, statistics.median(warm)


def main() -> int:
    rows = []
    for language in ("en", "zh"):
        with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as config:
            os.environ["XDG_CONFIG_HOME"] = config  # no user-level AGENTS.md or skills
            base = prompt_tokens(Path(empty).resolve(), language)
            for count in (5, 20):
                with tempfile.TemporaryDirectory() as folder:
                    workspace = Path(folder).resolve()
                    make_skills(workspace, count)
                    added = prompt_tokens(workspace, language) - base
                    settings = Settings(language=language)
                    section = gather(workspace, settings).text
                    skills = discover_skills(workspace, warn=False).skills
                    whole = render_skill_list(skills, language, 10**9)
                    rows.append((language, count, added, count_text(section),
                                 schema_tokens([LOAD_SKILL.schema(language)]), count_text(whole)))  # fmt: skip
    print(
        "| language | skills | prompt tokens added (list + load_skill schema) | the list | the schema | the list uncapped |"
    )
    print("|---|---|---|---|---|---|")
    for language, count, added, listed, schema, whole in rows:
        print(f"| {language} | {count} | {added} | {listed} | {schema} | {whole} |")
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder).resolve()
        make_skills(workspace, 20)
        (workspace / "AGENTS.md").write_text("Run make test before you finish.\n" * 100)
        first, warm = timing(workspace, Settings(language="en"))
    print(
        f"\ngather() per round, AGENTS.md + 20 skills: first {first:.1f} ms, then {warm:.2f} ms (median of 50)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
