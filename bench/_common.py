"""Shared setup of the benchmark suite: datasets, metrics, percentiles, servers, the engine and machine, result files.

A dataset folder has the layout of ../shared/datasets/*: corpus.jsonl, corpus.ids.txt, corpus.minilm.f16.npy,
queries.jsonl, queries.ids.txt, queries.minilm.f16.npy, qrels.tsv. Every entry point writes one JSON file whose
"meta" block (write_result) says what produced it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import psutil
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
try:
    import pyhybrid  # noqa: F401
except ImportError:  # run from a checkout without an installed pyhybrid
    sys.path.insert(0, str(ROOT))


@dataclass
class Dataset:
    """One retrieval collection: docs and queries in file order, their embeddings, graded qrels."""

    name: str
    path: Path
    doc_ids: list[str]            # row i of doc_emb
    doc_text: dict[str, str]      # title + " " + text (the string the embeddings were computed on)
    doc_emb: np.ndarray           # (n_docs, dim) float16
    query_ids: list[str]          # row i of query_emb
    query_text: dict[str, str]
    query_emb: np.ndarray         # (n_queries, dim) float16
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade}

    def judged_query_ids(self) -> list[str]:
        """Queries that have text, an embedding and at least one relevant judgment, in file order."""
        return [q for q in self.query_ids if q in self.query_text and any(g > 0 for g in self.qrels.get(q, {}).values())]

    def query_vector(self, qid: str) -> np.ndarray:
        return self._qrow[qid]

    def __post_init__(self) -> None:
        self._qrow = {q: self.query_emb[i] for i, q in enumerate(self.query_ids)}


def _ids_and_embeddings(p: Path, what: str) -> tuple[list[str], np.ndarray]:
    """<what>.ids.txt and <what>.minilm.f16.npy, checked to line up."""
    ids = [line.strip() for line in (p / f"{what}.ids.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    emb = np.load(p / f"{what}.minilm.f16.npy")
    if emb.shape[0] != len(ids):
        raise ValueError(f"{p}: {what}.ids.txt has {len(ids)} ids but the embeddings have {emb.shape[0]} rows")
    return ids, emb


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset folder; checks that ids and embedding rows line up."""
    p = Path(path).expanduser().resolve()
    doc_ids, doc_emb = _ids_and_embeddings(p, "corpus")
    query_ids, query_emb = _ids_and_embeddings(p, "queries")
    doc_text: dict[str, str] = {}
    for o in read_jsonl(p / "corpus.jsonl"):
        doc_text.setdefault(str(o["_id"]), (o.get("title") or "") + " " + (o.get("text") or ""))
    missing = [d for d in doc_ids if d not in doc_text]
    if missing:
        raise ValueError(f"{p}: {len(missing)} ids of corpus.ids.txt are not in corpus.jsonl, e.g. {missing[:3]}")
    query_text = {str(o["_id"]): o.get("text") or "" for o in read_jsonl(p / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with open(p / "qrels.tsv", encoding="utf-8") as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (i == 0 and not parts[2].strip().lstrip("-").isdigit()):
                continue  # header or blank
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return Dataset(p.name, p, doc_ids, doc_text, doc_emb, query_ids, query_text, query_emb, qrels)


# ---- metrics (graded qrels; a doc is relevant when its grade is > 0) ----

def _first_seen(ranked: Sequence[str], k: int) -> list[str | None]:
    """The top k as returned, a repeated id replaced by None: it keeps its rank slot but earns nothing twice."""
    seen: set[str] = set()
    out: list[str | None] = []
    for d in ranked[:k]:
        out.append(None if d in seen else d)
        seen.add(d)
    return out


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with gain 2^rel - 1 and log2 discount; the ideal DCG uses every judged doc of the query."""
    dcg = sum((2 ** judged.get(d, 0) - 1) / math.log2(i + 2)
              for i, d in enumerate(_first_seen(ranked, k)) if d is not None and judged.get(d, 0) > 0)
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 100) -> float:
    rel = {d for d, g in judged.items() if g > 0}
    return len(rel.intersection(ranked[:k])) / len(rel) if rel else 0.0


def mrr_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):  # the first relevant id; a repeat can never come first
        if judged.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
             query_ids: Iterable[str]) -> dict[str, float | int]:
    """Mean nDCG@10, recall@100 and MRR@10 over query_ids (a query missing from run scores 0)."""
    qs = list(query_ids)
    n = len(qs)
    tot = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for q in qs:
        ranked = run.get(q, [])
        judged = qrels.get(q, {})
        tot["ndcg@10"] += ndcg_at_k(ranked, judged, 10)
        tot["recall@100"] += recall_at_k(ranked, judged, 100)
        tot["mrr@10"] += mrr_at_k(ranked, judged, 10)
    return {**{m: (v / n if n else 0.0) for m, v in tot.items()}, "queries": n}


def exact_cosine_run(ds: Dataset, query_ids: Sequence[str], k: int = 100) -> dict[str, list[str]]:
    """Exact cosine top-k over the dataset's own f16 embeddings (ties broken by doc id, like the engine)."""
    docs = ds.doc_emb.astype(np.float32)
    docs /= np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
    ids = np.array(ds.doc_ids, dtype=object)
    run: dict[str, list[str]] = {}
    for q in query_ids:
        v = ds.query_vector(q).astype(np.float32)
        v /= max(float(np.linalg.norm(v)), 1e-12)
        sims = docs @ v
        if len(sims) > k:
            thr = np.partition(sims, len(sims) - k)[len(sims) - k]  # the k-th largest similarity
            cand = np.nonzero(sims >= thr)[0]
        else:
            cand = np.arange(len(sims))
        order = sorted(cand, key=lambda i: (-float(sims[i]), ids[i]))[:k]
        run[q] = [ids[i] for i in order]
    return run


def machine_info() -> dict[str, object]:
    """Cores, CPU model, memory (GiB), Python and OS of this machine, and the date (UTC)."""
    try:
        cpus = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")]
    except OSError:
        cpus = []
    return {"nproc": os.cpu_count(), "cpu_model": cpus[0] if cpus else platform.processor(),
            "mem_gb": round(psutil.virtual_memory().total / 1024**3, 1), "python": platform.python_version(),
            "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def pct(xs: Sequence[float], p: float) -> float:
    """The p-th percentile, linear between the closest ranks (nan for no values)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(ms: Sequence[float], rows: Sequence[int] = ()) -> dict[str, float]:
    """n, p50 / p95 / p99 / mean of milliseconds, and (given rows) the mean and least rows returned."""
    return {"n": len(ms), "p50_ms": round(pct(ms, 50), 3), "p95_ms": round(pct(ms, 95), 3),
            "p99_ms": round(pct(ms, 99), 3), "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan"),
            **({"rows_mean": round(statistics.fmean(rows), 2), "rows_min": min(rows)} if rows else {})}


def vector_literal(v: Any) -> str:
    """pgvector's text form of a vector, for the statements a benchmark sends itself."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"


def unit_vectors(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def server_processes(data_dir: Path) -> list[psutil.Process]:
    """The postmaster of the embedded server in data_dir and its children."""
    pm = psutil.Process(int((data_dir / "postmaster.pid").read_text().split()[0]))
    return [pm, *pm.children(recursive=True)]


def ensure_role(conn: psycopg.Connection[Any], role: str) -> None:
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))


def fresh_database(admin_dsn: str, db: str, role: str | None = None, owned: bool = False) -> None:
    """Drop and create database db; with role, that login role too (made if missing, the database's owner if owned)."""
    drop_databases(admin_dsn, [db])
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if role is not None:
            ensure_role(conn, role)
        owner = sql.SQL(" OWNER {}").format(sql.Identifier(role)) if owned and role else sql.SQL("")
        conn.execute(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(db), owner))


def drop_databases(admin_dsn: str, dbs: Iterable[str]) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for db in dbs:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))


