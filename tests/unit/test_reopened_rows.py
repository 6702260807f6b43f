"""What a reopened conversation's sub-agent rows say after the main process was killed
(trial of issue 34): the runtime and counters of their records, not the 0 s the main
conversation file saved at their start; and a sub-agent that never reached the model
says "0 tokens", not a bare "$0.000000". In-process: real record files only."""

from __future__ import annotations

import json
from pathlib import Path

from agentkit.chat.explain import usage_words
from agentkit.cli.progress import usage_text
from agentkit.conversation import Conversation
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.notify import recovery_notes
from agentkit.subagent.record import Ending, build_record, record_path, write_record
from agentkit.subagent.transcript import TranscriptWriter

STATS = {"runtime_seconds": 6, "files_read": 2, "searches": 0, "web_pages": 0, "commands": 1}


def _spec(workspace: Path, agent_id: int) -> WorkerSpec:
    folder = f"sub_agent_results/agent_{agent_id}"
    return WorkerSpec(
        agent_id, f"job {agent_id}", "task", 600, folder, str(workspace / folder),
        str(workspace), f"sub{agent_id}", {}, "m", "t",
    )  # fmt: skip


def _row(spec: WorkerSpec) -> dict[str, object]:
    """The row the main process saved at the sub-agent's start (runtime 0)."""
    return {
        "agent_id": spec.agent_id, "summary": spec.summary, "status": "running",
        "runtime_seconds": 0, "files_read": 0, "searches": 0, "web_pages": 0, "commands": 0,
        "tokens": 0, "cost_usd": None, "deliverables_dir": spec.deliverables_dir,
        "sub_conversation_id": spec.sub_conversation_id,
    }  # fmt: skip


def test_reopened_rows_take_their_records_runtime_and_counters(tmp_path: Path) -> None:
    ended, left = _spec(tmp_path, 1), _spec(tmp_path, 2)
    why = "the main process ended"
    for spec, status, ending in ((ended, "terminated", Ending(why, why)), (left, "running", None)):
        record = build_record(spec, status, messages=[], stats=dict(STATS), ending=ending)
        Path(spec.deliverables_path).mkdir(parents=True)
        assert write_record(Path(spec.deliverables_path), record, root=tmp_path)
    conversation = Conversation(subagents=[_row(ended), _row(left)])
    notes = recovery_notes(tmp_path, conversation, Settings(model="m", api_key="k"))
    assert notes  # the model is told of both
    rows = {r["agent_id"]: r for r in conversation.subagents}
    assert rows[1]["status"] == "terminated"  # its worker wrote its end
    assert rows[2]["status"] == "terminated"  # swept: no worker left
    for row in rows.values():
        assert row["runtime_seconds"] == 6 and row["files_read"] == 2 and row["commands"] == 1


def test_reopened_rows_take_their_records_tokens_and_cost(tmp_path: Path) -> None:
    """Regression (a fresh user's trial): /status of a reopened conversation showed a
    killed sub-agent's "0 tokens" and a cost of 0, the row as saved at its start,
    while its record held 3,185 tokens."""
    priced, unpriced = _spec(tmp_path, 1), _spec(tmp_path, 2)
    usage = {"prompt": 3167, "completion": 18, "total": 3185}
    for spec, cost in ((priced, 0.0042), (unpriced, None)):
        stats = {**STATS, "token_usage": dict(usage), "cost_usd": cost}
        record = build_record(spec, "running", messages=[], stats=stats)
        Path(spec.deliverables_path).mkdir(parents=True)
        assert write_record(Path(spec.deliverables_path), record, root=tmp_path)
    conversation = Conversation(subagents=[_row(priced), _row(unpriced)])
    recovery_notes(tmp_path, conversation, Settings(model="m", api_key="k"))
    rows = {r["agent_id"]: r for r in conversation.subagents}
    for row in rows.values():
        assert row["token_usage"] == usage and row["tokens"] == 3185
    assert rows[1]["cost_usd"] == 0.0042 and usage_text(rows[1]) == "3,185 tokens · $0.004200"
    assert rows[2]["cost_usd"] is None and usage_text(rows[2]) == "3,185 tokens · cost unknown"


def test_a_worker_s_end_without_its_conversation_writes_its_runtime_to_now(
    tmp_path: Path,
) -> None:
    """The worker whose parent is gone ends its record as last saved; the runtime is
    the one up to that end, not the last save's."""
    path = tmp_path / "out/.subagent/conversations.json"
    path.parent.mkdir(parents=True)

    def allow(head: dict[str, object], write: object) -> bool:
        write()  # type: ignore[operator]
        return True

    writer = TranscriptWriter(path, tmp_path, allow)
    spec = _spec(tmp_path, 1)
    writer.save(build_record(spec, "running", messages=[{"role": "user", "content": "t"}],
                             stats={**STATS, "runtime_seconds": 1}))  # fmt: skip
    assert writer.end({"status": "terminated"}, runtime_seconds=6) is True
    saved = json.loads(path.read_text())
    assert saved["status"] == "terminated" and saved["stats"]["runtime_seconds"] == 6
    assert saved["stats"]["files_read"] == 2  # the counters as saved
    assert record_path(path.parent.parent) == path


def test_a_sub_agent_that_never_reached_the_model_says_0_tokens_and_no_cost() -> None:
    for row in ({"tokens": 0, "cost_usd": 0.0}, {"tokens": 0, "cost_usd": None}, {}):
        assert usage_words(row) == usage_text(row) == "0 tokens"
    assert usage_words({"tokens": 1234, "cost_usd": None}) == "1,234 tokens · cost unknown"
    assert usage_words({"tokens": 1234, "cost_usd": 0.0012}) == "1,234 tokens · $0.001200"


def test_the_note_of_a_sub_agent_that_ended_unseen_keeps_its_parts_apart(tmp_path: Path) -> None:
    """Regression (a fresh user's trial): "Result summary: … worker Deliverables
    directory: …" ran the summary, which has no final stop, into the next part."""
    spec = _spec(tmp_path, 1)
    why = "stopped: the main process ended or stopped this worker"
    record = build_record(
        spec, "terminated", messages=[], stats=dict(STATS), ending=Ending(why, why)
    )
    Path(spec.deliverables_path).mkdir(parents=True)
    assert write_record(Path(spec.deliverables_path), record, root=tmp_path)
    row = {**_row(spec), "result_summary": why}
    conversation = Conversation(subagents=[row])
    settings = Settings(model="m", api_key="k", language="en")
    [note] = [n for n in recovery_notes(tmp_path, conversation, settings) if "job 1" in n]
    assert "Deliverables directory: sub_agent_results/agent_1. Result summary: " in note, note
    assert note.endswith(why), note


def test_a_damaged_isolated_row_gets_a_note_and_a_row_without_a_number_none(
    tmp_path: Path,
) -> None:
    """The copy's note never stops the reopening: a row's copy that cannot be read is
    said so, and a row whose number is not one is passed over."""
    spec = _spec(tmp_path, 1)
    damaged = {**_row(spec), "isolation": {"root": 7}, "merged": False}
    nameless = {**_row(spec), "agent_id": "one", "isolation": {}}
    conversation = Conversation(subagents=[damaged, nameless])
    settings = Settings(model="m", api_key="k", language="en")
    notes = recovery_notes(tmp_path, conversation, settings)
    copies = [n for n in notes if n.startswith("Sub-agent 1 (job 1): ")]
    assert len(copies) == 1 and "could not be counted (its copy could not be read)" in copies[0]
