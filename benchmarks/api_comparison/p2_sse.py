"""Program 2: a Starlette endpoint streaming an agent run as Server-Sent Events, then a check."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import uvicorn
from common import WORD_STATS, settings, workspace
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agentkit import Agent

folder = workspace()  # one workspace, one Agent (conversation) per request


async def run(request: Request) -> StreamingResponse:
    agent = await Agent.open(folder, settings(), tools=[WORD_STATS])

    async def stream() -> AsyncIterator[str]:
        # Leaving early (client gone) stops the run and its sub-agents, then closes the Agent.
        async with agent, agent.stream(request.query_params["task"]) as events:
            async for event in events:
                yield f"event: {event.type}\ndata: {json.dumps(event.to_dict())}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


app = Starlette(routes=[Route("/run", run)])


# ---- the check: serve on loopback, call it with httpx, look at the stream -------------
async def check() -> None:
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/run"
    seen: list[str] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("GET", url, params={"task": "Research alpha and beta."}) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                seen.append(line[7:])
    print(" ".join(seen))
    for kind in ("TextDelta", "ToolCallStarted", "SubAgentStarted", "SubAgentFinished"):
        assert kind in seen, kind
    server.should_exit = True
    await serving


asyncio.run(check())
