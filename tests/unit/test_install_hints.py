"""Install hints name this project's distribution and follow how agentkit was installed
(agentkit.extras): never ``agentkit[...]``, which on the package index is another project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentkit import extras

CHECKOUT = Path(extras.__file__).resolve().parent.parent
EXTRAS = ["mcp", "web", "local", "ray", "pdf", "otel", "acp"]


@pytest.mark.parametrize("extra", EXTRAS)
def test_a_source_checkout_gets_an_editable_install(
    extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CHECKOUT)
    assert extras.install_hint(extra) == f"pip install -e '.[{extra}]'"
    monkeypatch.chdir(tmp_path)
    assert extras.install_hint(extra) == f"pip install -e '{CHECKOUT}[{extra}]'"


@pytest.mark.parametrize("extra", EXTRAS)
def test_a_wheel_gets_the_distribution_name(extra: str, tmp_path: Path) -> None:
    wheel = tmp_path / "site-packages" / "agentkit" / "__init__.py"
    assert extras.install_hint(extra, package_file=wheel) == (
        f"pip install 'agentkit-subagents[{extra}]'"
    )


def test_a_folder_with_another_projects_pyproject_is_not_our_checkout(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agentkit"\n')
    assert extras.source_checkout(tmp_path / "agentkit" / "__init__.py") is None


def test_the_distribution_is_the_one_pyproject_builds() -> None:
    text = (CHECKOUT / "pyproject.toml").read_text()
    assert re.search(r'^name = "agentkit-subagents"$', text, re.M)
    assert re.search(r'^agentkit = "agentkit.cli:main"$', text, re.M)  # the command stays


def test_the_local_and_web_hints_use_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentkit.local as local
    from agentkit.webchat import INSTALL_HINT

    monkeypatch.chdir(CHECKOUT)
    assert local.install_hint() == "pip install -e '.[local]'"
    assert re.fullmatch(
        r"the web chat needs the web extra: pip install (-e '.+|'agentkit-subagents)\[web\]'",
        INSTALL_HINT,
    )


def test_no_hint_in_the_package_names_the_other_project() -> None:
    # Every hint goes through extras.install_hint: a literal "agentkit[" would install
    # someone else's package.
    found = []
    # The README and docs too: a newcomer copies their commands (the README once told
    # people to `pip install 'agentkit[otel]'`).
    texts = [*(CHECKOUT / "agentkit").rglob("*.py"), CHECKOUT / "README.md"]
    for path in [*texts, *(CHECKOUT / "docs").rglob("*.md")]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(?<![-\w])agentkit\[", line):
                found.append(f"{path.relative_to(CHECKOUT)}:{number}: {line.strip()}")
    assert found == []
