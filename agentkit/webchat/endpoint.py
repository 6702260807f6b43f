"""The model endpoint check of ``agentkit serve``: is the endpoint there, and does it
know the model? (docs/web-api.md ``GET /api/info``).

One job: one ``GET <base_url>/models`` with a short timeout (:func:`check_endpoint`),
its answer in words (:class:`EndpointCheck`), and :class:`EndpointWatch`, which runs
the check in a thread at start (the server never waits for it, nor refuses to start)
and again on request. The API key goes only in the Authorization header to the
configured endpoint; the URL shown drops any user name, password or query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentkit.chat.explain import shown_url
from agentkit.conversation import utc_now
from agentkit.settings import Settings

__all__ = ["CHECK_TIMEOUT", "EndpointCheck", "EndpointStatus", "EndpointWatch", "check_endpoint"]

EndpointStatus = Literal["checking", "ok", "warning", "failed"]
"""The outcome of an endpoint check (:attr:`EndpointCheck.status`)."""

CHECK_TIMEOUT = 4.0
"""Seconds the models request may take (connect and read) before it counts as failed."""


@dataclass(frozen=True)
class EndpointCheck:
    """The result of an endpoint check.

    Attributes:
        status: an :data:`EndpointStatus`: ``checking`` (not done yet), ``ok`` (it answered and lists the model,
            or lists none), ``warning`` (it answered, but does not list the model, or
            answered the models request with an error other than 401/403) or
            ``failed`` (unreachable, no answer in time, or the key refused).
        message: one line for people, naming the endpoint.
        url: the endpoint as shown (no secrets).
        model: the configured model name.
        models: the model ids it lists (at most 20), or None when it listed none.
        checked_at: ISO UTC time of the check ("" while checking).
    """

    status: EndpointStatus
    message: str
    url: str
    model: str | None
    models: list[str] | None = None
    checked_at: str = field(default="")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


def _listed(body: Any) -> list[str] | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    return ids or None


def check_endpoint(settings: Settings, timeout: float = CHECK_TIMEOUT) -> EndpointCheck:
    """Ask ``settings.base_url`` (default OpenAI) for its models; never raises.

    Returns an :class:`EndpointCheck` (see its ``status`` for the rules).
    """
    import httpx

    url = shown_url(settings.base_url)
    base = (settings.base_url or url).rstrip("/")
    model = settings.model
    done = utc_now()
    headers = {"Accept": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    try:
        with httpx.Client(timeout=timeout, verify=not base.lower().startswith("http://")) as client:
            response = client.get(base + "/models", headers=headers)
    except httpx.TimeoutException:
        why = f"no answer from the model endpoint {url} within {timeout:g} s"
        return EndpointCheck("failed", why, url, model, None, done)
    except (httpx.HTTPError, OSError, ValueError) as exc:
        # The reason may quote the URL as configured: shown without its secrets.
        raw = " ".join(str(exc).replace(settings.base_url or url, url).split())
        reason = raw[:200] or type(exc).__name__
        why = f"cannot reach the model endpoint {url}: {reason}"
        return EndpointCheck("failed", why, url, model, None, done)
    code = response.status_code
    if code in (401, 403):
        why = f"the model endpoint {url} refused the API key (HTTP {code})"
        return EndpointCheck("failed", why, url, model, None, done)
    if code >= 400 and code != 404:
        why = f"the model endpoint {url} answered HTTP {code} to a models request"
        return EndpointCheck("warning", why, url, model, None, done)
    try:
        models = _listed(response.json()) if code < 400 else None
    except ValueError:
        models = None
    if models and model and model not in models:
        shown = ", ".join(models[:5]) + (", …" if len(models) > 5 else "")
        why = f"{url} answers, but does not list the model {model!r} (it lists {shown})"
        return EndpointCheck("warning", why, url, model, models[:20], done)
    return EndpointCheck(
        "ok", f"{model} at {url}: reachable", url, model, models and models[:20], done
    )


class EndpointWatch:
    """The last endpoint check of a server; :meth:`start` runs one in a daemon thread.

    Args:
        settings: the server's Settings.
        demo: True for ``serve --demo`` (the scripted model's server is checked too;
            the message says it is scripted).

    Attributes:
        on_result: called with each result, on the checking thread (``agentkit serve``
            prints it); None: nothing.
    """

    def __init__(self, settings: Settings, demo: bool = False) -> None:
        self.settings = settings
        self.demo = demo
        url = shown_url(settings.base_url)
        self._result = EndpointCheck(
            "checking", f"checking the model endpoint {url}…", url, settings.model
        )
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None
        self.on_result: Callable[[EndpointCheck], None] | None = None

    @property
    def result(self) -> EndpointCheck:
        """The latest result (``checking`` until the first check ends)."""
        with self._lock:
            return self._result

    def start(self, *, once: bool = False) -> None:
        """Check again in the background (nothing when a check is running; with
        ``once``, nothing when one has ever started)."""
        with self._lock:
            if self._running is not None and (once or self._running.is_alive()):
                return
            self._running = threading.Thread(
                target=self._check, name="agentkit-endpoint", daemon=True
            )
            self._running.start()

    def wait(self, timeout: float) -> EndpointCheck:
        """Wait up to ``timeout`` seconds for the running check; return the result."""
        thread = self._running
        if thread is not None:
            thread.join(timeout)
        return self.result

    def _check(self) -> None:
        result = check_endpoint(self.settings)
        if self.demo and result.status == "ok":
            result = EndpointCheck(
                "ok", "a scripted demo model (no real model, no network)", result.url,
                result.model, result.models, result.checked_at,
            )  # fmt: skip
        with self._lock:
            self._result = result
        if self.on_result is not None:
            self.on_result(result)
