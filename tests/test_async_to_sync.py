"""pyhybrid/client.py is generated from pyhybrid/aio.py (tools/async_to_sync.py): the twins cannot drift."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from pyhybrid import AsyncHybridClient, HybridClient
from pyhybrid.aio import AsyncTenantSession
from pyhybrid.client import TenantSession

ROOT = Path(__file__).resolve().parent.parent


def test_the_sync_client_is_the_generated_one() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "async_to_sync.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def _public(cls: type) -> dict[str, list[str]]:
    return {n: list(inspect.signature(f).parameters) for n, f in vars(cls).items()
            if callable(f) and not n.startswith("_")}


def test_both_clients_offer_the_same_methods_with_the_same_parameters() -> None:
    assert _public(HybridClient) == _public(AsyncHybridClient)
    sync, async_ = _public(TenantSession), _public(AsyncTenantSession)
    async_["retrieve"].remove("parallel")  # the one difference: parallel branches need the async pool
    assert sync == async_
