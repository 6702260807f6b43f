"""Living conversations: the session API behind ``agentkit chat`` and ``agentkit serve``.

:class:`Session` is one conversation alive between rounds; :class:`Workspace` holds
a folder's conversations (several open at once); :class:`RoundResult` is what a
round returns; :class:`EventBus` numbers a conversation's events for streams.
See docs/architecture.md §9.
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
