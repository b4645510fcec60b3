"""A small OpenAI-compatible /v1/embeddings server on localhost, for the endpoint embedder's tests (and docs blocks).

Its vectors are a deterministic function of each input text (a word-hash bag, so texts sharing words are near), of
DIM dimensions. It can be told to fail: the first `fail` requests answer `fail_status` (with Retry-After 0), every
request waits `delay` seconds, `garbage` answers something that is not an embeddings response.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from tests.helpers import DIM


def stub_vector(text: str, dim: int = DIM) -> list[float]:
    """The stub's embedding of text: a normalized bag of hashed words."""
    v = np.zeros(dim, dtype=np.float64)
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha256(word.strip(".,?!:;").encode()).digest()[:8], "little")
        v[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    if not v.any():
        v[0] = 1.0
    return [float(x) for x in v / np.linalg.norm(v)]


class EmbeddingStub:
    """The server: `url` is its /v1 base; `requests` the JSON bodies and headers it received."""

    def __init__(self, *, dim: int = DIM) -> None:
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        self.fail = 0
        self.fail_status = 503
        self.delay = 0.0
        self.garbage = False
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server interface
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if stub.delay:
                    time.sleep(stub.delay)
                if stub.fail > 0:
                    stub.fail -= 1
                    self._answer(stub.fail_status, {"error": {"message": "try later"}}, {"Retry-After": "0"})
                elif self.path != "/v1/embeddings":
                    self._answer(404, {"error": {"message": f"no route {self.path}"}})
                elif stub.garbage:
                    self._answer(200, {"object": "list", "items": []})
                else:
                    data = [{"object": "embedding", "index": i, "embedding": stub_vector(t, stub.dim)}
                            for i, t in enumerate(body["input"])]
                    self._answer(200, {"object": "list", "model": body.get("model"), "data": data[::-1]})

            def _answer(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> EmbeddingStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
