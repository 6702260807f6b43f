"""Living conversations: the session API behind ``agentkit chat`` and ``agentkit serve``.

:class:`Session` is one conversation alive between rounds; :class:`Workspace` holds
a folder's conversations (several open at once); :class:`RoundResult` is what a
round returns; :class:`EventBus` numbers a conversation's events for streams.
See docs/architecture.md §9.

Map: ``session.py`` (Session), ``_lifecycle.py`` (its opening, sub-agent manager and
closing) and ``session_control.py`` (its controls from outside the rounds: stop, the
sub-agents, approval answers), ``workspace.py`` (Workspace), ``driver.py`` (the
rounds' thread) and ``rounds.py`` (one round), ``inbox.py`` (queued messages),
``eventbus.py``, ``store.py`` and ``lock.py`` (conversation files and who holds
them), ``assembly.py`` (one place checks and builds an agent's parts), ``setup.py``
(settings checks, the registry, the prompt), ``control.py`` (message, answer,
continue), ``approvals.py`` (the approval broker: the requests' flow),
``approval_records.py`` (the requests' rows, the file's record) and ``policy.py`` (a
session's rules and hooks), ``explain.py`` (states and failures in words),
``notices.py`` (what a person must hear at the start: the sandbox is off, a cost cap
that cannot trip).
"""

from __future__ import annotations

from agentkit.chat.eventbus import EventBus, Numbered
from agentkit.chat.inbox import RoundResult
from agentkit.chat.session import Session
from agentkit.chat.store import ConversationInfo, list_conversations
from agentkit.chat.workspace import Workspace

__all__ = [
    "ConversationInfo",
    "EventBus",
    "Numbered",
    "RoundResult",
    "Session",
    "Workspace",
    "list_conversations",
]
