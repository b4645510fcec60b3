"""Load and faults: concurrent clients mixing every operation, read throughput with hot standbys, or documents
through `pyhybrid ingest`; the modes, their commands and what each checks: bench/README.md, docs/benchmarks.md.

Mixed (the default): each client owns its documents, so every tenant must end with exactly the live chunks its
clients last wrote; only retryable errors (pyhybrid.ConflictError) are allowed, retried by this harness and counted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import psycopg
from psycopg import conninfo

from _common import control_ms, start_meta, unit_vectors, write_result
from pyhybrid import Chunk, ConflictError, HybridClient, migrate
from pyhybrid.server import start_embedded, start_embedded_standby, stop_embedded

OPS = (("retrieve", 0.55), ("ingest", 0.15), ("reingest", 0.12), ("delete", 0.10), ("add_edges", 0.08))


@dataclass
class Client:
    """One load client: its tenant, its documents (document id -> live chunk ids) and its timings."""

    index: int
    tenant: str
    rng: random.Random
    docs: dict[str, list[str]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    serial: int = 0

    def chunks(self, doc: str, n: int) -> list[Chunk]:
        self.serial += 1
        vrng = np.random.default_rng(self.index * 1_000_003 + self.serial)
        return [Chunk(chunk_id=f"{doc}#{i}", document_id=doc, position=i, embedding=unit_vectors(vrng, 1)[0],
                      content=" ".join(self.rng.choice(WORDS[:10]) for _ in range(12)) + f" v{self.serial}")
                for i in range(n)]


def _one(client: Client, hc: HybridClient, op: str) -> None:
    with hc.tenant(client.tenant) as t:
        if op == "retrieve" or (op in ("reingest", "delete", "add_edges") and not client.docs):
            q = unit_vectors(np.random.default_rng(client.rng.randrange(1 << 30)), 1)[0]
            t.retrieve(query_embedding=q, query_text=client.rng.choice(["pump alarm", "valve flow", "audit risk"]),
                       top_k=10)
            return
        doc = f"c{client.index}-d{client.serial}" if op == "ingest" else client.rng.choice(sorted(client.docs))
        if op in ("ingest", "reingest"):
            batch = client.chunks(doc, client.rng.randint(1, 6))
            t.ingest(batch, corpus_id="load")
            client.docs[doc] = [c.chunk_id for c in batch]
        elif op == "delete":
            t.delete_document(doc)
            del client.docs[doc]
        else:
            t.add_edges([{"src": client.docs[doc][0], "dst": f"{client.tenant}:entity:{client.rng.randrange(20)}",
                          "rel": "MENTIONS"}])


def _run_client(client: Client, dsn: str, stop_at: float, max_ops: int) -> None:
    with HybridClient(dsn) as hc:
        for _ in range(max_ops):
            if time.monotonic() >= stop_at:
                return
            op = client.rng.choices([o for o, _ in OPS], [w for _, w in OPS])[0]
            for _ in range(5):
                t0 = time.perf_counter()
                try:
                    _one(client, hc, op)
                except ConflictError:
                    client.retries += 1
                    continue
                except Exception as exc:  # noqa: BLE001 - every other error is a finding
                    client.errors.append(f"{op}: {type(exc).__name__}: {exc}")
                    return
                client.latencies.setdefault(op, []).append((time.perf_counter() - t0) * 1000)
                break
            else:
                client.errors.append(f"{op}: still conflicting after 5 attempts")
                return


def run_load(admin_dsn: str, app_dsn: str, *, clients: int, seconds: float, tenants: int = 4, seed: int = 7,
             max_ops: int = 100_000) -> dict[str, Any]:
    """Run the load on a migrated database; returns the report (errors, retries, counts, latencies)."""
    names = [f"load{t}" for t in range(tenants)]
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for name in names:
            c.execute("SELECT hybrid.create_tenant(%s)", (name,))
    pool = [Client(i, names[i % tenants], random.Random(seed * 7919 + i)) for i in range(clients)]
    stop_at = time.monotonic() + seconds
    elapsed = run_threads([threading.Thread(target=_run_client, args=(cl, app_dsn, stop_at, max_ops)) for cl in pool],
                          timeout=seconds + 120)
    expected = {name: sum(len(ids) for cl in pool if cl.tenant == name for ids in cl.docs.values())
                for name in names}
    actual = live_chunks(admin_dsn)
    with psycopg.connect(admin_dsn) as c:  # a superuser sees every tenant's rows
        expected_ids = {cid for cl in pool for ids in cl.docs.values() for cid in ids}
        live_ids = {r[0] for r in c.execute("SELECT chunk_id FROM hybrid.chunk WHERE corpus_id = 'load' "
                                            "AND NOT superseded").fetchall()}
    merged: dict[str, list[float]] = {}
    for cl in pool:
        for op, values in cl.latencies.items():
            merged.setdefault(op, []).extend(values)
    ops = sum(len(v) for v in merged.values())
    return {
        "clients": clients, "seconds": round(elapsed, 2), "tenants": tenants,
        "operations": ops, "throughput_ops_per_s": round(ops / elapsed, 1) if elapsed else 0.0,
        "retries": sum(cl.retries for cl in pool), "errors": [e for cl in pool for e in cl.errors],
        "expected_live_chunks": expected, "actual_live_chunks": {k: int(actual.get(k, 0)) for k in names},
        "missing_chunks": len(expected_ids - live_ids), "unexpected_chunks": len(live_ids - expected_ids),
        "latency_ms": {op: {"n": len(v), "p50": round(statistics.median(v), 2),
                            "p99": round(float(np.percentile(v, 99)), 2)} for op, v in sorted(merged.items())},
    }


def live_chunks(admin_dsn: str) -> dict[str, int]:
    """Each tenant's live chunks of the load's corpus (a superuser sees every tenant's rows)."""
    with psycopg.connect(admin_dsn) as c:
        return dict(c.execute("SELECT tenant_id, count(*) FILTER (WHERE NOT superseded) FROM hybrid.chunk "
                              "WHERE corpus_id = 'load' GROUP BY 1").fetchall())


def run_threads(threads: list[threading.Thread], timeout: float | None = None) -> float:
    """Start the threads, join them; the seconds it took."""
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=timeout)
    return time.monotonic() - t0


