"""What a person must hear when a conversation starts, said once at the start
rather than mid-conversation (issue 31).

One job: the start notices, in words, for every front end: the command sandbox
cannot run as the settings ask (bubblewrap missing: commands unconfined or refused;
agentkit.process.sandbox.missing_notice, with the install command), and a cost cap
that can never trip (``session_max_cost_usd`` with a model that has no known price:
its responses add no dollars, agentkit.cost).

Where they are said: the chat's banner (``agentkit chat``; standard error for
``--jsonl`` and ``agentkit run``), the page's header (``GET /api/info``'s
``notices``), ACP (the sandbox in its mode descriptions, every notice as the
session's first message), and for the Python API one log warning each per process
(:class:`agentkit.chat.Session` logs those no front end claimed first).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["claim_notices", "cost_cap_notice", "log_notices", "start_notices"]

log = logging.getLogger("agentkit")

_told: set[str] = set()
_told_lock = threading.Lock()


def cost_cap_notice(settings: Settings) -> str | None:
    """The notice for a ``session_max_cost_usd`` that can never be reached because the
    main agent's model has no known price (``model_prices`` nor genai-prices list it),
    else None (no cost cap, or a priced model). Sub-agents on a profile's own model
    are priced by that model; this looks at the main agent's."""
    cap = settings.session_max_cost_usd
    if cap is None:
        return None
    from agentkit.cost import Pricer, ResponseUsage

    probe = ResponseUsage(prompt=1_000_000, cached=0, completion=1_000_000)
    if Pricer(settings.model_prices).price(settings.model, settings.base_url, probe) is not None:
        return None
    return (
        f"The cost cap (session_max_cost_usd = {cap:g} USD) can never be reached: the "
        f"model {settings.model!r} has no known price, so its responses add no dollars. "
        "Give its price in model_prices (USD per million tokens), or cap tokens with "
        "session_max_tokens."
    )


def start_notices(settings: Settings) -> list[str]:
    """Every start notice for ``settings`` (module docstring), [] when all is well.
    Probes bubblewrap once per process (about 10 ms) and, with a cost cap, the price
    table (0.1-0.25 s the first time)."""
    from agentkit.process.sandbox import missing_notice

    found = [missing_notice(settings), cost_cap_notice(settings)]
    return [text for text in found if text]


def claim_notices(settings: Settings) -> list[str]:
    """:func:`start_notices`, which the caller (a front end) shows itself: they are not
    logged again by a Session of this process."""
    notices = start_notices(settings)
    with _told_lock:
        _told.update(notices)
    return notices


def log_notices(notices: list[str]) -> None:
    """Log each of ``notices`` as a warning, once per process, unless a front end
    claimed it (:func:`claim_notices`)."""
    for text in notices:
        with _told_lock:
            if text in _told:
                continue
            _told.add(text)
        log.warning("agentkit: %s", text)
