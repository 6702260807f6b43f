"""Install hints for agentkit's optional extras (mcp, web, local, ray, pdf, otel, acp...).

One job: :func:`install_hint`, the pip command that installs an extra the way this
agentkit was installed: a source checkout (its ``pyproject.toml`` beside the package)
gets ``pip install -e '<checkout>[extra]'`` (``.`` when run from the checkout); an
install made from a clone's folder (``pip install .``, which pip records in the
distribution's ``direct_url.json``, PEP 610) gets ``pip install '<that folder>[extra]'``
while the folder is still there; any other install gets both ways on one line, from a
clone and by the distribution's name, since agentkit is not on the package index yet.
The distribution is :data:`DISTRIBUTION`, since ``agentkit`` on the package index is
another project; the import name and the console command stay ``agentkit``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["DISTRIBUTION", "install_hint", "installed_from", "source_checkout"]

DISTRIBUTION = "agentkit-subagents"
"""The name agentkit is published under (``pip install agentkit-subagents``)."""

_DIRECT_URL_MAX_BYTES = 64 * 1024  # a direct_url.json is a few hundred bytes


def source_checkout(package_file: str | Path | None = None) -> Path | None:
    """The source checkout agentkit runs from (the folder holding ``pyproject.toml``
    beside the ``agentkit`` package), or None for an installed wheel.

    ``package_file``: a file directly inside the ``agentkit`` package (default: its
    ``__init__.py``)."""
    here = Path(package_file or Path(__file__).with_name("__init__.py")).resolve()
    root = here.parent.parent
    project = root / "pyproject.toml"
    try:
        text = project.read_text(encoding="utf-8") if project.is_file() else ""
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text else None


def installed_from(package_file: str | Path | None = None) -> Path | None:
    """The clone's folder an installed agentkit was built from (``pip install <folder>``),
    read from the ``direct_url.json`` of its distribution beside the package, when that
    folder is still an agentkit checkout; None otherwise (from an index, a wheel file,
    or the folder is gone).

    ``package_file``: a file directly inside the installed ``agentkit`` package."""
    here = Path(package_file or Path(__file__).with_name("__init__.py")).resolve()
    prefix = DISTRIBUTION.replace("-", "_")
    for info in sorted(here.parent.parent.glob(f"{prefix}-*.dist-info")):
        try:
            with (info / "direct_url.json").open("rb") as file:
                data = json.loads(file.read(_DIRECT_URL_MAX_BYTES))
        except (OSError, ValueError):
            continue
        url = data.get("url") if isinstance(data, dict) else None
        if not isinstance(url, str) or "dir_info" not in data:
            continue  # an archive or a VCS URL: no folder to point at
        parsed = urlparse(url)
        if parsed.scheme == "file":
            folder = Path(unquote(parsed.path))
            if source_checkout(folder / "agentkit" / "__init__.py") is not None:
                return folder.resolve()
    return None


def install_hint(extra: str, *, package_file: str | Path | None = None) -> str:
    """The command installing ``extra`` (e.g. ``"web"``) as this agentkit was installed,
    one line: ``pip install -e '.[web]'`` in the checkout, ``pip install -e
    '/path/to/checkout[web]'`` elsewhere, ``pip install '/path/to/clone[web]'`` for an
    install made from a clone's folder, else both ways: ``pip install '.[web]' in a
    clone of agentkit (pip install 'agentkit-subagents[web]' once it is on PyPI)``."""
    checkout = source_checkout(package_file)
    if checkout is not None:
        return f"pip install -e {shlex.quote(f'{_shown(checkout)}[{extra}]')}"
    folder = installed_from(package_file)
    if folder is not None:
        return f"pip install {shlex.quote(f'{_shown(folder)}[{extra}]')}"
    return (
        f"pip install {shlex.quote(f'.[{extra}]')} in a clone of agentkit "
        f"(pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')} once it is on PyPI)"
    )


def _shown(folder: Path) -> str:
    """``.`` for the current folder, else the folder's path."""
    return "." if folder == Path.cwd().resolve() else str(folder)
