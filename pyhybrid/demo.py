"""`pyhybrid demo`: two tenants of a regulated-product corpus, hybrid queries, tenant isolation."""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

import psycopg

from . import _sql
from .client import HybridClient
from .ingest import ingest_records
from .types import BRANCHES, ChunkRef, shown_branches

TENANTS = ("acme", "globex")
# hybrid_retrieve's defaults (convex fusion, weights 1, 1) plus graph expansion from the best hit, with a
# graph weight and decay of its own: this corpus's edges (VERIFIES, MITIGATES, ...) were written to carry what
# its text lacks, so a neighbour found only through the graph gets 0.4 of its seed's score (graph_weight 1 x
# graph_decay 0.4), where CACM's citations pay for no more than the defaults' 0.2 (docs/graph.md).
DEMO_EXPAND = 1
DEMO_GRAPH: dict[str, Any] = {"graph_expand": DEMO_EXPAND, "graph_weight": 1.0, "graph_decay": 0.4}
DEMO_SEARCH_FLAGS = "--graph-expand 1 --graph-weight 1 --graph-decay 0.4"


def _sources(ref: ChunkRef) -> list[str]:
    return [b.name for b in BRANCHES if b.name in ref.ranks]


def check_claims(refs: list[ChunkRef], claims: dict[str, Any]) -> list[str]:
    """What the query's narrative claims and its table contradicts (empty: they agree)."""
    by_id = {r.chunk_id: r for r in refs}
    out: list[str] = []
    first = claims.get("first", [])
    if first and {r.chunk_id for r in refs[:len(first)]} != set(first):
        out.append(f"the first rows should be {first}, got {[r.chunk_id for r in refs[:len(first)]]}")
    for cid, want in claims.get("found_by", {}).items():
        got = _sources(by_id[cid]) if cid in by_id else None
        if got != want:
            out.append(f"{cid} should be found by {' and '.join(want)} only, got {got}")
    for cid, want in claims.get("found_by_includes", {}).items():
        got = _sources(by_id[cid]) if cid in by_id else []
        if not set(want) <= set(got):
            out.append(f"{cid} should be found by {' and '.join(want)}, got {got or 'not in the results'}")
    for cid, most in claims.get("lexical_rank_at_most", {}).items():
        rank = by_id[cid].keyword_rank if cid in by_id else None
        if rank is None or rank > most:
            out.append(f"{cid} should have a lexical rank of at most {most}, got {rank}")
    return out


def _load(name: str) -> list[dict[str, Any]]:
    text = resources.files("pyhybrid.demo_data").joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def queries() -> list[dict[str, Any]]:
    """The demo queries with what each shows and the chunks it should find."""
    data: list[dict[str, Any]] = json.loads(
        resources.files("pyhybrid.demo_data").joinpath("queries.json").read_text(encoding="utf-8"))
    return data


def load_demo(admin_dsn: str, app_dsn: str, *, quiet: bool = False) -> dict[str, Any]:
    """Create the demo tenants (as admin_dsn) and ingest their chunks, embedded offline, and graph edges (as
    the app role at app_dsn); idempotent."""
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for t in TENANTS:
            c.execute(_sql.CREATE_TENANT_SQL, (t, None, None))
    stats: dict[str, Any] = {}
    for t in TENANTS:
        records = _load(f"{t}_chunks.jsonl")
        stats[t] = ingest_records(app_dsn, t, "qms", iter(records), quiet=quiet, total=len(records))
        with HybridClient(app_dsn) as client, client.tenant(t) as session:
            stats[t]["edges"] = session.add_edges(_load(f"{t}_edges.jsonl")).__dict__
            stats[t]["abstain_floor"] = session.calibrate_abstention()  # for search --abstain
    return stats


def _rank(v: int | None) -> str:
    return "-" if v is None else str(v)


def _table(refs: list[ChunkRef], expect: set[str]) -> None:

    shown = shown_branches(refs)
    widths = [max(4, len(b.label or b.name)) for b in shown]
    print(f"  {'#':>2}  {'chunk':<20} {'fused':>7}  " + " ".join(f"{b.label or b.name:>{w}}" for b, w in zip(shown, widths))
          + "  title")
    for i, r in enumerate(refs, start=1):
        mark = "*" if r.chunk_id in expect else " "
        title = str(r.metadata.get("title", ""))[:44]
        ranks = " ".join(f"{_rank(r.ranks.get(b.name)):>{w}}" for b, w in zip(shown, widths))
        print(f"  {i:>2}{mark} {r.chunk_id:<20} {r.score:7.4f}  {ranks}  {title}")


