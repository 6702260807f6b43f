"""The command sandbox (agentkit/process/sandbox.py) with real bubblewrap, processes,
files and sockets: escapes that must fail, development commands that must work, modes,
the fallback, and a sub-agent confined to its deliverables and claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkit import Settings
from agentkit.process import sandbox as _sandbox
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.worker.sandbox_scope import command_settings


def writable_argv(workspace: Path, **more: Any) -> list[str]:
    """bubblewrap's argv for a workspace-write command in ``workspace``, no network."""
    return _sandbox.bwrap_argv(
        "/usr/bin/bwrap",
        workspace=workspace,
        cwd=workspace,
        mode="workspace-write",
        network="none",
        **more,
    )


def test_narrowing_never_widens() -> None:
    assert _sandbox.narrow_mode("workspace-write", "read-only") == "read-only"
    assert _sandbox.narrow_mode("read-only", "full") == "read-only"
    assert _sandbox.narrow_mode("full", None) == "full"
    assert _sandbox.narrow_mode() == "workspace-write"
    with pytest.raises(ValueError):
        _sandbox.narrow_mode("everything")

    def spec(extra: dict[str, Any]) -> WorkerSpec:
        return WorkerSpec(1, "s", "t", 60, "d", "/w/d", "/w", "c", {}, "m", "now", extra)

    main = Settings(model="m", api_key="k", command_sandbox_mode="workspace-write")
    assert command_settings(spec({}), main).command_sandbox_mode == "workspace-write"
    wide = spec({"command_sandbox_mode": "full"})
    assert command_settings(wide, main).command_sandbox_mode == "workspace-write"
    narrow = spec({"command_sandbox_mode": "read-only"})
    assert command_settings(narrow, main).command_sandbox_mode == "read-only"
    review = main.model_copy(update={"subagent_command_sandbox_mode": "read-only"})
    assert command_settings(spec({}), review).command_sandbox_mode == "read-only"


def test_refusal_notes_only_when_confined() -> None:
    box = _sandbox.Confinement(["bwrap", "--"], "workspace-write", "none", "the workspace")
    text = "OSError: [Errno 30] Read-only file system: '/usr/x'\ncurl: (6) Could not resolve host"
    assert len(_sandbox.refusal_notes(text, box)) == 2
    assert _sandbox.refusal_notes(text, None) == []
    opened = _sandbox.Confinement(["bwrap", "--"], "workspace-write", "all", "the workspace")
    assert len(_sandbox.refusal_notes(text, opened)) == 1
    assert _sandbox.refusal_notes("all good\n", box) == []


@pytest.mark.parametrize(
    ("workspace_at", "read_only_at", "covered"),
    [
        # Under a hidden /tmp and reached by no bind: hidden already, no mount of its own.
        ("elsewhere", None, set()),
        # The workspace holds a socket folder (TMPDIR inside it): covered.
        ("ws", None, {"ws/pymp-a"}),
        # A read-only root above the socket folders shows them again: all covered.
        # (akmp-: agentkit's own forkserver folders, other agentkit processes' included.)
        ("elsewhere", "tmp", {"pymp-1", "pymp-2", "akmp-9-x", "agentkit-loopback-x", "ws/pymp-a"}),
        # The workspace inside a socket folder: that folder is covered, not its siblings.
        ("pymp-1/ws", None, {"pymp-1"}),
        # A read-only root inside a socket folder shows part of it: covered.
        ("elsewhere", "pymp-2/lib", {"pymp-2"}),
    ],
)
def test_socket_folders_are_covered_exactly_where_a_bind_reaches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workspace_at: str,
    read_only_at: str | None,
    covered: set[str],
) -> None:
    # The launch checks every socket folder in the temporary folder (hundreds on a busy
    # machine) against every bind; this holds the rule, whatever the algorithm.
    tmp = (tmp_path / "tmp").resolve()
    for name in (
        "pymp-1",
        "pymp-2",
        "akmp-9-x",
        "agentkit-loopback-x",
        "ws/pymp-a",
        "elsewhere",
        "plain",
    ):
        (tmp / name).mkdir(parents=True, exist_ok=True)
    (tmp / "pymp-1" / "ws").mkdir()
    (tmp / "pymp-2" / "lib").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    # A socket folder the agent names itself (its forkserver's), inside the workspace.
    monkeypatch.setenv("AGENTKIT_SOCKET_DIRS", str(tmp / "ws" / "pymp-a"))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    workspace = tmp / workspace_at
    roots = [tmp / read_only_at if read_only_at != "tmp" else tmp] if read_only_at else []
    argv = writable_argv(workspace, read_only=roots)
    after_binds = argv[argv.index(str(workspace)) :]
    mounted = {
        argv_item for i, argv_item in enumerate(after_binds[1:]) if after_binds[i] == "--tmpfs"
    }
    assert mounted == {str(tmp / c) for c in covered}, argv


def test_a_path_bubblewrap_cannot_reach_is_left_out_of_the_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: one PATH entry bubblewrap could not stat (below a file, or under a
    folder the user may not enter) made it refuse every command; a missing one is
    still passed (``-try`` skips it)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    below_a_file, missing = afile / "bin", tmp_path / "missing" / "bin"
    monkeypatch.setenv("PATH", f"{below_a_file}:{missing}:/usr/bin:/bin")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = writable_argv(workspace, writable=[str(below_a_file)])
    assert str(below_a_file) not in argv
    assert argv[argv.index(str(missing)) - 1] == "--ro-bind-try"