def installed_versions(dsn: str) -> dict[str, str]:
    """The server's version and the extensions installed in the database of dsn."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall()
        pg = conn.execute("SHOW server_version").fetchone()
    return {"postgresql": pg[0] if pg else "", **dict(rows)}


def engine_state() -> dict[str, Any]:
    """The engine imported (PYTHONPATH may name another checkout): version, git HEAD, local changes, digest."""
    import pyhybrid as engine

    root = Path(engine.__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted([*root.glob("sql/**/*.sql"), *root.glob("pyhybrid/**/*.py")]):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"version": getattr(engine, "__version__", None), "engine_root": str(root),
            "git_head": git("rev-parse", "--short", "HEAD"), "git_head_subject": git("log", "-1", "--format=%s"),
            "local_changes_in_sql_or_pyhybrid": git("status", "--porcelain", "--", "sql", "pyhybrid").splitlines(),
            "sql_and_pyhybrid_sha256": h.hexdigest()[:16]}


def cpu_seconds() -> tuple[float, float]:
    """All cores' CPU seconds so far, from /proc/stat: (total, idle + iowait); busy = total - idle."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return sum(v) / tick, (v[3] + v[4]) / tick


def control_ms() -> float:
    """Machine-speed control: a fixed float32 matmul workload, in ms (higher: a slower or busier machine)."""
    a, t0 = np.random.default_rng(0).standard_normal((384, 1536)).astype(np.float32), time.perf_counter()
    for _ in range(40):
        a @ a.T
    return round((time.perf_counter() - t0) * 1000, 1)


def start_meta(benchmark: str, argv: Sequence[str] | None = None, script: str | None = None) -> dict[str, Any]:
    """What a result file says about its run: the benchmark, the exact command, engine, machine, date."""
    env = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    args = list(sys.argv[1:] if argv is None else argv)
    machine = machine_info()
    return {"benchmark": benchmark, "command": env + "python " + " ".join([f"bench/{script or benchmark}.py", *args]),
            "engine": engine_state(), "machine": machine, "date": machine["date"],
            "loadavg_start": [round(x, 2) for x in os.getloadavg()], "control_ms_start": control_ms(),
            "_t0": time.perf_counter()}


def write_result(path: Path, meta: dict[str, Any], payload: dict[str, Any]) -> None:
    """Write payload with its meta block (wall time and load average at the end added) as JSON."""
    m = {k: v for k, v in meta.items() if k != "_t0"}
    m["wall_s"] = round(time.perf_counter() - meta["_t0"], 1)
    m["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    m["control_ms_end"] = control_ms()  # the same workload as control_ms_start: how the machine's speed moved
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": m, **payload}, indent=1) + "\n", encoding="utf-8")
