"""LLMClient: one Chat Completions request in, one normalised AssistantTurn out.

Built on the ``openai`` package's client (auth, headers, base URL handling, error
types) but through its generic ``client.post()`` path, not the typed
``chat.completions.create()``, which walks every message through its parameter
transform on each call (~15 ms at 100 messages; docs/architecture.md §8). Responses are read as
raw bytes and parsed here, so every provider quirk of
docs/providers.md can be handled (the assembly lives in ``_assemble``,
classification in ``_errors``; docs/providers.md §1 maps each rule to its code).

``openai`` is imported when an LLMClient is created, not when this module is
imported (``import openai`` takes ~0.4 s, docs/architecture.md §8; the CLI must
start faster).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from agentkit.errors import Cancelled, ConfigurationError, LLMError
from agentkit.llm._assemble import RawTurn, build_turn, decode_body
from agentkit.llm._cancel import WATCHDOG, SocketTracker
from agentkit.llm._errors import classify, transport_error_types
from agentkit.llm._json import REPLY_MAX_DEPTH, loads
from agentkit.llm._request_shape import RequestShape
from agentkit.llm._retry import RetryPlan
from agentkit.llm._sse import SSEParser
from agentkit.llm._toolcall_accumulator import cap_tool_calls
from agentkit.llm._toolmode import ToolMode, Wire, call_constraint
from agentkit.llm.turns import AssistantTurn
from agentkit.llm.wire import encode_body
from agentkit.settings import Settings

log = logging.getLogger("agentkit.llm")

OnText = Callable[[str], None]
OnRetry = Callable[[LLMError, int, float], None]


class LLMClient:
    """A robust client for any OpenAI-compatible Chat Completions endpoint.

    Args:
        settings: uses ``model``, ``base_url``, ``api_key``, ``stream``, ``temperature``,
            ``max_output_tokens``, ``request_timeout`` (seconds; connect and read/idle
            timeout), ``request_total_timeout`` (seconds; one attempt in all),
            ``max_retries``, ``retry_base_delay``, ``retry_max_delay`` and
            ``retry_total_seconds`` (seconds), ``max_tool_calls_per_turn``,
            ``system_role_after_start`` (False: system messages after the first are
            sent as user messages; also learnt, for this client's lifetime, when a
            server refuses one with a 400), ``tool_calling`` and the constraint
            settings (prompted tool calling: docs/providers.md §5).
        text_tool_call_fallback: read tool calls a model wrote as text (opt-in, for
            local models). None: ``settings.text_tool_call_fallback``.

    Raises:
        ConfigurationError: no model, or no API key and no base URL.
    """

    def __init__(self, settings: Settings, *, text_tool_call_fallback: bool | None = None) -> None:
        if not settings.model:
            raise ConfigurationError("no model given: set Settings(model=...) or AGENTKIT_MODEL")
        api_key = settings.api_key
        if not api_key:
            if not settings.base_url:
                raise ConfigurationError(
                    "no API key: set Settings(api_key=...) or OPENAI_API_KEY "
                    "(a local server at Settings(base_url=...) needs none)"
                )
            api_key = "not-needed"  # local servers ignore it; the SDK insists on one
        import openai

        from agentkit.process.redact import remember

        # Errors made from now on hide this key, whatever a server echoes (redact).
        remember(settings.api_key, drop=settings.command_env_drop)
        self.settings = settings
        if text_tool_call_fallback is None:
            text_tool_call_fallback = settings.text_tool_call_fallback
        self.text_tool_call_fallback = text_tool_call_fallback
        # Sockets are tracked so that a cancel can abort a blocked read (see _cancel).
        self._tracker = SocketTracker()
        http_options: dict[str, Any] = {"event_hooks": {"request": [self._tracker.on_request]}}
        if (settings.base_url or "").lower().startswith("http://"):
            # Plain HTTP (local servers, tests): skip loading the CA bundle, ~50 ms per
            # client, which matters for sub-agent start-up (docs/architecture.md §8).
            http_options["verify"] = False
        http_client = openai.DefaultHttpxClient(**http_options)
        # The SDK would retry quota errors and never mid-stream failures; we own retries.
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.request_timeout,
            http_client=http_client,
        )
        self._http = http_client
        self._url = str(self._client.base_url).rstrip("/") + "/chat/completions"
        headers = {k: v for k, v in self._client.default_headers.items() if isinstance(v, str)}
        headers.update(self._client.auth_headers)
        headers["Content-Type"] = "application/json"
        self._headers = {**headers, "Accept": "application/json"}
        self._headers_stream = {**headers, "Accept": "text/event-stream"}
        self._transport_errors, self._timeout_errors = transport_error_types()
        self._rng = random.Random()
        self._reached = False  # set once this server answered at all
        #: The body's shape, learnt from this server's refusals (one repair each).
        self.shape = RequestShape(allow_mid_system=settings.system_role_after_start)
        #: How tools go on the wire (native or prompted), learnt per session.
        self.tool_mode = ToolMode(
            settings.tool_calling,
            settings.language,
            constraint=call_constraint(settings),
            tool_choice=settings.tool_choice,
        )

    # -- public ---------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        cancel: threading.Event | None = None,
        on_text: OnText | None = None,
        on_retry: OnRetry | None = None,
    ) -> AssistantTurn:
        """Send one request (streamed unless ``settings.stream`` is False) and return the turn.

        Transient failures are retried by one rule (docs/providers.md §4.5, ``_retry``):
        at most ``max_retries`` retries, each starting within ``retry_total_seconds`` of
        the first failure (a broken stream, a cut-off call, a server never reached:
        once; an empty reply while tools are offered: once, then once unstreamed).
        A retry restarts the request; ``on_retry(error, retry_number, delay_seconds)``
        is called first (numbers from 1), so a UI can drop text already streamed.
        One attempt lasts at most ``request_total_timeout`` seconds. Calls beyond
        ``max_tool_calls_per_turn`` carry a ``too_many_tool_calls`` error.

        Args:
            messages: OpenAI-shape messages, sent as they are.
            tools: tool schemas (``{"type": "function", "function": {...}}``) or None.
            cancel: when set, the request is abandoned within ~0.05 s, even while
                blocked waiting for the server (its connections are shut down).
            on_text: receives content fragments as they arrive (on_retry: see above).

        Returns the AssistantTurn (tool calls that must not run carry ``error``).

        Raises:
            LLMError: the classified failure after the last retry (ContextLengthExceeded
                for context overflows); its message says why retrying stopped. ``code``
                is the provider's error code, or the raw finish_reason it was read from.
            Cancelled: ``cancel`` was set.
        """
        plan = RetryPlan(self.settings, self._rng)
        stream, max_tokens = self.settings.stream, self.settings.max_output_tokens
        while True:
            _check(cancel)
            wire = self.tool_mode.wire(self.shape.messages(messages), tools)
            try:
                turn = self._attempt(wire, stream, max_tokens, cancel, on_text)
            except LLMError as error:
                if self.tool_mode.repair(error, wire) or self.shape.repair(
                    error, wire.messages, self.settings
                ):
                    continue
                if not self._wait_to_retry(error, plan, cancel, on_retry):
                    return _partial_turn(error)
                if error.kind == "truncated_tool_call" and max_tokens:
                    max_tokens *= 2  # a cut-off call gets room the second time
                continue
            if self.tool_mode.read(turn, wire, tools):
                continue  # auto: the tools never reached the model; ask again, prompted
            if tools and _is_empty(turn) and self._retry_empty(turn, plan, cancel, on_retry):
                stream = stream and plan.used("empty_response") < 2  # the second unstreamed
                continue
            cap_tool_calls(turn.tool_calls, self.settings.max_tool_calls_per_turn, turn.warnings)
            return turn

    def _retry_empty(
        self,
        turn: AssistantTurn,
        plan: RetryPlan,
        cancel: threading.Event | None,
        on_retry: OnRetry | None,
    ) -> bool:
        """An empty reply although tools were offered (llama.cpp streams with tools).
        Whether to ask again; if not, ``turn`` goes on as an empty answer (the main agent
        ends, a sub-agent gets the finish_task reminder) rather than failing the run."""
        empty = LLMError("empty_response", "the model sent an empty reply", retryable=True)
        if self._wait_to_retry(empty, plan, cancel, on_retry):
            return True
        turn.warnings.append("the model sent empty replies, also without streaming")
        return False

    def _wait_to_retry(
        self,
        error: LLMError,
        plan: RetryPlan,
        cancel: threading.Event | None,
        on_retry: OnRetry | None,
    ) -> bool:
        """Whether ``plan`` grants a retry after ``error``; if so, tell ``on_retry`` and
        wait the delay first. Raises Cancelled when ``cancel`` is set while waiting."""
        delay = plan.next_delay(error, reached=self._reached)
        if delay is None:
            return False
        log.info(
            "model request failed, retry %d in %.2f s: %s",
            plan.retries,
            delay,
            error.one_line(),
        )
        if on_retry is not None:
            on_retry(error, plan.retries, delay)
        if delay > 0 and cancel is None:
            time.sleep(delay)
        elif delay > 0 and cancel is not None and cancel.wait(delay):
            raise Cancelled("cancelled while waiting to retry the model request") from None
        return True

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one attempt ----------------------------------------------------------

    def _attempt(
        self,
        wire: Wire,
        stream: bool,
        max_tokens: int | None,
        cancel: threading.Event | None,
        on_text: OnText | None,
    ) -> AssistantTurn:
        # The watchdog shuts this client's sockets down when cancel is set or the
        # attempt's deadline passes, so even a read blocked on a silent server, or a
        # stream kept trickling, ends at once (as a transport error).
        limit = self.settings.request_total_timeout
        deadline = time.monotonic() + limit
        token = WATCHDOG.watch(cancel, self._tracker.abort, deadline)
        try:
            return self._exchange(wire, stream, max_tokens, cancel, on_text)
        except LLMError as error:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while waiting for the model") from error
            if time.monotonic() >= deadline:
                raise LLMError(
                    "timeout",
                    f"the model's reply took longer than request_total_timeout ({limit:g} s)",
                    retryable=True,
                ) from error
            raise
        finally:
            WATCHDOG.unwatch(token)

    def _exchange(
        self,
        wire: Wire,
        stream: bool,
        max_tokens: int | None,
        cancel: threading.Event | None,
        on_text: OnText | None,
    ) -> AssistantTurn:
        body = self.shape.body(self.settings, wire, stream, max_tokens)
        response = self._post(body, stream)
        raw = RawTurn()
        diagnostics = ""
        try:
            # Trust what the server sent over what was asked: some answer a streamed
            # request with one JSON body, or a plain request with SSE.
            content_type = response.headers.get("content-type", "").lower()
            sse = content_type.startswith("text/event-stream")
            if not sse and (not stream or content_type.startswith("application/json")):
                raw.apply_body(decode_body(response.read()))
                streamed = False
                if on_text is not None and raw.content:
                    on_text(raw.content.join())
            else:
                diagnostics = self._read_stream(response, raw, cancel, on_text)
                streamed = True
        except self._timeout_errors as exc:
            raise LLMError(
                "timeout", f"the model server stopped sending: {exc}", retryable=True
            ) from exc
        except self._transport_errors as exc:
            raise LLMError(
                "connection", f"the connection broke mid-reply: {exc}", retryable=True
            ) from exc
        finally:
            response.close()
        turn = build_turn(
            raw,
            streamed=streamed,
            messages=wire.messages,  # usage estimates count what was sent
            tools=wire.tools,
            max_tokens=max_tokens,
            text_fallback=self.text_tool_call_fallback and not wire.prompted,
            diagnostics=diagnostics,
        )
        if log.isEnabledFor(logging.DEBUG):  # one line per turn
            log.debug(
                "turn model=%s finish=%s raw_finish=%r calls=%d usage=%s request_id=%s warnings=%s",
                self.settings.model,
                turn.finish_reason,
                turn.raw_finish_reason,
                len(turn.tool_calls),
                turn.usage,
                response.headers.get("x-request-id") or response.headers.get("x-generation-id"),
                turn.warnings,
            )
        return turn

    def _post(self, body: dict[str, Any], stream: bool) -> Any:
        """Send one request through the openai client's own HTTP client and headers.

        The SDK's request pipeline (options models, deep copies, its retry loop) costs
        about 1 ms a request here, more than the HTTP exchange itself; agentkit owns
        retries and parsing anyway, so it builds the request directly: same
        client, auth and SDK headers, compact JSON (each message the ContextWindow
        encoded once: agentkit.llm.wire). Returns the open response.
        Raises LLMError (classified) for HTTP errors, timeouts and transport failures.
        """
        request = self._http.build_request(
            "POST",
            self._url,
            content=encode_body(body),
            headers=self._headers_stream if stream else self._headers,
            timeout=self.settings.request_timeout,
        )
        try:
            response = self._http.send(request, stream=True)
        except self._timeout_errors as exc:
            raise LLMError("timeout", "the model request timed out", retryable=True) from exc
        except self._transport_errors as exc:
            raise LLMError(
                "connection", f"cannot reach the model server: {exc}", retryable=True
            ) from exc
        self._reached = True
        if response.status_code >= 400:
            try:
                text = response.read().decode("utf-8", "replace")
            except self._transport_errors:
                text = ""
            finally:
                response.close()
            try:
                parsed: Any = loads(text, REPLY_MAX_DEPTH)
            except ValueError:  # not JSON, or nested too deeply
                parsed = None
            raise classify(response.status_code, parsed, text, response.headers)
        return response

    def _read_stream(
        self, response: Any, raw: RawTurn, cancel: threading.Event | None, on_text: OnText | None
    ) -> str:
        """Consume the SSE body into ``raw``; return unknown lines seen (for diagnostics)."""
        parser = SSEParser()
        for data in response.iter_bytes():
            for event, payload in parser.feed(data):
                raw.apply_event(event, payload, on_text)
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while the model was answering")
        for event, payload in parser.close():
            raw.apply_event(event, payload, on_text)
        return " | ".join(parser.unknown_lines)


def _partial_turn(error: LLMError) -> AssistantTurn:
    """The turn a failure still hands on (truncated calls, answered as tool errors and
    never run), else raise ``error``."""
    partial: AssistantTurn | None = getattr(error, "turn", None)
    if partial is None:
        raise error
    return partial


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled before the model request")


def _is_empty(turn: AssistantTurn) -> bool:
    return (
        not turn.content
        and not turn.tool_calls
        and not turn.reasoning
        and turn.finish_reason == "stop"
        and "refusal" not in turn.extra
    )
