"""The README's and the user guide's Python examples run as written, against
FakeOpenAIServer.

Every ```python block of README.md and ``docs/guide/`` runs as its own script, in a fresh folder
holding ``my_project/`` and ``proj/``, with the model, key and URL in the environment
(``AGENTKIT_MODEL``, ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``). The model calls
``final_result`` or ``finish_task`` when offered (arguments made from the tool's
schema) and otherwise answers "Done.". A block that cannot run so says how it is covered, in an
HTML comment on the line before its fence (CONTRIBUTING.md, "Examples in the docs"):

- ``<!-- example: file NAME -->``: the block is a module the next blocks of the page
  import; it is written as ``NAME`` in the folder, not run;
- ``<!-- example: tested by PATH -->``: a test of its own drives it (PATH exists);
- ``<!-- example: not run: REASON -->``: a fragment, with the reason (where the whole
  program runs, say).

Each block is its own process, forked from one runner for the module that has already
imported agentkit and openai (tests/fork_runner.py): the script runs as
``__main__`` with fresh globals, its own folder, environment, stdin and exit status, as
``python SCRIPT`` would, without paying the imports once a block.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fork_runner import ForkRunner

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guide"
BLOCK = re.compile(
    r"(?:<!-- example: (?P<mark>[^>]*?) -->\n)?```python[^\n]*\n(?P<code>.*?)```", re.S
)


@dataclass
class Example:
    page: str
    number: int  # 1-based, among the page's python blocks
    mark: str  # "" (run it), "file NAME", "tested by PATH" or "not run: REASON"
    code: str


def examples() -> list[Example]:
    """Every python block of the guide, in page order."""
    found = []
    for page in [REPO / "README.md", *sorted(GUIDE.glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for number, m in enumerate(BLOCK.finditer(text), 1):
            found.append(Example(page.name, number, (m["mark"] or "").strip(), m["code"]))
    return found


def test_every_mark_is_known_and_points_at_a_test() -> None:
    found = examples()
    assert len(found) >= 8, "the guide's python blocks were not found"
    for ex in found:
        if ex.mark.startswith("tested by "):
            assert (REPO / ex.mark.removeprefix("tested by ")).is_file(), ex
        elif ex.mark.startswith("not run:"):
            assert len(ex.mark.removeprefix("not run:").strip()) >= 10, ex  # a real reason
        else:
            assert ex.mark == "" or re.fullmatch(r"file [\w.]+\.py", ex.mark), ex


def _sample(schema: dict[str, Any]) -> Any:
    """A value that ``schema`` (a plain pydantic or tool schema) accepts."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _sample(v) for k, v in props.items() if k in schema.get("required", props)}
    samples = {"string": "example", "integer": 1, "number": 1.0, "boolean": True}
    return [] if kind == "array" else samples.get(kind, "example")


def _answer(request: dict[str, Any]) -> Any:
    """Finish through final_result or finish_task when offered, else answer "Done."."""
    tools = {t["function"]["name"]: t["function"] for t in request.get("tools", [])}
    if request["messages"][-1]["role"] != "tool":
        for name in ("final_result", "finish_task"):
            if name in tools:
                arguments = _sample(tools[name].get("parameters", {}))
                return {"tool_calls": [{"name": name, "arguments": arguments}]}
    return "Done."


PAGES = sorted({ex.page for ex in examples() if ex.mark == ""})


@pytest.fixture(scope="module")
def runner() -> Iterator[ForkRunner]:
    """One forking runner for the module's examples."""
    started = ForkRunner()
    try:
        yield started
    finally:
        started.close()


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_examples_run_as_written(page: str, tmp_path: Path, runner: ForkRunner) -> None:
    (tmp_path / "my_project").mkdir()
    (tmp_path / "proj").mkdir()
    env = {**os.environ, "AGENTKIT_MODEL": "fake-model", "OPENAI_API_KEY": "k"}
    env["PYTHONPATH"] = str(tmp_path)  # a "file" block is importable by the next ones
    ran = 0
    with FakeOpenAIServer(_answer) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        for ex in (e for e in examples() if e.page == page):
            if ex.mark.startswith("file "):
                (tmp_path / ex.mark.removeprefix("file ")).write_text(ex.code)
                continue
            if ex.mark:
                continue
            script = tmp_path / f"example_{ex.number}.py"
            script.write_text(ex.code)
            proc = runner.run(script, cwd=tmp_path, env=env, timeout=120)
            assert proc.returncode == 0, f"{page} block {ex.number}:\n{proc.stderr[-3000:]}"
            ran += 1
    assert ran > 0
