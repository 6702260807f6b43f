"""Arize Phoenix on 127.0.0.1 as a real trace backend for the tests (and the guide's
screenshot on the tracing page, tests/phoenix_screenshot.py).

Phoenix pins packages that clash with agentkit's, so it lives in its own virtual
environment: ``AGENTKIT_TEST_PHOENIX`` names that environment's folder (or its
``phoenix`` program); by default ``.ci/phoenix-venv`` (made by .ci/run). It is started
offline (no telemetry, no external resources), on free ports, with a fresh working
folder, and never sees our ``OTEL_*`` variables.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PHOENIX_VAR = "AGENTKIT_TEST_PHOENIX"
ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 120.0


def phoenix_program() -> Path | None:
    """The ``phoenix`` program to run, or None when none is installed."""
    given = os.environ.get(PHOENIX_VAR)
    place = Path(given) if given else ROOT / ".ci" / "phoenix-venv"
    program = place / "bin" / "phoenix" if place.is_dir() else place
    return program if program.is_file() and os.access(program, os.X_OK) else None


def skip_reason() -> str | None:
    """Why the Phoenix tests cannot run here (None: they can)."""
    if phoenix_program() is None:
        return (
            f"Arize Phoenix is not installed: set {PHOENIX_VAR} to a virtual environment "
            "holding arize-phoenix, or let .ci/run make .ci/phoenix-venv"
        )
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Phoenix:
    """A Phoenix server: ``start(folder)``, ``endpoint`` (OTLP/HTTP base and UI), ``stop()``."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: the UI, the REST API and OTLP/HTTP at ``/v1/traces``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, folder: Path) -> Phoenix:
        """Start it with its database in ``folder``; wait until it is healthy. Raises
        RuntimeError when it exits or is not healthy in START_SECONDS."""
        program = phoenix_program()
        assert program is not None, skip_reason()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON"))}
        env.update(
            PHOENIX_WORKING_DIR=str(folder),
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(_free_port()),  # always opened; the default 4317 may be taken
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true",
            PHOENIX_LOG_MIGRATIONS="false",
        )
        log = (folder / "phoenix.log").open("wb")
        self.process = subprocess.Popen(
            [str(program), "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"phoenix exited ({self.process.returncode}): {folder}/phoenix.log"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"phoenix was not healthy within {START_SECONDS:g} s")

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def spans(self, project: str, **query: str) -> list[dict[str, Any]]:
        """The spans of ``project`` matching ``query`` (REST ``/v1/projects/{p}/spans``);
        [] while the project does not exist yet."""
        params = urllib.parse.urlencode({"limit": "1000", **query})
        url = f"{self.endpoint}/v1/projects/{urllib.parse.quote(project)}/spans?{params}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                data: list[dict[str, Any]] = json.load(answer)["data"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        return data


def as_tree_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Phoenix's span dicts in the receiver's shape (``span_id``, ``parent_span_id``,
    ``trace_id``, ``name``, ``attributes``, ``status``), for tests/tracing_helpers.py."""
    return [
        {
            "name": s["name"],
            "trace_id": s["context"]["trace_id"],
            "span_id": s["context"]["span_id"],
            "parent_span_id": s.get("parent_id"),
            "attributes": s.get("attributes") or {},
            "status": s.get("status_code"),
            "kind": s.get("span_kind"),  # OpenInference's: AGENT, LLM, TOOL
            "resource": {},
        }
        for s in spans
    ]
