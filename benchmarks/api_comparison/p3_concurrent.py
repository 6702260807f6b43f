"""Program 3: ten agent runs at once under asyncio; one is cancelled mid-run."""

from __future__ import annotations

import asyncio
import time

from common import WORD_STATS, settings, workspace

from agentkit import Agent


async def main() -> None:
    folder = workspace()
    # One Agent per concurrent run (an Agent runs one task at a time), all on one folder.
    agents = [await Agent.open(folder, settings(), tools=[WORD_STATS]) for _ in range(10)]
    start = time.perf_counter()
    tasks = [asyncio.create_task(a.arun(f"[p3] [slow] job {n}")) for n, a in enumerate(agents)]
    await asyncio.sleep(0.7)
    tasks[3].cancel()  # plain asyncio cancellation: the run stops, its sub-agents end
    results = await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{time.perf_counter() - start:.2f}s")
    for n, r in enumerate(results):
        print(n, "cancelled" if isinstance(r, BaseException) else (r.status, r.final_text))
    print("agent 3:", agents[3].last_result)  # the cancelled run's RunResult, kept
    await asyncio.gather(*(agent.aclose() for agent in agents))


asyncio.run(main())
