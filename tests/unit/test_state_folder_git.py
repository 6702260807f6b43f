"""agentkit's own runtime files stay out of the user's ``git status``: each runtime
subfolder of ``.agentkit`` it makes (conversations, command outputs, MCP files, logs)
holds a ``.gitignore`` of ``*``; ``.agentkit`` itself is never hidden, since people
commit its skills, agents and hooks (a trial saw ``.agentkit/conversations/*.json``
untracked in its repository). In-process, on temp folders; the real ``git status``
is tests/integration/test_demo.py's."""

from __future__ import annotations

from pathlib import Path

from agentkit.chat.store import ConversationFile
from agentkit.conversation import RUNTIME_GITIGNORE, Conversation, hide_runtime_folder
from agentkit.mcp.tools import _save
from agentkit.tools.shell._output import OutputCapture


def _ignores_all(folder: Path) -> bool:
    lines = (folder / ".gitignore").read_text(encoding="utf-8").splitlines()
    return "*" in lines


def test_a_saved_conversation_s_folder_is_hidden_from_git(tmp_path: Path) -> None:
    store = ConversationFile(tmp_path)
    store.save(Conversation(), None)
    store.flush()
    assert _ignores_all(tmp_path / ".agentkit" / "conversations")
    assert not (tmp_path / ".agentkit" / ".gitignore").exists()  # skills, hooks: the user's


def test_a_command_s_full_log_and_an_mcp_file_are_hidden_from_git(tmp_path: Path) -> None:
    spill = tmp_path / ".agentkit" / "outputs" / "cmd-1.log"
    capture = OutputCapture(100, spill, 1 << 20, tmp_path)
    capture.feed(b"line\n" * 100)
    capture.finish()
    assert spill.is_file() and _ignores_all(spill.parent)
    said = _save(tmp_path, "pics", "aGk=", "image/png")
    assert said.startswith(".agentkit/mcp-files/pics/")
    assert _ignores_all(tmp_path / ".agentkit" / "mcp-files")  # the top one covers below
    assert not (tmp_path / ".agentkit" / "mcp-files" / "pics" / ".gitignore").exists()


def test_a_gitignore_already_there_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / ".agentkit" / "logs"
    folder.mkdir(parents=True)
    (folder / ".gitignore").write_text("!keep.log\n")
    hide_runtime_folder(tmp_path, folder)
    assert (folder / ".gitignore").read_text() == "!keep.log\n"


def test_the_state_folder_itself_and_folders_outside_it_are_left_alone(tmp_path: Path) -> None:
    hide_runtime_folder(tmp_path, tmp_path / ".agentkit")
    assert not (tmp_path / ".agentkit" / ".gitignore").exists()
    hide_runtime_folder(tmp_path, tmp_path / "src")  # not below .agentkit: nothing
    assert not (tmp_path / "src").exists()


def test_a_linked_runtime_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    (workspace / ".agentkit").mkdir(parents=True)
    (workspace / ".agentkit" / "outputs").symlink_to(outside)
    hide_runtime_folder(workspace, workspace / ".agentkit" / "outputs")  # never raises
    assert list(outside.iterdir()) == []
    assert RUNTIME_GITIGNORE.splitlines()[-1] == "*"
