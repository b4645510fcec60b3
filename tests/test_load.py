"""A short load: 8 clients for 8 s mixing every operation over 4 tenants (bench/load.py runs 16 for 60 s)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import Db

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from load import run_load  # noqa: E402


def test_concurrent_clients_lose_nothing_and_fail_nothing(db: Db) -> None:
    report = run_load(db.dsn(), db.dsn("pyh_app"), clients=8, seconds=8, tenants=4)
    assert report["errors"] == [], report
    assert report["operations"] > 50
    assert report["actual_live_chunks"] == report["expected_live_chunks"]
    assert report["missing_chunks"] == 0 and report["unexpected_chunks"] == 0
    assert set(report["latency_ms"]) == {"retrieve", "ingest", "reingest", "delete", "add_edges"}
