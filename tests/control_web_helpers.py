"""The scripted model shared by the control-plane web tests (API and browser)."""

from __future__ import annotations

import json
import threading
from typing import Any

from subagent_helpers import Router, call, calls, finish


def asking_router(answered: threading.Event | None = None) -> Router:
    """A main agent that starts sub-agent 1 in the background; the sub-agent asks its
    parent "Which colour?" and, once answered, finishes."""

    def after(request: dict[str, Any]) -> Any:
        return finish("Painted it.")

    return Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="paint",
                    task="t",
                    run_in_background=True,
                )
            ),
            "Started.",
            "Waiting for the user.",
            "Done.",
        ],  # fmt: skip
        subs={1: [calls(call("ask_parent", question="Which colour?")), after]},
    )


def tool_json(request: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The JSON results of the tool ``name`` in a request's messages, in order."""
    return [json.loads(m["content"]) for m in request["messages"] if m.get("name") == name]
