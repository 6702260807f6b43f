"""Install hints for agentkit's optional extras (mcp, web, local, ray, pdf, otel, acp...).

One job: :func:`install_hint`, the pip command that installs an extra the way this
agentkit was installed: a source checkout (its ``pyproject.toml`` beside the package)
gets ``pip install -e '<checkout>[extra]'`` (``.`` when run from the checkout), an
installed wheel ``pip install 'agentkit-subagents[extra]'``. The distribution is
:data:`DISTRIBUTION` on the package index, since ``agentkit`` there is another
project; the import name and the console command stay ``agentkit``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["DISTRIBUTION", "install_hint", "source_checkout"]

DISTRIBUTION = "agentkit-subagents"
"""The name agentkit is published under (``pip install agentkit-subagents``)."""


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


def install_hint(extra: str, *, package_file: str | Path | None = None) -> str:
    """The command installing ``extra`` (e.g. ``"web"``) as this agentkit was installed:
    ``pip install -e '.[web]'`` in the checkout, ``pip install -e '/path/to/checkout[web]'``
    elsewhere, ``pip install 'agentkit-subagents[web]'`` for a wheel."""
    checkout = source_checkout(package_file)
    if checkout is None:
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    target = "." if checkout == Path.cwd().resolve() else str(checkout)
    return f"pip install -e {shlex.quote(f'{target}[{extra}]')}"
