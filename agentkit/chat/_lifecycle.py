"""A Session's opening and closing: the parts of its life that are not its API.

One job, for agentkit.chat.session only (its private neighbour): claim the
conversation (load or create it, hold its lock file) and settle its language from
what it already has; build the session's parts (event stream, policy, budget,
round driver, a resumed conversation's notes, the prewarm); make the sub-agent
manager on first use; and close: cancel, end the sub-agents, the last save,
release. The Session calls these with itself.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentkit.chat import control
from agentkit.chat.driver import RoundDriver
from agentkit.chat.eventbus import EventBus, numbering_start
from agentkit.chat.lock import claim_conversation, claim_saved_conversation
from agentkit.chat.policy import ConversationPolicy
from agentkit.conversation import Conversation
from agentkit.language import settle_language
from agentkit.subagent.notify import closing_notes, recovery_notes

if TYPE_CHECKING:
    from agentkit.chat.approvals import Answerer
    from agentkit.chat.session import Session
    from agentkit.subagent.manager import SubAgentManager

log = logging.getLogger("agentkit")

__all__ = ["claim", "close", "keep_language", "make_manager", "start"]


def claim(session: Session, conversation_id: str | None) -> None:
    """Load (``conversation_id``) or create the conversation and hold its lock file."""
    if conversation_id:
        session.conversation, session._release = claim_saved_conversation(
            session.workspace, conversation_id, lambda: not session._closed
        )
    else:
        session.conversation = Conversation(model=session.settings.model)
        if session.settings.conversation_store == "memory":
            session._release = lambda: None  # nobody else can know an unsaved id
        else:
            session._release = claim_conversation(
                session.transcript_path.with_suffix(".lock"),
                session.id,
                lambda: not session._closed,
            )
    keep_language(session)


def keep_language(session: Session) -> None:
    """Settle the language from what the conversation already has: its file's
    (an ``auto`` setting follows it), its first user message (a file from before
    the language was kept); an explicit setting is kept in the file."""
    conv = session.conversation
    if session.settings.language != "auto":
        conv.language = session.settings.language
        return
    if conv.language is None:
        first = next(
            (
                m["content"]
                for m in conv.messages
                if m.get("role") == "user" and isinstance(m.get("content"), str)
            ),
            None,
        )
        if first is None:
            return  # settled by the first text it is given (:meth:`settle_language`)
        conv.language = settle_language("auto", first)
    session.settings = session.settings.model_copy(update={"language": conv.language})


def start(
    session: Session, conversation_id: str | None, prewarm: bool, answerer: Answerer | None
) -> None:
    """The rest of ``Session.__init__``, once the conversation is claimed: the event
    stream, the policy, the budget, the driver (with a resumed conversation's notes),
    the prewarm; the driver starts last."""
    notes: list[str] = []
    session.bus = EventBus(start=numbering_start(session.conversation.last_event_seq))
    session.policy = ConversationPolicy(
        workspace=session.workspace,
        conversation=session.conversation,
        settings=lambda: session.settings,
        emit=session._emit,
        save=session._save_now,
        python=session._python_hooks,
        transcript_path=session.transcript_path,
        wake=lambda: session._driver.poke(),
    )
    session.budget = control.conversation_budget(session.conversation, session.settings)
    if conversation_id:
        conv = session.conversation
        notes = conv.pending_notes + recovery_notes(session.workspace, conv, session.settings)
        conv.pending_notes = []
        if conv.state == "running":  # saved mid-round: the process that ran it died
            conv.error = "interrupted"
        conv.state = "idle"
    session._driver = RoundDriver(session, notes=notes)
    session.inbox = session._driver.inbox
    if session._driver.file.follow(session.inbox, session.conversation):  # earlier sessions' queued
        session._driver.idle.clear()  # (restoring them poked the driver)
    if prewarm:
        from agentkit.subagent.launchers.local import prewarm_in_background

        prewarm_in_background(session.settings)
    session.policy.start(resumed=bool(conversation_id), answerer=answerer)
    session._driver.start()  # last: nothing that can fail comes after it


def make_manager(session: Session) -> SubAgentManager:
    """The conversation's sub-agent manager, wired to the session's policy, driver,
    budget and language (made on first use, under the session's manager lock)."""
    from agentkit.subagent.manager import SubAgentManager

    return SubAgentManager(
        workspace=session.workspace,
        settings=session.settings,
        conversation=session.conversation,
        emit=session._emit,
        launcher=session._launcher,
        on_started=session.policy.subagent_started,  # saves the file at once
        on_finished=session.policy.subagent_ended,  # and wakes the driver
        on_approval=session.policy.from_worker,
        worker_extra=session.policy.worker_extra,
        on_question=lambda agent: session._driver.poke(),
        budget=session.budget,
        settle_language=session.settle_language,
        on_copied=lambda agent: session._save_now(),
    )


def close(session: Session) -> None:
    """The body of ``Session.close`` (docs/specification.md §8.5): cancel the round,
    end the sub-agents (their notes kept for the next opening), stop the driver and
    the policy, end kept services, the last save, release the claim. Idempotent."""
    with session._driver.wake:
        if session._closed:
            return
        session._closed = True
        session._driver.wake.notify_all()
    session._driver.round_cancel.set()
    session.inbox.close()
    # Stop every sub-agent (§8.5); the model is owed word of them.
    session._driver.notes += closing_notes(session._manager, session.settings.language)
    session._driver.join(30)
    session.policy.close()  # pending approvals withdrawn, SessionEnd hooks
    from agentkit.process.spawn import end_background_services

    end_background_services(session.id, every=False)  # its commands' kept services
    # What the model has not heard yet waits in the file for the next opening.
    session.conversation.pending_notes = session._driver.notes
    session.conversation.state = "idle"
    try:  # the last save, with the last event number any reader got: none after it
        records = session._manager.records() if session._manager else None
        session._driver.file.close(session.conversation, records, session.bus.close())
    except OSError as exc:
        log.info("conversation %s could not be saved: %s", session.id, exc)
    session._driver.idle.set()
    session._release()
    session._close_assembly()
