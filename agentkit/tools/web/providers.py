"""Search providers: the ``ddgs`` default and a SearXNG instance as a worked example.

Each implements :class:`agentkit.tools.web.search.SearchProvider` (``search(query,
max_results) -> list[SearchHit]``, raising on failure); :func:`run_search` wraps them
with the deadline, retry and clean-up. An optional ``cache_key()`` method tells the
result cache which settings the results depend on.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from agentkit.settings import Settings
from agentkit.tools.web.search import SearchHit, SearchProviderError


class DdgsProvider:
    """The default provider: the ``ddgs`` metasearch package (``DDGS().text``).

    Args:
        backend: ddgs backend(s), e.g. "auto", "duckduckgo", "bing,brave".
        region: e.g. "wt-wt" (no region), "us-en", "cn-zh".
        safesearch: "on", "moderate" or "off".
        timeout: seconds per engine request inside ddgs.

    Queries are spaced at least ``min_interval`` seconds apart process-wide
    (docs/tools.md: ≥ 1.5 s), which keeps engines from rate-limiting a busy agent.
    """

    min_interval = 1.5
    _lock = threading.Lock()
    _last = 0.0

    def __init__(
        self,
        backend: str = "auto",
        region: str = "wt-wt",
        safesearch: str = "moderate",
        timeout: float = 10,
    ) -> None:
        self.backend, self.region, self.safesearch, self.timeout = (
            backend,
            region,
            safesearch,
            timeout,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> DdgsProvider:
        """Build one from web_search_backend / _region / _safesearch / _timeout."""
        return cls(
            backend=settings.web_search_backend,
            region=settings.web_search_region,
            safesearch=settings.web_search_safesearch,
            timeout=min(10.0, settings.web_search_timeout),
        )

    def cache_key(self) -> tuple[str, ...]:
        """Results depend on these settings only."""
        return ("ddgs", self.backend, self.region, self.safesearch)

    def _throttle(self) -> None:
        with DdgsProvider._lock:
            wait = DdgsProvider._last + self.min_interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            DdgsProvider._last = time.monotonic()

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        """Run ``DDGS().text``; raises SearchProviderError (rate_limited / maybe_empty)."""
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        self._throttle()
        try:
            rows = DDGS(timeout=max(1, round(self.timeout))).text(
                query,
                region=self.region,
                safesearch=self.safesearch,
                max_results=max_results,
                backend=self.backend,
            )
        except RatelimitException as exc:
            raise SearchProviderError(f"rate limited: {exc}", rate_limited=True) from None
        except TimeoutException as exc:
            raise SearchProviderError(f"timed out: {exc}") from None
        except DDGSException as exc:
            text = str(exc) or "no results"
            empty = "no results" in text.lower()
            raise SearchProviderError(text, maybe_empty=empty) from None
        return [
            SearchHit(
                str(r.get("title") or ""),
                str(r.get("href") or r.get("url") or ""),
                str(r.get("body") or ""),
            )
            for r in rows or []
        ]


class SearxngProvider:
    """A SearXNG instance through its JSON API (``GET /search?q=...&format=json``).

    Args:
        base_url: the instance, e.g. "http://localhost:8888" (its settings.yml must list
            ``json`` under ``search.formats``, otherwise it answers 403).
        timeout: seconds for the HTTP request.
        params: extra query parameters (``language``, ``categories``, ``safesearch``...).
        headers: extra HTTP headers (an API gateway key...).

    Example: ``make_web_tools(SearxngProvider("http://localhost:8888"))``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.params = dict(params or {})
        self.headers = dict(headers or {})

    def cache_key(self) -> tuple[str, ...]:
        """Results depend on the instance and the extra parameters."""
        return ("searxng", self.base_url, repr(sorted(self.params.items())))

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        """Query the instance; raises SearchProviderError on HTTP or format errors."""
        import httpx

        try:
            response = httpx.get(
                f"{self.base_url}/search",
                params={**self.params, "q": query, "format": "json"},
                headers=self.headers,
                timeout=self.timeout,
            )
        except httpx.HTTPError as exc:
            raise SearchProviderError(f"SearXNG at {self.base_url} unreachable: {exc}") from None
        if response.status_code == 429:
            raise SearchProviderError("SearXNG answered HTTP 429", rate_limited=True)
        if response.status_code == 403:
            raise SearchProviderError("SearXNG answered HTTP 403 (is format json enabled?)")
        if response.status_code >= 400:
            raise SearchProviderError(f"SearXNG answered HTTP {response.status_code}")
        try:
            rows: list[dict[str, Any]] = response.json().get("results") or []
        except (ValueError, AttributeError):
            raise SearchProviderError("SearXNG did not return JSON") from None
        hits = [
            SearchHit(
                str(r.get("title") or ""), str(r.get("url") or ""), str(r.get("content") or "")
            )
            for r in rows
            if isinstance(r, dict)
        ]
        return hits[:max_results]


def provider_from_settings(settings: Settings) -> Any:
    """Return the SearchProvider named by ``settings.web_search_provider``.

    ``ddgs`` (default): DdgsProvider from the web_search_* settings;
    ``searxng:<base url>``: SearxngProvider; ``package.module:attribute``: that
    object, called first when it is a class or a factory. Because Settings reach
    every sub-agent worker, this is how a custom engine is used by sub-agents too.
    Raises ValueError for a name that cannot be imported.
    """
    name = (settings.web_search_provider or "ddgs").strip()
    if name == "ddgs":
        return DdgsProvider.from_settings(settings)
    if name.startswith("searxng:"):
        return SearxngProvider(name[len("searxng:") :], timeout=settings.web_search_timeout)
    module_name, _, attribute = name.partition(":")
    if not attribute:
        raise ValueError(
            f"web_search_provider {name!r}: use ddgs, searxng:<url> or module:attribute"
        )
    import importlib

    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"web_search_provider {name!r} cannot be imported: {exc}") from exc
    if isinstance(target, type) or (callable(target) and not hasattr(target, "search")):
        return target()
    return target
