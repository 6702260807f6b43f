"""How long a large paste holds up ``agentkit chat`` on a terminal (issue 20 item 23).

The real program runs in tmux against FakeOpenAIServer. For each size, the text is
pasted as a terminal pastes it (``tmux paste-buffer -p``: bracketed paste, since the
chat's input line asks for it) and Enter is pressed; the time is from the paste to
the moment the model receives the message (seconds, wall clock). One line of text
(``line``) and text of 80-character lines (``lines``) are measured. A trial saw 41 s
for 100 KB and 3 s for 10 KB.

Run: ``python benchmarks/chat_paste.py [KB ...]`` (default 1 10 100; needs tmux).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agentkit.testing import FakeOpenAIServer  # noqa: E402


class Arrivals:
    """The model: answers at once and notes when each user message arrived."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, int]] = []  # (monotonic time, message length)
        self.changed = threading.Condition()

    def __call__(self, request: dict[str, Any]) -> str:
        text = request["messages"][-1].get("content") or ""
        with self.changed:
            self.seen.append((time.monotonic(), len(text)))
            self.changed.notify_all()
        return "ok"

    def wait_for(self, length: int, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for at, size in self.seen:
                    if size >= length:
                        self.seen.clear()
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)


def _text(kb: int, shape: str) -> str:
    words = "paste " * (kb * 1024 // 6 + 1)
    if shape == "line":
        return words[: kb * 1024]
    return "\n".join(words[i : i + 79] for i in range(0, kb * 1024, 80))


def main(sizes: list[int]) -> None:
    if shutil.which("tmux") is None:
        sys.exit("needs tmux")
    model = Arrivals()
    scratch = Path(tempfile.mkdtemp(prefix="agentkit-paste-"))
    workspace = scratch / "ws"
    workspace.mkdir()
    tmux = ["tmux", "-S", str(scratch / "tmux.sock")]
    with FakeOpenAIServer(model) as server:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_"))},
            "PYTHONPATH": str(REPO),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
            "AGENTKIT_MODEL": "m",
            "AGENTKIT_LANGUAGE": "en",
            "TERM": "xterm-256color",
        }
        command = f"{sys.executable} -m agentkit chat -w {workspace}; sleep 30"
        subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", command], env=env)
        try:
            _wait_screen(tmux, "/help lists the commands", 60)
            _paste(tmux, scratch, model, "warm up: the first round loads what rounds need")
            print(f"{'paste':>24} {'to the model (s)':>18}")
            for shape, bracketed in (("line", True), ("lines", True), ("line", False)):
                for kb in sizes:
                    spent = _paste(tmux, scratch, model, _text(kb, shape), bracketed)
                    shown = "no arrival in 300 s" if spent is None else f"{spent:.2f}"
                    how = "bracketed" if bracketed else "as keys"
                    print(f"{f'{kb} KB {shape}, {how}':>24} {shown:>18}", flush=True)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
            shutil.rmtree(scratch, ignore_errors=True)


def _paste(
    tmux: list[str], scratch: Path, model: Arrivals, text: str, bracketed: bool = True
) -> float | None:
    source = scratch / "paste.txt"
    source.write_text(text)
    subprocess.run([*tmux, "load-buffer", str(source)], check=True)
    started = time.monotonic()
    subprocess.run([*tmux, "paste-buffer", "-d", *(["-p"] if bracketed else [])], check=True)
    subprocess.run([*tmux, "send-keys", "Enter"], check=True)
    arrived = model.wait_for(len(text) - 64, 300)  # the chat may strip the edges
    if arrived is None:
        return None
    _wait_screen(tmux, "all done", 60)
    subprocess.run([*tmux, "send-keys", "C-l"], check=True)
    return arrived - started


def _wait_screen(tmux: list[str], needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True)
        if needle in shown.stdout:
            return
        time.sleep(0.1)
    raise SystemExit(f"the chat never showed {needle!r}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 10, 100])
