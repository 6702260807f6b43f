"""The web API's body models, in process: each problem's message names the field."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit.errors import AgentkitError
from agentkit.webchat.bodies import (
    MAX_TEXT,
    ApiError,
    ApprovalAnswer,
    ContinueBody,
    MessageBody,
    NewConversation,
    RenameBody,
    SwitchBody,
    parse_body,
)


@pytest.mark.parametrize(
    ("model", "data", "said"),
    [
        (NewConversation, {"titel": "x"}, 'unknown key "titel" (known: title)'),
        (RenameBody, {}, 'give "title" (a string)'),
        (RenameBody, {"title": None}, '"title" must be a string, not null'),
        (SwitchBody, {"to": 1}, '"to" must be a string or null, not int'),
        (MessageBody, {}, '"text": the message is empty'),
        (MessageBody, {"text": "\t "}, '"text": the message is empty'),
        (MessageBody, {"text": 123}, '"text" must be a string, not int'),
        (MessageBody, {"text": float("nan")}, '"text" must be a string, not float'),
        (ApprovalAnswer, {}, 'give "decision" ("allow", "allow_always" or "deny")'),
        (ApprovalAnswer, {"decision": "deny", "note": 5}, '"note" must be a string or null'),
        (ContinueBody, {"text": "go"}, 'unknown key "text" (known: task)'),
        (NewConversation, {"title": "x" * (MAX_TEXT + 1)}, "longer than 1000000 characters"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(model: Any, data: dict[str, Any], said: str) -> None:
    with pytest.raises(ApiError) as refused:
        parse_body(model, data)
    assert refused.value.status == 400 and said in str(refused.value)
    assert isinstance(refused.value, AgentkitError)


def test_good_bodies_parse() -> None:
    assert parse_body(MessageBody, {"text": "hi"}).text == "hi"
    assert parse_body(SwitchBody, {}).to is None
    assert parse_body(ApprovalAnswer, {"decision": "deny", "note": "no"}).note == "no"
    assert parse_body(NewConversation, {"title": None}).title is None
