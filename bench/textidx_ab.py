"""One-off (issue 27): a bulk load with the text indexes held off and rebuilt after, against today's path.

Rounds alternate (ABBA) on one embedded server: each a fresh database, one tenant of --rows pre-embedded
chunks (bench/latency.py's generator), ingest_records(writers=2) inside HybridClient.bulk_load(text_indexes=...),
then merge_bm25 (the step docs/ingesting.md gives after a bulk load). Writes bench/results/textidx_ab.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import psycopg

import latency as L
from _common import control_ms, drop_database, fresh_database, start_meta, write_result
from pyhybrid import HybridClient, migrate
from pyhybrid.ingest import ingest_records
from pyhybrid.maintenance import merge_bm25
from pyhybrid.server import start_embedded

QUERIES = 20


def one_round(admin: str, td: L.TenantData, deferred: bool, i: int, queries: list[str]) -> dict[str, object]:
    db = f"textidx_ab_{i}"
    fresh_database(admin, db, L.APP_ROLE)
    dsn = L.dsn_for(admin, db)
    migrate.upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant(%s)", (td.tenant_id,))
        c.execute("SELECT hybrid.grant_app(%s)", (L.APP_ROLE,))
    app, n, ctl = L.dsn_for(admin, db, L.APP_ROLE), len(td.chunk_ids), control_ms()
    recs = ({"chunk_id": td.chunk_ids[j], "document_id": td.doc_ids[j], "content": td.texts[j], "embedding": td.vectors[j],
             "position": int(td.positions[j]), "metadata": {"topic": int(td.clusters[j])}} for j in range(n))
    t0 = time.perf_counter()
    with HybridClient(dsn) as c, c.bulk_load(text_indexes=deferred):
        ingest_records(app, td.tenant_id, "main", recs, batch_size=500, quiet=True, writers=2)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    merged = [vars(a) for a in merge_bm25(dsn, [td.tenant_id])]
    t3 = time.perf_counter()
    with HybridClient(app) as c, c.tenant(td.tenant_id) as t, t.conn.transaction():
        tops = [[r["chunk_id"] for r in t.conn.execute(
            "SELECT chunk_id FROM hybrid.search_lexical(%s, 10, lexical => 'bm25') ORDER BY rank", (q,))] for q in queries]
    with psycopg.connect(admin, autocommit=True) as c:
        drop_database(c, db)
    r = {"text_indexes_deferred": deferred, "control_ms": round(ctl, 1), "load_s": round(t1 - t0, 1),
         "index_rebuild_s": round(t2 - t1, 1), "merge_bm25_s": round(t3 - t2, 1), "merge": merged,
         "total_s": round(t3 - t0, 1), "chunks_per_s_end_to_end": round(n / (t3 - t0), 1), "bm25_tops": tops}
    print({k: v for k, v in r.items() if k not in ("bm25_tops", "merge")}, flush=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/textidx_ab"))
    args = ap.parse_args()
    meta = start_meta("textidx_ab")
    admin = L.configure_server(args.data_dir, start_embedded(args.data_dir))
    world = L.World(7)
    td = L.make_tenant(world, "t000", args.rows, np.random.default_rng(8))
    queries = [" ".join(world.vocab[world.topics[c, :3]]) for c in range(QUERIES)]
    rounds = [one_round(admin, td, deferred, i, queries) for i, deferred in enumerate((False, True, True, False))]
    base, new = ([r for r in rounds if r["text_indexes_deferred"] is d] for d in (False, True))
    summary = {k: round(sum(float(b[k]) for b in new) / sum(float(b[k]) for b in base), 3)  # type: ignore[arg-type]
               for k in ("load_s", "total_s")}
    summary["same_bm25_tops"] = all(r["bm25_tops"] == rounds[0]["bm25_tops"] for r in rounds)  # type: ignore[assignment]
    print("deferred / present:", summary, flush=True)
    write_result(Path(__file__).parent / "results" / "textidx_ab.json", meta,
                 {"rows": args.rows, "rounds": rounds, "ratio_deferred_over_present": summary})


if __name__ == "__main__":
    main()
