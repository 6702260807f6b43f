"""agentkit.output in-process: refusals name the failing fields and stay short, the
retry count, profile types kept by key in this process, results the class refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from agentkit.llm.turns import ToolCall
from agentkit.output import (
    FINAL_RESULT,
    MAX_ERROR_CHARS,
    MAX_ERRORS,
    OutputSpec,
    output_spec,
    register_type,
    registered_type,
    typed_output,
    validation_errors,
)
from agentkit.profiles import AgentProfile


class Item(BaseModel):
    id: int


class Order(BaseModel):
    items: list[Item]
    note: str


def call(arguments: dict[str, Any] | None, error: str | None = None) -> ToolCall:
    return ToolCall(id="c1", name=FINAL_RESULT, arguments=arguments, error=error)


def test_a_refusal_names_the_nested_field_path() -> None:
    spec = output_spec(Order, 2)
    assert spec is not None
    result = spec.check(call({"items": [{"id": "x"}], "note": "n"}), "en")
    assert not result.ok and "items.0.id: Input should be a valid integer" in result.output
    assert "note" not in result.output and "2 more tries" in result.output
    assert spec.value is None


def test_a_refusal_lists_at_most_max_errors_and_is_capped() -> None:
    with pytest.raises(ValidationError) as caught:
        Order.model_validate({"items": [{"id": "x" * 50_000}] * 20})
    text = validation_errors(caught.value)
    assert len(text) <= MAX_ERROR_CHARS
    assert text.count("Input should be") <= MAX_ERRORS and "more" in text
    assert "x" * 100 not in text  # the input is never echoed


def test_arguments_that_are_not_json_are_refused_with_the_parsers_reason() -> None:
    spec = OutputSpec(Order, 1)
    result = spec.check(call(None, error="invalid JSON arguments: Expecting value"), "en")
    assert not result.ok and "invalid JSON arguments" in result.output


def test_retries_are_counted_and_a_valid_answer_starts_the_count_again() -> None:
    spec = OutputSpec(Item, 1)
    assert spec.on_text("en").messages  # 1st wrong answer: told to call final_result
    assert spec.check(call({"id": 3}), "en").ok
    step = spec.after_tools("en")
    assert step is not None and step.stop and spec.value == Item(id=3)
    assert spec.text() == '{"id":3}'
    spec.check(call({"id": "a"}), "en")  # the count starts again: one retry left
    assert spec.after_tools("en") is None
    spec.check(call({"id": "b"}), "en")
    spent = spec.after_tools("en")
    assert spent is not None and spent.error_kind == "output_invalid"
    assert "2 tries" in (spent.error or "") and "id" in (spent.error or "")


def test_zero_retries_fail_at_the_first_wrong_answer_in_chinese_too() -> None:
    spec = OutputSpec(Item, 0)
    step = spec.on_text("zh")
    assert step.error_kind == "output_invalid" and "final_result" in (step.error or "")


def test_the_tool_schema_is_the_models() -> None:
    schema = OutputSpec(Order, 2).tool_schema("en")["function"]
    assert schema["name"] == FINAL_RESULT
    assert schema["parameters"]["properties"] == Order.model_json_schema()["properties"]
    assert "$defs" in schema["parameters"]  # nested models keep their definitions


def test_types_are_kept_by_key_and_a_same_named_class_gets_its_own() -> None:
    key = register_type(Item)
    assert registered_type(key) is Item and register_type(Item) == key

    def another() -> type[BaseModel]:
        class Item(BaseModel):
            other: str

        return Item

    first, second = another(), another()
    assert len({key, register_type(first), register_type(second)}) == 3
    assert registered_type("no.such:Model") is None and registered_type(3) is None


def test_a_profile_dict_carries_the_key_and_comes_back_with_the_class() -> None:
    profile = AgentProfile(name="p", output_type=Order)
    data = profile.to_dict()
    assert isinstance(data["output_type"], str)
    assert AgentProfile.from_dict(data).output_type is Order
    assert "output_type" not in AgentProfile(name="q").to_dict()  # unchanged without one
    # In a worker the key names nothing: the schema is still there, checked as JSON.
    worker = AgentProfile.from_dict({**data, "output_type": "elsewhere:Order"})
    assert worker.output_type is None and worker.output_schema == profile.output_schema


class Strict(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even")
        return value


def test_a_result_the_class_refuses_stays_json() -> None:
    data = AgentProfile(name="s", output_type=Strict).to_dict()
    assert typed_output(data, {"n": 2}) == Strict(n=2)
    assert typed_output(data, {"n": 3}) == {"n": 3}  # logged, not lost
    assert typed_output(None, {"n": 3}) == {"n": 3} and typed_output(data, None) is None
