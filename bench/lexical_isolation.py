"""Does a tenant's lexical search time or score depend on another tenant's documents?

Tenant "a" holds --docs documents; tenant "b" holds --docs documents too. For a word present in none
of a's documents ("absent") and one present in a few of them ("rare"), the script times a's
hybrid.search_lexical (BM25) and records a's top score, first while b holds no document with the
word, then after b adds --flood documents holding it. The engine is whatever `pyhybrid` imports
(set PYTHONPATH to a checkout to measure another commit); each state is timed --queries times,
interleaved, as the app role.

    python bench/lexical_isolation.py --out bench/results/lexical_isolation.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

import pyhybrid
from pyhybrid import Chunk, HybridClient, migrate
from pyhybrid.server import start_embedded

APP = "bench_lex_app"


def timed(client: HybridClient, word: str, n: int) -> tuple[list[float], float | None]:
    times, top = [], None
    for _ in range(n):
        with client.tenant("a") as t:
            t0 = time.perf_counter()
            rows = t.conn.execute("SELECT value FROM hybrid.search_lexical(%s, 30, lexical => 'bm25')", (word,)).fetchall()
            times.append((time.perf_counter() - t0) * 1000)
            top = float(rows[0]["value"]) if rows else None
    return times, top


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1500)
    ap.add_argument("--flood", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-lexical"))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "lexical_isolation.json")
    args = ap.parse_args(argv)
    root = Path(pyhybrid.__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    server = start_embedded(args.data_dir)
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS bench_lexical WITH (FORCE)")
        c.execute("CREATE DATABASE bench_lexical")
        if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP,)).fetchone() is None:
            c.execute(f"CREATE ROLE {APP} LOGIN")
    dsn = conninfo.make_conninfo(server, dbname="bench_lexical")
    migrate.upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        # b first: a's partition is not the first one (pg_textsearch resolves a parent index to the first)
        c.execute("SELECT hybrid.create_tenant('b'), hybrid.create_tenant('a'), hybrid.grant_app(%s)", (APP,))
    app = conninfo.make_conninfo(dsn, user=APP)
    states: dict[str, Any] = {}
    with HybridClient(app) as client:
        with client.tenant("a") as t:
            t.ingest([Chunk(chunk_id=f"a{i}", document_id=f"a{i}",
                            content=f"pump valve alarm battery {'quasar' if i % 100 == 0 else 'nebula'} item {i}")
                      for i in range(args.docs)])
        with client.tenant("b") as t:
            t.ingest([Chunk(chunk_id=f"b{i}", document_id=f"b{i}", content=f"other words {i}") for i in range(args.docs)])
        for state in ("b holds none", "b holds the words"):
            if state == "b holds the words":
                with client.tenant("b") as t:
                    t.ingest([Chunk(chunk_id=f"f{i}", document_id=f"f{i}", content="zircon quasar zircon quasar launch")
                              for i in range(args.flood)])
            for word, label in (("zircon", "absent from a"), ("quasar", "rare in a")):
                timed(client, word, 10)  # warm-up
                ts, top = timed(client, word, args.queries)
                states[f"{state} / {label}"] = {"p50_ms": round(statistics.median(ts), 3),
                                                "p95_ms": round(sorted(ts)[int(0.95 * (len(ts) - 1))], 3),
                                                "a_top_score": None if top is None else round(top, 6)}
                print(state, label, states[f"{state} / {label}"], file=sys.stderr)
    report = {"engine": {"git_head": head, "root": str(root)}, "docs_per_tenant": args.docs, "flood": args.flood,
              "queries": args.queries, "states": states}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"# Lexical isolation (engine {head})", "",
             f"Tenant a: {args.docs} documents; tenant b: {args.docs}, then {args.flood} more holding the words. "
             f"{args.queries} timed BM25 searches by a per cell.", "",
             "| state | p50 ms | p95 ms | a's top score |", "|---|---:|---:|---:|"]
    for k, v in states.items():
        lines.append(f"| {k} | {v['p50_ms']} | {v['p95_ms']} | {v['a_top_score']} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
