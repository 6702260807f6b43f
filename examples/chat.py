"""A conversation that lives between messages, and a workspace of several.

    OPENAI_API_KEY=sk-... python examples/chat.py ./my_project < questions.txt

``Session`` is one conversation: background sub-agents go on working between
rounds, and one that finishes starts a round by itself. ``Workspace`` holds a
folder's conversations (a chat server's view); ``events()`` is the conversation's
numbered stream for asyncio code (a web client, say).
"""

from __future__ import annotations

import asyncio
import sys

from agentkit import (
    AllWorkDone,
    Event,
    RoundFinished,
    RoundResult,
    RoundStarted,
    Session,
    Settings,
    TextDelta,
    Workspace,
)


def on_event(event: Event) -> None:
    """Print the answer as it streams and say when background work goes on or ends."""
    if isinstance(event, TextDelta):
        print(event.text, end="", flush=True)
    elif isinstance(event, RoundStarted) and event.trigger == "notification":
        print("[a sub-agent finished; the agent reports]")
    elif isinstance(event, RoundFinished):
        print(f"\n[still working: sub-agents {event.background}]" if event.background else "")
    elif isinstance(event, AllWorkDone):
        print("[all work done]")


def chat(folder: str, settings: Settings) -> None:
    """One message per input line; at the end, let background work finish."""
    with Session(folder, settings) as session:
        session.subscribe(on_event)
        for line in sys.stdin:
            if line.strip():
                session.post(line.strip())  # never blocks: queued while a round runs
        session.wait_idle()


async def first_round(folder: str, settings: Settings, text: str) -> RoundResult:
    """Open a new conversation of the folder's Workspace, watch its numbered event
    stream from asyncio while one message is answered, and return that round."""
    with Workspace(folder, settings) as workspace:
        session = workspace.create(title="from asyncio")

        async def watch() -> None:
            async for item in session.events():
                print(item.seq, item.event.type)
                if isinstance(item.event, AllWorkDone):
                    return

        watcher = asyncio.create_task(watch())
        result = await session.asend(text)
        session.wait_idle()
        await watcher
        for info in workspace.list():
            print(info.id, info.title, info.state)
        return result


def main(argv: list[str]) -> int:
    folder = argv[1] if len(argv) > 1 else "."
    settings = Settings(model="gpt-4o-mini", language="en")
    if len(argv) > 2:
        result = asyncio.run(first_round(folder, settings, argv[2]))
        print(result.status, result.final_text)
    else:
        chat(folder, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
