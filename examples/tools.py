"""Your own tools, and a test of your agent against a scripted server.

    python examples/tools.py

A tool is a function whose first parameter is a pydantic model (its JSON schema is
what the model sees; the docstring is the description). This program runs with no
key and no network: agentkit.testing.FakeOpenAIServer plays the model on 127.0.0.1.
"""

from __future__ import annotations

import tempfile

from pydantic import BaseModel

from agentkit import Agent, Settings, ToolContext, ToolError
from agentkit.testing import FakeOpenAIServer


class Weather(BaseModel):
    city: str


def forecast(workspace: str, settings: Settings) -> str | None:
    """Ask for the weather in Paris; return the agent's answer."""
    with Agent(workspace=workspace, settings=settings) as agent:

        @agent.tool
        def get_weather(params: Weather, ctx: ToolContext) -> str:
            """Return today's weather for a city."""
            if not params.city.strip():
                raise ToolError("invalid_city", "name a city")
            return f"Sunny in {params.city}"

        # Still the plain function, its type kept (here called directly, as a test would).
        here = ToolContext(workspace=agent.workspace, settings=settings)
        assert get_weather(Weather(city="Oslo"), here) == "Sunny in Oslo"

        @agent.tool(name="local_time")
        def time_in(params: Weather) -> dict[str, str]:
            """Return the local time in a city."""
            return {"city": params.city, "time": "12:00"}

        return agent.run("What is the weather in Paris?").raise_for_status().final_text


def main() -> int:
    script = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        "Sunny in Paris.",
    ]
    with FakeOpenAIServer(script) as server:
        settings = Settings(model="fake", base_url=server.base_url, api_key="x", language="en")
        answer = forecast(tempfile.mkdtemp(), settings)
        tool_result = server.requests[1]["messages"][-1]
    print(answer, "| the model was sent:", tool_result["content"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
