"""A conversation file holding a bare NaN cost (written by an older version from a NaN
model price) is served by the web API as "cost unknown", never a 500 (issue 31 item 6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from web_helpers import running_web


def test_a_saved_nan_cost_reads_as_unknown_on_every_web_route(workspace: Path) -> None:
    with running_web(workspace, lambda request: "hello") as web:
        cid = web.new_conversation()
    path = workspace / ".agentkit" / "conversations" / f"{cid}.json"
    data = json.loads(path.read_text())
    data["stats"].update(turns=1, cost_usd=math.nan, unpriced_responses=0)
    path.write_text(json.dumps(data))  # a bare NaN, as the old version wrote it
    assert "NaN" in path.read_text()
    with running_web(workspace, lambda request: "hello", subagent_control=True) as web:
        for route in ("", "/summary", "/usage"):
            response = web.client.get(f"/api/conversations/{cid}{route}")
            assert response.status_code == 200, (route, response.text)
            assert "NaN" not in response.text
        usage = web.client.get(f"/api/conversations/{cid}/usage").json()
        assert usage["main"]["cost_usd"] is None and usage["total"]["cost_usd"] is None
