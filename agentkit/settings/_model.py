"""Settings fields: the model endpoint, the conversation loop and prompted tool calls.

A mixin of :class:`agentkit.settings.Settings` (one group of fields by concern; the
descriptions are the guide's settings table, docs/guide/settings.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

from agentkit.settings._types import (
    MAX_COUNT,
    MAX_TOKENS,
    FiniteFloat,
    NonNegativeSeconds,
    PositiveFloat,
    PositiveInt,
    Seconds,
)

__all__ = ["ModelFields"]


class ModelFields(BaseModel):
    """The model endpoint, the conversation loop and prompted tool calls."""

    # --- model endpoint -------------------------------------------------------
    model: str | None = Field(default=None, description="Model name sent to the endpoint.")
    base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("base_url", "AGENTKIT_BASE_URL", "OPENAI_BASE_URL"),
        description="OpenAI-compatible base URL, e.g. http://localhost:11434/v1.",
    )
    api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("api_key", "AGENTKIT_API_KEY", "OPENAI_API_KEY"),
        description="API key; local servers accept any non-empty string.",
    )
    language: Literal["auto", "zh", "en"] = Field(
        default="auto",
        description="Language of prompts, templates and last_action texts: auto settles each conversation's by its first text (Chinese: zh, otherwise en), kept in its file and inherited by its sub-agents.",
    )
    conversation_store: Literal["file", "memory"] = Field(
        default="file",
        description="Where the main conversation is kept: file (.agentkit/conversations/<id>.json) or memory (no file; sub-agents still leave their deliverables and records).",
    )
    stream: bool = Field(
        default=True, description="Stream replies (SSE); false sends plain requests."
    )
    temperature: FiniteFloat | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Sampling temperature sent with each request (None: the server's default).",
    )
    max_output_tokens: PositiveInt | None = Field(
        default=None,
        le=MAX_TOKENS,
        description="max_tokens sent with each request (None: the server's default).",
    )
    request_timeout: Seconds = Field(
        default=120.0,
        gt=0,
        description="Seconds the model server may stay silent: to connect, before its reply starts, between two reads of it.",
    )
    request_total_timeout: Seconds = Field(
        default=600.0,
        gt=0,
        description="Seconds one model request may take in all, from sending it to the reply's last byte, however the server trickles (keep-alive comments, a byte at a time); then it fails as a timeout (retried like one).",
    )
    max_retries: int = Field(
        default=8,
        ge=0,
        le=1000,
        description="Retries of one model request after a transient error (5xx, 429, timeouts, refused or dropped connections, broken streams); retry_total_seconds bounds them too, whichever ends first (0: no retries; at most 1000).",
    )
    retry_base_delay: NonNegativeSeconds = Field(
        default=1.0, ge=0, description="First backoff delay, seconds; at most retry_max_delay."
    )
    retry_max_delay: NonNegativeSeconds = Field(
        default=60.0, ge=0, description="Cap on one wait, seconds; a longer Retry-After fails fast."
    )
    retry_total_seconds: NonNegativeSeconds = Field(
        default=120.0,
        ge=0,
        description="Seconds after a request's first failure within which its retries must start; max_retries bounds them too, whichever ends first (0: max_retries only).",
    )
    max_tool_calls_per_turn: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description="Tool calls of one model reply that run; the rest are answered with a too_many_tool_calls error, unrun (1-10000).",
    )
    tool_choice: str | None = Field(
        default=None,
        description="tool_choice sent with tools: auto, required, none, or tool names separated by commas: the first one offered is forced (e.g. create_sub_agent,finish_task forces the first on the main agent and the second on its sub-agents; None: the server's default).",
    )
    text_tool_call_fallback: bool = Field(
        default=False,
        description="Read tool calls that a model wrote as text (JSON or <tool_call> tags) when it sent none; for small local models.",
    )
    replay_reasoning: bool = Field(
        default=False,
        description="Send reasoning_content back on assistant tool-call messages (DeepSeek thinking mode with tools).",
    )
    system_role_after_start: bool = Field(
        default=True,
        description="Whether mid-conversation system messages may be sent; turned off for the session when a server refuses one.",
    )

    # --- conversation loop ----------------------------------------------------
    max_turns: int = Field(
        default=100, ge=1, le=MAX_COUNT, description="Model requests per run (main agent)."
    )
    output_retries: int = Field(
        default=2,
        ge=0,
        le=100,
        description="Typed results (agent.run(task, output_type=Model)): wrong answers (a final_result the model refuses, a plain-text answer) the main agent may correct before the run fails with output_invalid.",
    )
    repeated_failure_note: int = Field(
        default=3,
        ge=0,
        le=MAX_COUNT,
        description="After this many identical failing tool calls in a row, that call's result tells the model to change course (once; 0: never).",
    )
    context_window: int = Field(
        default=128_000, ge=1024, le=MAX_TOKENS, description="Model context, tokens."
    )
    context_budget: PositiveFloat = Field(
        default=0.8, gt=0, le=1, description="Share of context_window a request may use."
    )
    tool_workers: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="Tool calls of one message run at once, this many at most; calls naming the same path run one after another, in order (1-1000).",
    )

    # --- tool calling on servers without native tool calls ------------------------
    tool_calling: Literal["native", "prompted", "auto"] = Field(
        default="native",
        description="How tools reach the model: native (the tools parameter), prompted (described in the system prompt, calls read from the reply, results sent as user messages; for servers or models without working native tool calls), or auto (native, switching to prompted for the session when the first attempt shows the server cannot do it). Transcripts keep the standard shape either way.",
    )
    tool_call_constraint: Literal["auto", "json_schema", "grammar", "none"] = Field(
        default="auto",
        description="Prompted tool calls: constrain the reply to a valid call of an offered tool or a final answer: json_schema (the standard response_format: vLLM, llama-server, Ollama, LM Studio, SGLang), grammar (llama.cpp's grammar field: llama-cpp-python), none, or auto (json_schema, then grammar when the server refuses it). A refused constraint is dropped for the session.",
    )
    tool_call_grammar: bool = Field(
        default=True,
        description="Older switch: false means tool_call_constraint = none.",
    )