def _context(ref: ChunkRef) -> None:
    if not ref.graph_context:
        return
    print(f"  graph context of the top hit {ref.chunk_id}:")
    for c in ref.graph_context[:8]:
        arrow = "->" if c.get("direction") == "out" else "<-"
        title = f"  ({c['title']})" if c.get("title") else ""
        print(f"     {arrow} {c.get('rel'):<12} {c.get('node_id')}{title}")


def run_demo(admin_dsn: str, app_dsn: str, *, quiet: bool = False, flags: str = "") -> int:
    """Load the demo corpus and print the guided tour; returns 0 when every expected chunk was found.
    flags: the global flags the closing hints repeat (e.g. "--data-dir DIR ")."""
    from .embed import default_embedder

    started = time.perf_counter()
    print("pyhybrid demo: hybrid retrieval inside PostgreSQL (pgvector + BM25 + Apache AGE, fused in SQL)\n")
    stats = load_demo(admin_dsn, app_dsn, quiet=quiet)
    for tenant_id, s in stats.items():
        print(f"tenant {tenant_id}: {s['inserted']} chunks inserted, {s['updated']} updated, {s['unchanged']} unchanged; "
              f"graph edges added {s['edges']['edges_added']} (already there {s['edges']['edges_present']})")
    embed = default_embedder()
    found = total = mismatches = 0
    with HybridClient(app_dsn) as client:
        for n, q in enumerate(queries(), start=1):
            expect = set(q.get("expect", []))
            with client.tenant(q["tenant"], q.get("acl_labels")) as session:
                refs = session.retrieve(query_embedding=embed.embed_query(q["text"]), query_text=q["text"], top_k=10,
                                        filter=q.get("filter"), with_graph_context=True, **DEMO_GRAPH)
            hits = expect & {r.chunk_id for r in refs}
            found, total = found + len(hits), total + len(expect)
            flt = f"  filter {json.dumps(q['filter'])}" if q.get("filter") else ""
            print(f"\n[{n}] tenant {q['tenant']}: \"{q['text']}\"{flt}")
            print(f"    {q.get('why', '')}")
            _table(refs, expect)
            if refs:
                _context(refs[0])
            print(f"  expected chunks found (*): {len(hits)} of {len(expect)}")
            for problem in check_claims(refs, q.get("claims", {})):
                mismatches += 1
                print(f"  NARRATIVE MISMATCH: {problem}")
            if q["tenant"] and any(not r.chunk_id.startswith(q["tenant"] + ":") for r in refs):
                print("  TENANT LEAK: a row of another tenant was returned")
                return 1
        print("\n[isolation] the same question, \"occlusion alarm\", asked by each tenant:")
        question = "occlusion alarm"
        vec = embed.embed_query(question)
        for tenant in TENANTS:
            with client.tenant(tenant) as session:
                refs = session.retrieve(query_embedding=vec, query_text=question, top_k=5)
            owners = sorted({r.tenant_id for r in refs})
            print(f"  {tenant}: {', '.join(r.chunk_id for r in refs)}  (tenants in the result: {owners})")
        print("\n[acl] chunks labelled 'quality' appear only for callers holding that label:")
        for labels in ([], ["quality"]):
            with client.tenant("acme", labels) as session:
                refs = session.retrieve(query_embedding=embed.embed_query("confidential supplier audit"),
                                  query_text="confidential supplier audit", top_k=3)
            print(f"  acl_labels={labels}: " + ", ".join(f"{r.chunk_id}{' [' + ','.join(r.acl_labels) + ']' if r.acl_labels else ''}" for r in refs))
    print(f"\n{found} of {total} expected chunks found"
          + (f"; {mismatches} narrative mismatch(es)" if mismatches else "; every narrative agrees with its table")
          + f"; demo took {time.perf_counter() - started:.1f} s.")
    print(f"Try it yourself:  pyhybrid {flags}search \"How quickly must the pump alarm after a downstream "
          f"occlusion?\" --tenant acme {DEMO_SEARCH_FLAGS} --explain")
    print(f"From SQL:  pyhybrid {flags}sql --tenant acme  (psql as the app role; a query's embedding: "
          "pyhybrid embed TEXT)")
    return 0
