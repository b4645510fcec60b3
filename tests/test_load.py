"""A short load: 8 clients mixing every operation over 4 tenants (bench/load.py runs 16 for 60 s).

The run ends when every client has done its operations, not after a time: on a busy machine it only takes
longer. What ran is recorded as each operation starts (the loader falls back to a retrieve, timed under the
name it drew, when a client has no document yet to re-ingest, delete or link)."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Db

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import load  # noqa: E402

CLIENTS, OPS_EACH = 8, 25


def test_concurrent_clients_lose_nothing_and_fail_nothing(db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: Counter[str] = Counter()
    lock = threading.Lock()
    one = load._one

    def recording_one(client: Any, hc: Any, op: str) -> None:
        effective = "retrieve" if op in ("reingest", "delete", "add_edges") and not client.docs else op
        with lock:
            ran[effective] += 1
        one(client, hc, op)

    monkeypatch.setattr(load, "_one", recording_one)
    # seconds: only a bound for a run that hangs; max_ops ends it
    report = load.run_load(db.dsn(), db.dsn("pyh_app"), clients=CLIENTS, seconds=900, tenants=4, max_ops=OPS_EACH)
    assert report["errors"] == [], report
    assert report["operations"] == CLIENTS * OPS_EACH  # every client did all of its operations
    assert report["actual_live_chunks"] == report["expected_live_chunks"]
    assert report["missing_chunks"] == 0 and report["unexpected_chunks"] == 0
    assert set(ran) == {"retrieve", "ingest", "reingest", "delete", "add_edges"}, ran
