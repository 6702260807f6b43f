"""One exception hierarchy for agentkit (httpx-style).

Everything agentkit raises on purpose derives from :class:`AgentkitError`, so an
embedding application can catch one type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: errors.py imports nothing of agentkit at run time
    from agentkit.engine_roles import RunStatus
    from agentkit.run_result import RunResult

LLMErrorKind = Literal[
    "rate_limit",
    "quota_exhausted",
    "request_too_large",
    "context_length_exceeded",
    "content_filter",
    "invalid_request",
    "authentication",
    "not_found",
    "server_error",
    "overloaded",
    "connection",
    "timeout",
    "incomplete_stream",
    "truncated_tool_call",
    "empty_response",
]
"""The kind of a failed model request (:attr:`LLMError.kind`; docs/providers.md §4.2)."""

ErrorKind = LLMErrorKind | Literal["budget_exhausted", "output_invalid"]
"""Why a run or round failed, when a known cause ended it: an LLMError kind,
``budget_exhausted`` (a spent token or cost budget) or ``output_invalid`` (the main
agent gave no valid typed result within ``output_retries``: agentkit.output)."""


class AgentkitError(Exception):
    """Base class of every error agentkit raises on purpose."""


class ConfigurationError(AgentkitError):
    """Settings are missing or invalid (no model, no key, bad workspace...).

    The CLI turns it into one line on stderr and exit code 2.
    """


class OutsideTextError(AgentkitError):
    """Base class of the errors whose message may carry text from outside (a model
    server's reply, a web page, an MCP server's answer).

    Its ``message`` (and so ``str()`` and ``args``) is scrubbed of every known secret
    whenever it is set, at construction or later
    (:func:`agentkit.process.redact.scrub_error`): a server that echoes the key it was
    sent cannot put it on any surface. Subclasses call ``super().__init__(message)``.
    """

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    @property
    def message(self) -> str:
        """The error's text, scrubbed of known secrets."""
        return self._message

    @message.setter
    def message(self, text: str) -> None:
        from agentkit.process.redact import scrub_error  # errors.py imports nothing eagerly

        self._message = scrub_error(text)
        self.args = (self._message,)


class LLMError(OutsideTextError):
    """A model request failed after classification (and retries, when transient).

    Attributes:
        kind: an :data:`LLMErrorKind`: ``rate_limit``, ``quota_exhausted``,
            ``request_too_large``, ``context_length_exceeded``, ``content_filter``,
            ``invalid_request``, ``authentication``, ``not_found``, ``server_error``,
            ``overloaded``, ``connection``, ``timeout``, ``incomplete_stream``,
            ``truncated_tool_call``, ``empty_response`` (docs/providers.md §4.2).
        status: the HTTP status, or None for transport and in-stream failures.
        retryable: whether the failure is transient (retried by LLMClient).
        retry_after: a server hint in seconds, or None.

    The message is scrubbed of known secrets (:class:`OutsideTextError`).
    """

    def __init__(
        self,
        kind: LLMErrorKind,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: LLMErrorKind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.code = code

    def one_line(self) -> str:
        """Return ``"<kind> (HTTP <status>): <message>"`` on one line, for people."""
        status = f" (HTTP {self.status})" if self.status else ""
        text = " ".join(self.message.split())
        if len(text) > 300:
            text = text[:300] + "…"
        return f"{self.kind}{status}: {text}"


class ContextLengthExceeded(LLMError):
    """The provider refused the request because the prompt is too long.

    Attributes:
        limit_tokens: the model's context limit parsed from the message, or None.
        requested_tokens: the size the provider counted, or None.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        limit_tokens: int | None = None,
        requested_tokens: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(
            "context_length_exceeded", message, status=status, retryable=False, code=code
        )
        self.limit_tokens = limit_tokens
        self.requested_tokens = requested_tokens


class ToolError(OutsideTextError):
    """Raised inside a tool to return a clean ``Error: <code>: <message>`` to the model.

    The registry catches it; it never reaches the engine loop. ``code`` is one of the
    stable strings of docs/tools.md ("not_found", "outside_workspace", ...). The
    message is scrubbed of known secrets (:class:`OutsideTextError`: a web page, a
    search provider or a server may echo a key).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Cancelled(AgentkitError):
    """The run was cancelled from another thread (Agent.cancel, Ctrl-C, close)."""


class WorkspaceFull(AgentkitError):
    """A :class:`agentkit.chat.Workspace` cannot open one more conversation: it holds
    ``max_open_conversations`` and none is idle (to be closed to make room), or the
    process ran out of file descriptors or threads. Nothing was created or changed;
    trying again later may succeed. The web chat answers it with 503."""


class ApprovalError(AgentkitError):
    """An answer to an approval request that cannot be taken: an unknown id, one
    already answered or withdrawn, or a decision that is not ``allow``,
    ``allow_always`` or ``deny`` (``Session.approve``). ``code`` is ``unknown``,
    ``answered``, ``withdrawn`` or ``invalid``; the message says which and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConfigFileError(AgentkitError, ValueError):
    """A configuration file (or setting) that cannot be used: a hooks file, an MCP
    config, an agent profile's or a skill's YAML header, ``Settings.hooks``...

    Attributes:
        path: the file (or the setting, e.g. ``Settings.hooks``) it came from; "" when
            not known yet (a caller adds it with :meth:`at`).
        field: the field, dotted (``hooks.PreToolUse[0].hooks[1].timeout``); "" for the
            whole document.
        message: what is wrong, one line.

    ``str()`` is ``"<path>: <field>: <message>"`` (empty parts left out): the one shape
    every config error is shown in. A ValueError too, as the errors it replaces were.
    """

    def __init__(self, path: str, field: str, message: str) -> None:
        self.path = str(path)
        self.field = field
        self.message = message
        super().__init__(self.path, field, message)

    def __str__(self) -> str:
        return ": ".join(part for part in (self.path, self.field, self.message) if part)

    def at(self, path: str) -> ConfigFileError:
        """The same error (same class) naming ``path`` as its file."""
        return type(self)(path, self.field, self.message)


RunFailedKind = ErrorKind | Literal["cancelled", "failed"]
"""What :attr:`RunFailed.kind` says: the run's ``error_kind`` when a known cause ended
it, else its status (``cancelled``, or ``failed`` for a failure of no known kind)."""


class RunFailed(AgentkitError):
    """A run did not succeed (:meth:`agentkit.RunResult.raise_for_status`).

    Attributes:
        kind: a :data:`RunFailedKind`: the result's ``error_kind`` when one is known
            (``connection``, ``authentication``, ``budget_exhausted``...), else its
            status: ``cancelled`` or ``failed``.
        message: the result's ``error`` line (or one saying how the run ended).
        status: the result's status, ``failed`` or ``cancelled``.
        result: the :class:`agentkit.RunResult` itself (its stats, transcript path...).
    """

    def __init__(
        self,
        kind: RunFailedKind,
        message: str,
        *,
        status: RunStatus,
        result: RunResult | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: RunFailedKind = kind
        self.message = message
        self.status: RunStatus = status
        self.result = result
