"""Install hints name this project's distribution and follow how agentkit was installed
(agentkit.extras): never ``agentkit[...]``, which on the package index is another project."""

from __future__ import annotations

import json
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
def test_an_install_of_unknown_origin_gets_both_ways_on_one_line(
    extra: str, tmp_path: Path
) -> None:
    # A trial was told `pip install 'agentkit-subagents[mcp]'`, which is not on PyPI yet.
    wheel = tmp_path / "site-packages" / "agentkit" / "__init__.py"
    assert extras.install_hint(extra, package_file=wheel) == (
        f"pip install '.[{extra}]' in a clone of agentkit "
        f"(pip install 'agentkit-subagents[{extra}]' once it is on PyPI)"
    )


def _installed(site: Path, direct_url: object) -> Path:
    """A fake installed agentkit in ``site`` whose distribution records ``direct_url``."""
    package = site / "agentkit" / "__init__.py"
    package.parent.mkdir(parents=True)
    package.write_text("")
    info = site / "agentkit_subagents-0.1.0.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps(direct_url))
    return package


def test_an_install_from_a_clones_folder_names_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `pip install '.[web]'` from a clone (the guide's way) leaves no pyproject beside
    # the package; pip's direct_url.json says where it came from.
    clone = tmp_path / "my clone"
    (clone / "agentkit").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "agentkit-subagents"\n')
    url = clone.resolve().as_uri()
    package = _installed(tmp_path / "site", {"url": url, "dir_info": {}})
    monkeypatch.chdir(tmp_path)
    assert extras.install_hint("mcp", package_file=package) == f"pip install '{clone}[mcp]'"
    monkeypatch.chdir(clone)
    assert extras.install_hint("mcp", package_file=package) == "pip install '.[mcp]'"


@pytest.mark.parametrize(
    "direct_url",
    [
        {"url": "file:///nowhere/gone", "dir_info": {}},  # the clone was deleted
        {"url": "file:///tmp/x.whl", "archive_info": {}},  # a wheel file
        {"url": "https://example.com/x", "vcs_info": {"vcs": "git"}},
        ["not", "an", "object"],
    ],
)
def test_a_folder_that_is_gone_or_not_a_folder_gets_both_ways(
    direct_url: object, tmp_path: Path
) -> None:
    package = _installed(tmp_path / "site", direct_url)
    assert "once it is on PyPI" in extras.install_hint("mcp", package_file=package)


def test_a_folder_with_another_projects_pyproject_is_not_our_checkout(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "agentkit"\n')
    assert extras.source_checkout(tmp_path / "agentkit" / "__init__.py") is None


def test_the_distribution_is_the_one_pyproject_builds() -> None:
    text = (CHECKOUT / "pyproject.toml").read_text()
    assert re.search(r'^name = "agentkit-subagents"$', text, re.M)
    assert re.search(r'^agentkit = "agentkit.cli.entry:main"$', text, re.M)  # the command stays


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