WORDS = ["pump", "valve", "alarm", "sensor", "battery", "occlusion", "flow", "label", "audit", "risk", "keypad",
         "pressure", "infusion", "brake", "controller", "latency", "protocol", "deviation", "requirement", "test"]


def load_corpus(admin: str, app: str, chunks: int, tenants: int, seed: int) -> None:
    """--replicas: a synthetic corpus of chunks // tenants chunks a tenant."""
    rng = np.random.default_rng(seed)
    words = random.Random(seed)
    with psycopg.connect(admin, autocommit=True) as c:
        for t in range(tenants):
            c.execute("SELECT hybrid.create_tenant(%s)", (f"t{t}",))
    per = chunks // tenants
    with HybridClient(app) as client:
        for t in range(tenants):
            for start in range(0, per, 2000):
                n = min(2000, per - start)
                vecs = unit_vectors(rng, n)
                batch = [Chunk(chunk_id=f"t{t}-{start + i}", document_id=f"t{t}-d{(start + i) // 4}",
                               position=(start + i) % 4, embedding=vecs[i],
                               content=" ".join(words.choice(WORDS) for _ in range(40))) for i in range(n)]
                with client.tenant(f"t{t}") as s:
                    s.ingest(batch)


def readers(primary: str, replicas: list[str], n: int, seconds: float, tenants: int, seed: int) -> dict[str, Any]:
    """n reader threads for seconds through HybridClient(primary, replicas=...) as read_only sessions."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run(i: int) -> None:
        rng = np.random.default_rng(seed + i)
        words = random.Random(seed + i)
        mine: list[float] = []
        with HybridClient(primary, replicas=replicas) as client:
            while time.monotonic() < stop_at:
                q = unit_vectors(rng, 1)[0]
                t0 = time.perf_counter()
                with client.tenant(f"t{words.randrange(tenants)}", read_only=True) as s:
                    s.retrieve(query_embedding=q, query_text=" ".join(words.choice(WORDS) for _ in range(3)),
                               top_k=10, lexical="ts_rank")
                mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            latencies.extend(mine)

    elapsed = run_threads([threading.Thread(target=run, args=(i,)) for i in range(n)])
    return {"replicas": len(replicas), "readers": n, "seconds": round(elapsed, 2), "queries": len(latencies),
            "qps": round(len(latencies) / elapsed, 1), "p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(float(np.percentile(latencies, 99)), 2)}


def scratch_server(top: Path, role: str) -> tuple[str, str]:
    """An embedded server in top/primary/pgdata with the engine installed and an app role; (admin, app) DSNs."""
    data_dir = top / "primary" / "pgdata"
    data_dir.parent.mkdir(parents=True)
    root = start_embedded(data_dir)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{role}'")
    migrate.upgrade(root)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute("SELECT hybrid.grant_app(%s)", (role,))
    return root, conninfo.make_conninfo(root, user=role, password=role)


def restart_check(data_dir: Path, app: str, report: dict[str, Any]) -> dict[str, Any]:
    """--restart: a clean stop and start (which heals every BM25 index), then each tenant's live chunks against
    what its clients wrote, and its first retrieve: time and rows that the BM25 branch ranked."""
    stop_embedded(data_dir)
    t0 = time.perf_counter()
    root = start_embedded(data_dir)
    out: dict[str, Any] = {"start_with_bm25_heal_s": round(time.perf_counter() - t0, 2), "tenants": {}}
    live = live_chunks(root)
    with HybridClient(app) as hc:
        for tenant, expected in report["expected_live_chunks"].items():
            t1 = time.perf_counter()
            with hc.tenant(tenant) as t:
                refs = t.retrieve(query_embedding=unit_vectors(np.random.default_rng(1), 1)[0], query_text="pump alarm",
                                  top_k=10)
            out["tenants"][tenant] = {"live_chunks": int(live.get(tenant, 0)), "expected": expected,
                                      "first_retrieve_ms": round((time.perf_counter() - t1) * 1000, 2),
                                      "rows_ranked_by_bm25": sum(r.keyword_rank is not None for r in refs)}
    out["intact"] = all(v["live_chunks"] == v["expected"] for v in out["tenants"].values())
    return out


def replica_runs(root: str, app: str, data_dir: Path, args: argparse.Namespace, standbys: list[Path]) -> dict[str, Any]:
    """Readers against 0, 1, 2, ... standbys (--replicas), each caught up with the primary before it is measured."""
    load_corpus(root, app, args.chunks, args.tenants, args.seed)
    with psycopg.connect(root, autocommit=True) as c:
        c.execute("VACUUM ANALYZE hybrid.chunk")
        c.execute("CHECKPOINT")
    replica_dsns: list[str] = []
    results = []
    for n in sorted(args.replicas):
        while len(replica_dsns) < n:
            sdir = Path(tempfile.mkdtemp(prefix="pyhybrid-replica-"))
            standbys.append(sdir)
            replica_dsns.append(conninfo.make_conninfo(start_embedded_standby(data_dir, sdir),
                                                       user="load_app", password="load_app"))
        with psycopg.connect(root) as c:
            lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        for dsn in replica_dsns:
            with psycopg.connect(dsn) as c:
                while not c.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:  # type: ignore[index]
                    time.sleep(0.1)
        results.append(readers(app, replica_dsns, args.readers, args.seconds, args.tenants, args.seed))
        print(json.dumps(results[-1]), flush=True)
    base = results[0]["qps"]
    return {"chunks": args.chunks, "tenants": args.tenants, "readers": args.readers, "runs": results,
            "qps_ratio_to_primary_only": [round(r["qps"] / base, 2) for r in results]}


# ---- --ingest-docs: a folder of documents through `pyhybrid ingest`, beside the embedder alone ----

def build_folder(folder: Path, n: int, seed: int) -> dict[str, int]:
    """n documents of 1-20 KB: the project's docs pages (.md, split at headings), then its demo data and the
    shared collections' document texts (read from ../shared/datasets, never copied) as .md, .rst and .txt."""
    rng, root, j = random.Random(seed), Path(__file__).resolve().parent.parent, 0
    count = {"docs_pages": 0, "composed": 0, "bytes": 0}
    pages = [p for f in sorted([root / "README.md", *(root / "docs").glob("*.md")])
             for p in re.split(r"\n(?=## )", f.read_text(encoding="utf-8")) if len(p) > 1000]
    pool = [(r["metadata"].get("title") or r["chunk_id"], r["content"])
            for f in sorted((root / "pyhybrid" / "demo_data").glob("*_chunks.jsonl"))
            for r in map(json.loads, f.read_text(encoding="utf-8").splitlines())]
    for f in sorted((root.parent / "shared" / "datasets").glob("*/corpus.jsonl")):
        pool += [(o.get("title") or o["_id"], o.get("text") or "") for o in map(json.loads, f.open(encoding="utf-8"))]
    rng.shuffle(pool)
    heads = {".md": lambda t: f"# {t}\n\n", ".rst": lambda t: f"{t}\n{'=' * len(t)}\n\n",
             ".txt": lambda t: f"{t}\n\n"}
    folder.mkdir(parents=True)
    for i in range(n):
        suffix, key, text = (".md", "docs_pages", pages[i]) if i < len(pages) else (list(heads)[i % 3], "composed", "")
        target = int(1000 * 20 ** rng.random())
        while key == "composed" and len(text) < target:
            title, body = pool[j % len(pool)]
            text, j = text + heads[suffix](" ".join(title.split())[:120]) + body.strip() + "\n\n", j + 1
        (folder / f"doc{i:04d}{suffix}").write_text(text[:20000], encoding="utf-8")
        count[key], count["bytes"] = count[key] + 1, count["bytes"] + len(text[:20000].encode())
    return count


