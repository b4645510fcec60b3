"""An OpenAI-compatible /v1/embeddings client on the standard library: batches, retries with backoff, timeouts."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import EmbedderError

if TYPE_CHECKING:
    from .embedders import EmbedderSpec

_RETRIED = {408, 409, 429, 500, 502, 503, 504}
"""HTTP statuses worth another try (rate limits, timeouts, a server restarting); any other error is final."""


def endpoint_url(target: str) -> str:
    """The embeddings URL of a spec's target: as given where it ends in /embeddings, else with it appended."""
    base = target.rstrip("/")
    return base if base.endswith("/embeddings") else base + "/embeddings"


class OpenAIEmbeddings:
    """texts -> vectors through POST {"model", "input"} to an OpenAI-compatible endpoint."""

    def __init__(self, spec: EmbedderSpec) -> None:
        self.spec = spec
        self.url = endpoint_url(spec.target)

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings({self.url!r}, model={self.spec.model!r})"

    def _headers(self) -> dict[str, str]:
        """Read at each call: the API key comes from the environment of the command that runs (the search daemon
        serves several)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        var = self.spec.key_env or "OPENAI_API_KEY"
        key = os.environ.get(var)
        if self.spec.key_env and not key:
            raise EmbedderError(f"embedder {self.spec.label()}: key_env={var} but ${var} is not set")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.spec.batch):
            out.extend(self._post(list(texts[start:start + self.spec.batch])))
        return out

    def _post(self, batch: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.spec.model, "input": batch}).encode()
        where = f"embedder {self.spec.label()} (model {self.spec.model})"
        for attempt in range(self.spec.retries + 1):
            last = attempt == self.spec.retries
            request = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.spec.timeout) as response:
                    payload = response.read()
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode(errors="replace")
                if exc.code not in _RETRIED or last:
                    raise EmbedderError(f"{where}: HTTP {exc.code} {exc.reason}"
                                        f"{' after ' + str(attempt + 1) + ' tries' if attempt else ''}: {detail}") from None
                sleep(backoff(attempt, exc.headers.get("Retry-After")))
                continue
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                if last:
                    raise EmbedderError(f"{where}: no answer from {self.url} after {attempt + 1} tries "
                                        f"(timeout {self.spec.timeout:g} s each): {reason}") from None
                sleep(backoff(attempt, None))
                continue
            return _vectors(payload, len(batch), where)
        raise AssertionError("unreachable")


def backoff(attempt: int, retry_after: str | None) -> float:
    """Seconds to wait before retry attempt (0-based): the server's Retry-After where it gives one (at most 30),
    else 0.5 s doubling to at most 8 s."""
    if retry_after:
        try:
            return min(30.0, max(0.0, float(retry_after)))
        except ValueError:
            pass
    return float(min(8.0, 0.5 * 2 ** attempt))


def sleep(seconds: float) -> None:
    """time.sleep, by a name the tests replace (retries do not wait there)."""
    time.sleep(seconds)


def _vectors(payload: bytes, count: int, where: str) -> list[list[float]]:
    """The vectors of an /embeddings answer, in input order; EmbedderError for an answer of another shape."""
    try:
        data: Any = json.loads(payload)["data"]
        rows = sorted(data, key=lambda d: d.get("index", 0)) if all("index" in d for d in data) else data
        vectors = [row["embedding"] for row in rows]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EmbedderError(f"{where}: the answer is not an embeddings response ({{\"data\": [{{\"embedding\": "
                            f"[...], \"index\": i}}]}}): {type(exc).__name__} {exc}; it began "
                            f"{payload[:120].decode(errors='replace')!r}") from None
    if len(vectors) != count:
        raise EmbedderError(f"{where}: {len(vectors)} vectors for {count} texts")
    return vectors