@contextlib.contextmanager
def stage_timer(stages: dict[str, float]) -> Iterator[None]:
    """Seconds in each stage of `pyhybrid ingest`, added up by wrapping the functions that do them (any thread)."""
    from pyhybrid import chunking, client, embed
    lock, s = threading.Lock(), client.TenantSession
    saved = [(o, a, getattr(o, a), k) for o, a, k in [
        (chunking, "scan_source", "read_parse_chunk"), (embed.MiniLMEmbedder, "__call__", "embed"),
        (s, "unchanged_documents", "unchanged_documents"), (s, "ingest", "copy_finish_ingest")]]

    def wrap(fn: Any, key: str) -> Any:
        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                with lock:
                    stages[key] = round(stages.get(key, 0.0) + time.perf_counter() - t0, 3)
        return timed
    for o, a, fn, k in saved:
        setattr(o, a, wrap(fn, k))
    try:
        yield
    finally:
        for o, a, fn, _ in saved:
            setattr(o, a, fn)


def ingest_round(folder: Path, data_dir: Path, tenant: str) -> dict[str, Any]:
    """One `pyhybrid ingest FOLDER --tenant T` in this process, as typed (progress bar on; its output kept)."""
    from pyhybrid import cli
    out, err, stages = io.StringIO(), io.StringIO(), {}
    with stage_timer(stages), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        t0 = time.perf_counter()
        code = cli.main(["ingest", str(folder), "--data-dir", str(data_dir), "--tenant", tenant])
        wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"pyhybrid ingest exited {code}: {err.getvalue()[-2000:]}")
    totals = json.loads(out.getvalue().strip().splitlines()[-1])
    return {"wall_s": round(wall, 2), "chunks": totals["inserted"], "chunks_per_s": round(totals["inserted"] / wall, 2),
            "stages_s": stages, "not_embedding_s": round(wall - stages.get("embed", 0.0), 2), "totals": totals}


def embed_batches(emb: Any, texts: list[str], batch: int, budget: int | None, bucket: bool) -> float:
    """Passages/s of emb on texts in batches of at most batch rows (and budget padded tokens), longest first when
    bucket, else in the texts' order; each batch padded to its longest."""
    t0, ids, start = time.perf_counter(), [e.ids for e in emb._tokenizer.encode_batch(texts)], 0
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i])) if bucket else list(range(len(ids)))
    while start < len(order):
        size = max(1, min(batch, budget // max(len(ids[i]) for i in order[start:start + batch]))) if budget else batch
        rows, start = order[start:start + size], start + size
        emb._embed_batch([ids[i] for i in rows], max(len(ids[i]) for i in rows))
    return round(len(texts) / (time.perf_counter() - t0), 2)


def embedder_sweep(texts: list[str], rounds: int, seed: int) -> list[dict[str, Any]]:
    """The embedder's settings (first row; threads 0: one per core), then one change at a time, each an onnxruntime
    session on the same passages, in a shuffled order each round; the median rate and ratio to the first row."""
    import onnxruntime as ort
    from pyhybrid import embed
    d = {"threads": 0, "inter": 1, "mode": "sequential", "level": "all", "batch": 32,
         "budget": embed._BATCH_TOKEN_BUDGET, "bucket": True}
    alt = [{"threads": 1}, {"threads": 2}, {"bucket": False}, {"mode": "parallel"}, {"mode": "parallel", "inter": 2},
           {"level": "basic"}, {"level": "extended"},
           *({"budget": b} for b in (128, 256, 512, 1024, 2048, 4096) if b != d["budget"]),
           *({"budget": None, "batch": b} for b in (8, 16, 32, 64, 128))]
    configs, emb, opt = [d] + [{**d, **a} for a in alt], embed.MiniLMEmbedder(), ort.GraphOptimizationLevel
    rates: list[list[float]] = [[] for _ in configs]
    for r in range(rounds):
        for i in random.Random(seed + r).sample(range(len(configs)), len(configs)):
            c, o = configs[i], ort.SessionOptions()
            o.intra_op_num_threads, o.inter_op_num_threads, o.log_severity_level = c["threads"], c["inter"], 3
            o.execution_mode = ort.ExecutionMode.ORT_PARALLEL if c["mode"] == "parallel" else ort.ExecutionMode.ORT_SEQUENTIAL
            o.graph_optimization_level = {"basic": opt.ORT_ENABLE_BASIC,
                                          "extended": opt.ORT_ENABLE_EXTENDED}.get(c["level"], opt.ORT_ENABLE_ALL)
            o.add_session_config_entry("session.intra_op.allow_spinning", "0")
            emb._session = ort.InferenceSession(str(embed._model_files()[0]), o, providers=["CPUExecutionProvider"])
            rates[i].append(embed_batches(emb, texts, c["batch"], c["budget"], c["bucket"]))
        print(f"sweep round {r}: " + " ".join(str(x[-1]) for x in rates), flush=True)
    return [{**c, "passages_per_s": statistics.median(x), "runs": x,
             "ratio_to_default": statistics.median(a / b for a, b in zip(x, rates[0]))} for c, x in zip(configs, rates)]


def ingest_docs(args: argparse.Namespace, top: Path) -> dict[str, Any]:
    """--ingest-docs N: build the folder, then --rounds of (control, the embedder alone on every chunk, `pyhybrid
    ingest` of the folder into a new tenant), interleaved; --embedder-sweep adds onnxruntime's settings."""
    from pyhybrid.chunking import scan_source
    from pyhybrid.embed import MiniLMEmbedder, default_embedder
    made, emb = build_folder(top / "docs", args.ingest_docs, args.seed), default_embedder()
    texts, t0 = [r["content"] for r in scan_source(top / "docs").records], time.perf_counter()
    tokens, t1 = [len(e.ids) for e in emb._tokenizer.encode_batch(texts)], time.perf_counter()
    MiniLMEmbedder()  # a model load, as each CLI run pays it (the rounds reuse one)
    (top / "warmup").mkdir()
    (top / "warmup" / "a.md").write_text("# Warm-up\n\nStarts and migrates the server.", encoding="utf-8")
    report: dict[str, Any] = {"folder": made, "chunks": len(texts), "tokenize_all_s": round(t1 - t0, 2),
                              "model_load_s": round(time.perf_counter() - t1, 2), "rounds": []}
    ingest_round(top / "warmup", top / "pgdata", "warmup")
    for r in range(args.rounds):
        ctl, t0 = control_ms(), time.perf_counter()
        emb(texts)
        rate = round(len(texts) / (time.perf_counter() - t0), 2)
        ing = ingest_round(top / "docs", top / "pgdata", f"round{r}")
        report["rounds"].append({"control_ms": ctl, "embedder_passages_per_s": rate, "ingest": ing,
                                 "ratio": round(ing["chunks_per_s"] / rate, 3)})
        print(json.dumps(report["rounds"][-1]), flush=True)
    # FLOPs: 6 layers x (Q, K, V, out: 4 x 384^2 + FFN: 2 x 384 x 1536 MACs a token + QK^T, AV: 2 x L^2 x 384 MACs)
    mean = statistics.fmean(tokens)
    flop = 2 * 6 * ((4 * 384 * 384 + 2 * 384 * 1536) * mean + 2 * 384 * statistics.fmean(t * t for t in tokens))
    report.update({"tokens_per_chunk": {"mean": round(mean, 1), "max": max(tokens)}, "gflop_per_passage": round(flop / 1e9, 3),
                   "median_ratio": statistics.median(r["ratio"] for r in report["rounds"])})
    if args.embedder_sweep:
        sample = texts[::max(1, len(texts) // args.sweep_passages)][:args.sweep_passages]
        report["sweep"] = {"passages": len(sample), "rounds": args.rounds,
                           "configs": embedder_sweep(sample, args.rounds, args.seed)}
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=16, help="mixed load: concurrent clients")
    ap.add_argument("--seconds", type=float, default=60.0, help="mixed load, or each replica count's read phase")
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--restart", action="store_true", help="mixed load: then a clean restart, checked (a fault)")
    ap.add_argument("--replicas", type=int, nargs="+", default=None, help="read throughput with these standby counts")
    ap.add_argument("--chunks", type=int, default=20000, help="--replicas: corpus size")
    ap.add_argument("--readers", type=int, default=8, help="--replicas: reader threads")
    ap.add_argument("--ingest-docs", type=int, default=None, metavar="N",
                    help="a folder of N documents through `pyhybrid ingest`, beside the embedder alone")
    ap.add_argument("--rounds", type=int, default=3, help="--ingest-docs: interleaved rounds")
    ap.add_argument("--embedder-sweep", action="store_true", help="--ingest-docs: also sweep onnxruntime settings")
    ap.add_argument("--sweep-passages", type=int, default=64, help="--embedder-sweep: passages, spread over the folder")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=None, help="default bench/results/load.json (replicas.json)")
    args = ap.parse_args()
    kind = "ingest" if args.ingest_docs else "replicas" if args.replicas else "load"
    meta = start_meta(kind, script="load")
    top = Path(tempfile.mkdtemp(prefix="pyhybrid-load-"))
    standbys: list[Path] = []
    try:
        if args.ingest_docs:
            report = ingest_docs(args, top)
        elif args.replicas:
            report = replica_runs(*scratch_server(top, "load_app"), top / "primary" / "pgdata", args, standbys)
        else:
            root, app = scratch_server(top, "load_app")
            report = run_load(root, app, clients=args.clients, seconds=args.seconds, tenants=args.tenants)
            if args.restart:
                report["restart"] = restart_check(top / "primary" / "pgdata", app, report)
    finally:
        for sdir in standbys:
            stop_embedded(sdir / "data")
        stop_embedded(top / "primary" / "pgdata")
        stop_embedded(top / "pgdata")  # --ingest-docs
        for path in (top, *standbys):
            shutil.rmtree(path, ignore_errors=True)
    write_result(args.out or Path(f"bench/results/{kind}.json"), meta, report)
    print(json.dumps(report, indent=2))
    ok = args.replicas or args.ingest_docs or (
        not report["errors"] and report["expected_live_chunks"] == report["actual_live_chunks"]
                           and report["missing_chunks"] == 0 and report["unexpected_chunks"] == 0
                           and report.get("restart", {}).get("intact", True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
