"""Latency, ingest and recall benchmark of pyhybrid on synthetic multi-tenant corpora.

For each corpus size: a fresh database on the embedded server, 100 tenants of Zipf-skewed
sizes (one owns ~50% of the rows, one ~1%), 384-d clustered vectors, Zipf text over
pseudo-words and ~3 graph edges per chunk, all loaded through the ingestion API
(TenantSession.ingest / add_edges) as a non-superuser application role. Then, for the 1%
and the 50% tenant, as that role under RLS:

  (a) each branch alone: hybrid.search_dense, hybrid.search_lexical (bm25), hybrid.search_graph
  (b) hybrid_retrieve with all three (TenantSession.retrieve)
  (c) the three branch calls issued separately, fused client-side (pyhybrid.fusion.rrf_scores),
      then the top rows hydrated: what most applications do today
  (d) the pgvector-python RRF CTE (HNSW dense + ts_rank, FULL OUTER JOIN, 1/(60+rank))

and dense recall@10 of hybrid.search_dense against exact numpy search over the tenant's
vectors (and, for reference, of a plain ORDER BY embedding <=> q LIMIT 10 under RLS).

    python bench/latency.py --sizes 10000 100000 --queries 200 --out bench/results/latency.json

Sizes >= --bulk-above N are loaded inside HybridClient(admin).bulk_load() (HNSW dropped during the load,
rebuilt by hybrid.resume_vector_index() on exit): the load rate, the rebuild time and the total are recorded
separately, and the HNSW REINDEX at the end is skipped for them (the rebuild is that build).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import psutil
import psycopg
from psycopg import sql
from tqdm import tqdm

try:
    import pyhybrid  # noqa: F401
except ImportError:  # run from a checkout without an installed pyhybrid
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhybrid import Chunk, Edge, HybridWeights, connect, migrate
from pyhybrid.fusion import rrf_scores
from pyhybrid.server import start_embedded, stop_embedded


def vector_literal(v: Any) -> str:
    """pgvector's text form of a vector, for the statements this benchmark sends itself."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"

DIM = 384
N_CLUSTERS = 200
SUBSPACE = 16
VOCAB = 30000
TOPIC_WORDS = 300
N_TENANTS = 100  # --tenants
PICKS = [0.5, 0.01]  # --picks: the row shares whose nearest tenants are measured
APP_ROLE = "bench_app"
PER_SOURCE_K = 30
TOP_K = 10
WEIGHTS = HybridWeights(1.0, 1.0, 0.5)
RRF_K = 60.0

# Server settings for a 2-core / 24 GB machine; everything else stays at PostgreSQL's defaults.
SERVER_SETTINGS = {
    "shared_buffers": "2GB",
    "effective_cache_size": "8GB",
    "maintenance_work_mem": "1GB",
    "max_wal_size": "4GB",
}

METHODS = ["dense", "lexical_bm25", "graph", "hybrid_retrieve", "client_fusion", "pgvector_rrf_cte"]
METHOD_LABELS = {
    "dense": "(a) search_dense alone",
    "lexical_bm25": "(a) search_lexical bm25 alone",
    "graph": "(a) search_graph alone",
    "branch_sum": "(a) sum of the three (per query)",
    "hybrid_retrieve": "(b) hybrid_retrieve",
    "client_fusion": "(c) 3 calls + client RRF + hydrate",
    "pgvector_rrf_cte": "(d) pgvector-python RRF CTE",
}


# ----------------------------------------------------------------------------- data


def pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    """n distinct pronounceable pseudo-words (deterministic for a given rng)."""
    onsets = ["b", "br", "c", "ch", "cl", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n",
              "p", "pl", "pr", "qu", "r", "s", "sh", "sl", "st", "t", "th", "tr", "v", "w", "z"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
    codas = ["", "", "", "n", "r", "l", "s", "t", "m", "nd", "rt", "st", "x", "ck"]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        syl = int(rng.choice([1, 2, 2, 3, 3, 3, 4]))
        w = "".join(onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))] for _ in range(syl))
        w += codas[rng.integers(len(codas))]
        if 3 <= len(w) <= 12 and w not in seen:
            seen.add(w)
            words.append(w)
    return words


def zipf_cdf(n: int, s: float = 1.0, q: float = 2.7) -> np.ndarray:
    """CDF of a Zipf-Mandelbrot law over ranks 1..n."""
    p = 1.0 / (np.arange(1, n + 1) + q) ** s
    c = np.cumsum(p)
    return c / c[-1]


def tenant_sizes(total: int, n_tenants: int | None = None) -> list[int]:
    """One tenant owns half the rows; the rest follow 1/rank (with 100 tenants the 10th of them holds ~1%)."""
    n_tenants = N_TENANTS if n_tenants is None else n_tenants
    shares = np.array([0.5] + list(0.5 * (1.0 / np.arange(1, n_tenants)) / np.sum(1.0 / np.arange(1, n_tenants))))
    raw = shares * total
    sizes = np.maximum(1, np.floor(raw)).astype(int)
    rest = total - sizes.sum()
    order = np.argsort(-(raw - np.floor(raw)))
    for i in order[: max(0, rest)]:
        sizes[i] += 1
    return sizes.tolist()


def tenant_name(i: int) -> str:
    """t000, t001, ... (wider when there are more than 1,000 tenants)."""
    return f"t{i:0{max(3, len(str(N_TENANTS - 1)))}d}"


def pick_label(share: float) -> str:
    """0.5 -> "50pct", 0.01 -> "1pct", 0.001 -> "0.1pct"."""
    return f"{share * 100:g}pct"


def choose_picks(sizes: list[int], pick_shares: list[float] | None = None,
                 by_size: bool = True) -> list[tuple[str, int]]:
    """(label, tenant index) of the tenant whose row share is nearest each of pick_shares (a tenant is
    picked once; shares taken in the given order). by_size: listed by ascending tenant size, the order of
    measurement (the default measures the ~1% tenant, then the 50% one); else in the given order."""
    pick_shares = PICKS if pick_shares is None else pick_shares
    total = sum(sizes)
    shares = [n / total for n in sizes]
    taken: list[tuple[str, int]] = []
    for p in pick_shares:
        used = {i for _, i in taken}
        i = int(np.argmin([abs(s - p) if i not in used else 9 for i, s in enumerate(shares)]))
        taken.append((pick_label(p), i))
    return sorted(taken, key=lambda li: (sizes[li[1]], li[0])) if by_size else taken


@dataclass
class World:
    """The generative model shared by corpus and queries."""

    seed: int
    centres: np.ndarray = field(init=False)
    bases: np.ndarray = field(init=False)
    vocab: np.ndarray = field(init=False)
    global_cdf: np.ndarray = field(init=False)
    topics: np.ndarray = field(init=False)
    topic_cdf: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        c = rng.standard_normal((N_CLUSTERS, DIM)).astype(np.float32)
        self.centres = c / np.linalg.norm(c, axis=1, keepdims=True)
        # each topic varies mostly inside its own 16-d subspace: a low intrinsic dimension, as real embeddings
        b = rng.standard_normal((N_CLUSTERS, DIM, SUBSPACE)).astype(np.float32)
        self.bases, _ = np.linalg.qr(b)
        self.vocab = np.array(pseudo_words(VOCAB, rng), dtype=object)
        self.global_cdf = zipf_cdf(VOCAB, 1.0, 2.7)
        # topic words: drawn from the mid and low frequency ranks
        self.topics = np.stack([rng.choice(np.arange(150, VOCAB), TOPIC_WORDS, replace=False) for _ in range(N_CLUSTERS)])
        self.topic_cdf = zipf_cdf(TOPIC_WORDS, 0.9, 1.0)

    def vectors(self, clusters: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(clusters)
        z = rng.standard_normal((n, SUBSPACE)).astype(np.float32) / math.sqrt(SUBSPACE)
        # in blocks of rows: self.bases[clusters] is n x 384 x 16 floats (12 GB for a 500k-chunk tenant); the
        # same draws and the same per-row arithmetic, so the same vectors as in one piece
        local = np.empty((n, DIM), dtype=np.float32)
        for lo in range(0, n, 20000):
            local[lo:lo + 20000] = np.einsum("ndk,nk->nd", self.bases[clusters[lo:lo + 20000]], z[lo:lo + 20000])
        iso = rng.standard_normal((n, DIM)).astype(np.float32) / math.sqrt(DIM)
        v = self.centres[clusters] + 0.8 * local + 0.3 * iso
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def words(self, clusters: np.ndarray, lengths: np.ndarray, topic_p: float, rng: np.random.Generator) -> list[str]:
        total = int(lengths.sum())
        owner = np.repeat(np.arange(len(lengths)), lengths)
        g = np.searchsorted(self.global_cdf, rng.random(total))
        t = self.topics[clusters[owner], np.searchsorted(self.topic_cdf, rng.random(total))]
        idx = np.where(rng.random(total) < topic_p, t, g)
        toks = self.vocab[idx]
        ends = np.cumsum(lengths)
        starts = ends - lengths
        return [" ".join(toks[s:e]) for s, e in zip(starts, ends)]


@dataclass
class TenantData:
    tenant_id: str
    chunk_ids: list[str]
    doc_ids: list[str]
    positions: np.ndarray
    clusters: np.ndarray
    vectors: np.ndarray
    texts: list[str]
    cluster_p: np.ndarray  # the tenant's topic mix, used to draw its queries


def make_tenant(world: World, tenant_id: str, n: int, rng: np.random.Generator) -> TenantData:
    # a tenant writes about a Zipf mix of topics (its own ranking of the 200 clusters)
    perm = rng.permutation(N_CLUSTERS)
    p = 1.0 / np.arange(1, N_CLUSTERS + 1) ** 0.8
    cluster_p = np.zeros(N_CLUSTERS)
    cluster_p[perm] = p / p.sum()
    doc_lens: list[int] = []
    left = n
    while left > 0:
        k = int(min(left, 1 + rng.geometric(0.2)))
        doc_lens.append(k)
        left -= k
    doc_cluster = rng.choice(N_CLUSTERS, size=len(doc_lens), p=cluster_p)
    lens = np.array(doc_lens)
    clusters = np.repeat(doc_cluster, lens)
    positions = np.concatenate([np.arange(k) for k in doc_lens])
    doc_index = np.repeat(np.arange(len(doc_lens)), lens)
    doc_ids = [f"{tenant_id}-doc{d:06d}" for d in doc_index]
    chunk_ids = [f"{tenant_id}-doc{d:06d}-{p:02d}" for d, p in zip(doc_index, positions)]
    vectors = world.vectors(clusters, rng)
    texts = world.words(clusters, rng.integers(60, 161, size=n), 0.3, rng)
    return TenantData(tenant_id, chunk_ids, doc_ids, positions, clusters, vectors, texts, cluster_p)


def make_edges(td: TenantData, rng: np.random.Generator) -> list[Edge]:
    """~3 edges per chunk: NEXT within a document, and RELATED to chunks of the same topic (same tenant)."""
    n = len(td.chunk_ids)
    edges: list[Edge] = []
    for i in range(1, n):
        if td.doc_ids[i] == td.doc_ids[i - 1]:
            edges.append(Edge(td.chunk_ids[i - 1], td.chunk_ids[i], "NEXT"))
    if n < 2:
        return edges
    by_cluster: dict[int, np.ndarray] = {}
    for c in np.unique(td.clusters):
        by_cluster[int(c)] = np.flatnonzero(td.clusters == c)
    n_related = 3 * n - len(edges)
    src = rng.integers(0, n, size=n_related)
    for s in src:
        pool = by_cluster[int(td.clusters[s])]
        d = int(pool[rng.integers(len(pool))]) if len(pool) > 1 and rng.random() < 0.8 else int(rng.integers(n))
        if d != s:
            edges.append(Edge(td.chunk_ids[s], td.chunk_ids[d], "RELATED"))
    return edges


@dataclass
class Query:
    vector: np.ndarray
    text: str
    seeds: list[str]


def make_queries(world: World, td: TenantData, n: int, rng: np.random.Generator) -> list[Query]:
    clusters = rng.choice(N_CLUSTERS, size=n, p=td.cluster_p)
    vecs = world.vectors(clusters, rng)
    out: list[Query] = []
    for i, c in enumerate(clusters):
        topic = world.topics[c, np.searchsorted(world.topic_cdf, rng.random(3))]
        extra = int(np.searchsorted(world.global_cdf, rng.uniform(world.global_cdf[50], world.global_cdf[5000])))
        words = list(world.vocab[topic]) + [str(world.vocab[extra])]
        rng.shuffle(words)
        k = min(3, len(td.chunk_ids))
        seeds = [td.chunk_ids[j] for j in rng.choice(len(td.chunk_ids), size=k, replace=False)]
        out.append(Query(vecs[i], " ".join(words), seeds))
    return out


# ----------------------------------------------------------------------------- server


def dsn_for(admin_dsn: str, db: str, user: str = "postgres") -> str:
    host = admin_dsn.split("host=", 1)[1]
    return f"postgresql://{user}:@/{db}?host={host}"


def configure_server(data_dir: Path, admin_dsn: str) -> str:
    """Apply SERVER_SETTINGS (ALTER SYSTEM) and restart the embedded server if one needs it."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name, value in SERVER_SETTINGS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.5)
        pending = conn.execute("SELECT count(*) FROM pg_settings WHERE pending_restart").fetchone()[0]
    if pending:
        stop_embedded(data_dir)
        # a fresh process: pgserver caches the server handle of this one and would not start it again
        code = "import sys; from pathlib import Path; from pyhybrid.server import start_embedded; print(start_embedded(Path(sys.argv[1])))"
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        admin_dsn = subprocess.run([sys.executable, "-c", code, str(data_dir)], check=True, capture_output=True,
                                   text=True, env=env).stdout.strip().splitlines()[-1]
    return admin_dsn


class MemorySampler:
    """Samples the summed RSS (and PSS) of the server's postgres processes in a thread."""

    def __init__(self, data_dir: Path, interval: float = 0.25) -> None:
        self.data_dir = data_dir
        self.interval = interval
        self.phase = "setup"
        self.peak_rss: dict[str, int] = {}
        self.peak_pss: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _postmaster(self) -> psutil.Process:
        pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        return psutil.Process(pid)

    def sample(self) -> tuple[int, int]:
        pm = self._postmaster()
        rss = pss = 0
        for p in [pm, *pm.children(recursive=True)]:
            try:
                mi = p.memory_full_info()
                rss += mi.rss
                pss += getattr(mi, "pss", mi.rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return rss, pss

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rss, pss = self.sample()
                ph = self.phase
                self.peak_rss[ph] = max(self.peak_rss.get(ph, 0), rss)
                self.peak_pss[ph] = max(self.peak_pss.get(ph, 0), pss)
            except Exception:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict[str, Any]:
        mb = 1024 * 1024
        return {
            "peak_rss_mb": round(max(self.peak_rss.values(), default=0) / mb, 1),
            "peak_pss_mb": round(max(self.peak_pss.values(), default=0) / mb, 1),
            "by_phase_rss_mb": {k: round(v / mb, 1) for k, v in self.peak_rss.items()},
            "by_phase_pss_mb": {k: round(v / mb, 1) for k, v in self.peak_pss.items()},
        }


def engine_state() -> dict[str, Any]:
    """Which engine was measured: git HEAD, local changes, and a digest of sql/ and pyhybrid/."""
    import hashlib

    import pyhybrid as _engine

    # the engine actually imported (PYTHONPATH may point at another checkout than this script's)
    root = Path(_engine.__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted([*root.glob("sql/**/*.sql"), *root.glob("pyhybrid/**/*.py")]):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"engine_root": str(root),
            "git_head": git("rev-parse", "--short", "HEAD"),
            "git_head_subject": git("log", "-1", "--format=%s"),
            "local_changes_in_sql_or_pyhybrid": git("status", "--porcelain", "--", "sql", "pyhybrid").splitlines(),
            "sql_and_pyhybrid_sha256": h.hexdigest()[:16]}


def machine_info(admin_dsn: str) -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    with psycopg.connect(admin_dsn) as conn:
        pg = conn.execute("SELECT version()").fetchone()[0]
        exts = dict(conn.execute(
            "SELECT name, default_version FROM pg_available_extensions WHERE name IN ('vector','age','pg_textsearch')"
        ).fetchall())
        settings = dict(conn.execute(
            "SELECT name, setting || coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)",
            ([*SERVER_SETTINGS, "work_mem", "jit", "max_parallel_workers_per_gather", "max_parallel_maintenance_workers",
              "synchronous_commit", "shared_preload_libraries"],),
        ).fetchall())
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gb": round(psutil.virtual_memory().total / 1024**3, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "postgres": pg,
        "extensions_available": exts,
        "server_settings": settings,
        "loadavg_start": list(os.getloadavg()),
    }


def installed_versions(db_dsn: str) -> dict[str, str]:
    with psycopg.connect(db_dsn) as conn:
        rows = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall()
        pg = conn.execute("SHOW server_version").fetchone()[0]
    out = {"postgresql": pg}
    out.update({n: v for n, v in rows})
    return out


EF_SEARCH: int | None = None  # --ef-search: hybrid.setting hnsw_ef_search for the run (None: the engine's default)


def setup_database(admin_dsn: str, db: str, create_ms: list[float] | None = None) -> str:
    """A fresh database with the engine installed and N_TENANTS tenants; the time of each
    hybrid.create_tenant call (ms) is appended to create_ms when given."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(APP_ROLE)))
    db_dsn = dsn_for(admin_dsn, db)
    migrate.upgrade(db_dsn)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        for i in range(N_TENANTS):
            t_c = time.perf_counter()
            conn.execute("SELECT hybrid.create_tenant(%s)", (tenant_name(i),))
            if create_ms is not None:
                create_ms.append((time.perf_counter() - t_c) * 1000.0)
        conn.execute("SELECT hybrid.grant_app(%s)", (APP_ROLE,))
        if EF_SEARCH is not None:
            conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(EF_SEARCH),))
    return db_dsn


# ----------------------------------------------------------------------------- queries

DENSE_SQL = "SELECT chunk_id FROM hybrid.search_dense(%s::vector, %s)"
LEXICAL_SQL = "SELECT chunk_id FROM hybrid.search_lexical(%s, %s, NULL, NULL, 'bm25')"
GRAPH_SQL = "SELECT chunk_id FROM hybrid.search_graph(%s::text[], 1, %s)"
HYDRATE_SQL = """SELECT c.chunk_id, c.document_id, c.corpus_id, c.tenant_id, c.content, c.metadata, c.acl_labels, c.position
FROM hybrid.chunk c WHERE c.chunk_id = ANY(%s::text[]) AND NOT c.superseded"""
# pgvector-python examples/hybrid_search/rrf.py, written against hybrid.chunk ("NOT superseded" added:
# the HNSW index is partial on it, and superseded rows must not be returned)
PGVECTOR_RRF_SQL = """WITH semantic_search AS (
    SELECT chunk_id, RANK () OVER (ORDER BY embedding <=> %(embedding)s::vector) AS rank
    FROM hybrid.chunk
    WHERE NOT superseded
    ORDER BY embedding <=> %(embedding)s::vector
    LIMIT 30
),
keyword_search AS (
    SELECT chunk_id, RANK () OVER (ORDER BY ts_rank(tsv, query) DESC)
    FROM hybrid.chunk, plainto_tsquery('english', %(query)s) query
    WHERE NOT superseded AND tsv @@ query
    ORDER BY ts_rank(tsv, query) DESC
    LIMIT 30
)
SELECT
    COALESCE(semantic_search.chunk_id, keyword_search.chunk_id) AS chunk_id,
    COALESCE(1.0 / (%(k)s + semantic_search.rank), 0.0) +
    COALESCE(1.0 / (%(k)s + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.chunk_id = keyword_search.chunk_id
ORDER BY score DESC
LIMIT 10"""
SET_TENANT = "SELECT set_config('hybrid.tenant_id', %s, true)"
NAIVE_KNN_SQL = "SELECT chunk_id FROM hybrid.chunk WHERE NOT superseded ORDER BY embedding <=> %s::vector LIMIT 10"


class Runner:
    """Runs each method for one query as the app role; returns (seconds, rows)."""

    def __init__(self, client: Any, tenant_id: str) -> None:
        self.client = client
        self.tenant_id = tenant_id

    def _branch(self, stmt: str, params: tuple[Any, ...]) -> tuple[float, int]:
        t0 = time.perf_counter()
        with self.client.connection() as conn, conn.transaction():
            conn.execute(SET_TENANT, (self.tenant_id,))
            rows = conn.execute(stmt, params).fetchall()
        return time.perf_counter() - t0, len(rows)

    def dense(self, q: Query) -> tuple[float, int]:
        t0 = time.perf_counter()
        v = vector_literal(q.vector)
        _, n = self._branch(DENSE_SQL, (v, PER_SOURCE_K))
        return time.perf_counter() - t0, n

    def lexical_bm25(self, q: Query) -> tuple[float, int]:
        return self._branch(LEXICAL_SQL, (q.text, PER_SOURCE_K))

    def graph(self, q: Query) -> tuple[float, int]:
        return self._branch(GRAPH_SQL, (q.seeds, PER_SOURCE_K))

    def hybrid_retrieve(self, q: Query) -> tuple[float, int]:
        t0 = time.perf_counter()
        with self.client.tenant(self.tenant_id) as t:
            refs = t.retrieve(query_embedding=q.vector, query_text=q.text, graph_seeds=q.seeds, top_k=TOP_K,
                              vector_weight=WEIGHTS.vector, keyword_weight=WEIGHTS.keyword,
                              graph_weight=WEIGHTS.graph, rrf_k=RRF_K)
        return time.perf_counter() - t0, len(refs)

    def client_fusion(self, q: Query) -> tuple[float, int]:
        t0 = time.perf_counter()
        v = vector_literal(q.vector)
        with self.client.connection() as conn, conn.transaction():
            conn.execute(SET_TENANT, (self.tenant_id,))
            d = [r["chunk_id"] for r in conn.execute(DENSE_SQL, (v, PER_SOURCE_K)).fetchall()]
            lx = [r["chunk_id"] for r in conn.execute(LEXICAL_SQL, (q.text, PER_SOURCE_K)).fetchall()]
            g = [r["chunk_id"] for r in conn.execute(GRAPH_SQL, (q.seeds, PER_SOURCE_K)).fetchall()]
            fused = rrf_scores([d, lx, g], [WEIGHTS.vector, WEIGHTS.keyword, WEIGHTS.graph], RRF_K, TOP_K)
            ids = [i for i, _, _ in fused]
            rows = {r["chunk_id"]: r for r in conn.execute(HYDRATE_SQL, (ids,)).fetchall()}
            out = [rows[i] for i in ids if i in rows]
        return time.perf_counter() - t0, len(out)

    def pgvector_rrf_cte(self, q: Query) -> tuple[float, int]:
        t0 = time.perf_counter()
        v = vector_literal(q.vector)
        with self.client.connection() as conn, conn.transaction():
            conn.execute(SET_TENANT, (self.tenant_id,))
            rows = conn.execute(PGVECTOR_RRF_SQL, {"embedding": v, "query": q.text, "k": RRF_K}).fetchall()
        return time.perf_counter() - t0, len(rows)

    def dense_ids(self, q: Query, stmt: str = DENSE_SQL, k: int | None = TOP_K) -> list[str]:
        v = vector_literal(q.vector)
        with self.client.connection() as conn, conn.transaction():
            conn.execute(SET_TENANT, (self.tenant_id,))
            params = (v, k) if k is not None else (v,)
            return [r["chunk_id"] for r in conn.execute(stmt, params).fetchall()]


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(ms: list[float], rows: list[int]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 3),
        "p95_ms": round(pct(ms, 95), 3),
        "p99_ms": round(pct(ms, 99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "rows_mean": round(statistics.fmean(rows), 2) if rows else 0.0,
        "rows_min": min(rows) if rows else 0,
    }


def measure_tenant(client: Any, td: TenantData, queries: list[Query], warmup: list[Query],
                   bar: tqdm, budget_s: float) -> dict[str, Any]:
    run = Runner(client, td.tenant_id)
    fns: dict[str, Callable[[Query], tuple[float, int]]] = {m: getattr(run, m) for m in METHODS}
    for q in warmup:
        for m in METHODS:
            fns[m](q)
        bar.update(1)
    ms: dict[str, list[float]] = {m: [] for m in METHODS}
    rows: dict[str, list[int]] = {m: [] for m in METHODS}
    # methods interleaved per query, so background load on the machine hits them alike
    spent = {m: 0.0 for m in METHODS}
    for i, q in enumerate(queries):
        order = METHODS[i % len(METHODS):] + METHODS[: i % len(METHODS)]
        for m in order:
            if spent[m] > budget_s:  # a method this slow stops early; its n says how many ran
                continue
            el, n = fns[m](q)
            spent[m] += el
            ms[m].append(el * 1000.0)
            rows[m].append(n)
        bar.update(1)
    out = {m: summarize(ms[m], rows[m]) for m in METHODS}
    branch_sum = [a + b + c for a, b, c in zip(ms["dense"], ms["lexical_bm25"], ms["graph"])]
    out["branch_sum"] = summarize(branch_sum, [])
    out["_raw_ms"] = {m: [round(x, 3) for x in ms[m]] for m in METHODS}

    # dense recall@10 against exact search over the tenant's vectors
    recalls: list[float] = []
    naive: list[float] = []
    naive_rows: list[int] = []
    naive_spent = 0.0
    vecs = td.vectors
    ids = np.array(td.chunk_ids, dtype=object)
    for q in queries:
        sims = vecs @ (q.vector / np.linalg.norm(q.vector))
        k = min(TOP_K, len(ids))
        exact = set(ids[np.argpartition(-sims, k - 1)[:k]])
        got = run.dense_ids(q)
        recalls.append(len(exact & set(got[:k])) / k)
        if naive_spent <= budget_s:  # the reference can be slow (a sort of the whole tenant): same budget
            t_n = time.perf_counter()
            got2 = run.dense_ids(q, NAIVE_KNN_SQL, None)
            naive_spent += time.perf_counter() - t_n
            naive.append(len(exact & set(got2)) / k)
            naive_rows.append(len(got2))
        bar.update(1)
    out["recall_at_10"] = {
        "search_dense_mean": round(statistics.fmean(recalls), 4),
        "search_dense_min": round(min(recalls), 4),
        "search_dense_p05": round(pct(recalls, 5), 4),
        "search_dense_zero_recall_queries": sum(1 for r in recalls if r == 0),
        "naive_hnsw_under_rls_mean": round(statistics.fmean(naive), 4),
        "naive_hnsw_under_rls_min": round(min(naive), 4),
        "naive_hnsw_rows_mean": round(statistics.fmean(naive_rows), 2),
        "naive_hnsw_zero_row_queries": sum(1 for n in naive_rows if n == 0),
        "naive_hnsw_queries": len(naive),
        "naive_hnsw_ms_mean": round(1000 * naive_spent / max(1, len(naive)), 2),
    }
    return out


# ----------------------------------------------------------------------------- one size


def doc_batches(td: TenantData, batch: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of about batch chunks that never split a document: ingesting a document
    again supersedes its chunks missing from the new batch, so a split document would lose chunks."""
    n = len(td.chunk_ids)
    lo = 0
    while lo < n:
        hi = min(lo + batch, n)
        while lo < hi < n and td.doc_ids[hi] == td.doc_ids[hi - 1]:
            hi -= 1
        if hi == lo:  # a document longer than a batch goes in whole
            hi = min(lo + batch, n)
            while hi < n and td.doc_ids[hi] == td.doc_ids[hi - 1]:
                hi += 1
        yield lo, hi
        lo = hi


def batched(xs: list[Any], n: int) -> Iterator[list[Any]]:
    for i in range(0, len(xs), n):
        yield xs[i:i + n]


def ingest_all(client: Any, db_dsn: str, tenants: list[TenantData], size: int, bulk: bool, batch: int,
               res: dict[str, Any], timings: dict[str, float], mem: MemorySampler) -> None:
    """Every tenant's chunks through TenantSession.ingest as the app role, batches cut at document
    boundaries; with bulk, inside HybridClient(admin).bulk_load() (HNSW dropped, rebuilt on exit)."""
    hnsw_check = "SELECT to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL AS present"
    with (connect(db_dsn) if bulk else nullcontext()) as admin:
        t0 = time.perf_counter()
        with (admin.bulk_load() if bulk else nullcontext()):
            if bulk:
                with admin.connection() as c, c.transaction():  # not left open: resume would be a savepoint in it
                    res["hnsw_present_during_load"] = c.execute(hnsw_check).fetchone()["present"]
            with tqdm(total=size, desc=f"{size}: ingest", unit="chunk", leave=False) as bar:
                for td in tenants:
                    for lo, hi in doc_batches(td, batch):
                        chunks = [
                            Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                  embedding=td.vectors[j], position=int(td.positions[j]),
                                  metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}",
                                            "topic": int(td.clusters[j])})
                            for j in range(lo, hi)
                        ]
                        with client.tenant(td.tenant_id) as t:
                            r = t.ingest(chunks, corpus_id="main")
                        assert r.inserted == hi - lo and r.superseded == 0, r
                        bar.update(hi - lo)
            t_loaded = time.perf_counter()
            if bulk:
                mem.phase = "hnsw_rebuild"
                print(f"{size}: loaded in {t_loaded - t0:.1f} s; rebuilding HNSW", file=sys.stderr)
        t_built = time.perf_counter()
        if bulk:
            with admin.connection() as c, c.transaction():
                res["hnsw_present_after_load"] = c.execute(hnsw_check).fetchone()["present"]
    timings["ingest_s"] = t_loaded - t0
    if bulk:
        timings["hnsw_rebuild_s"] = t_built - t_loaded
        timings["bulk_load_total_s"] = t_built - t0
        print(f"{size}: HNSW rebuilt in {t_built - t_loaded:.1f} s", file=sys.stderr)


def edges_present_by_tenant(db_dsn: str) -> dict[str, int]:
    """Edges in the graph per tenant (by the tenant of the start vertex)."""
    with psycopg.connect(db_dsn) as conn:
        conn.execute("SET search_path = pg_catalog, public, ag_catalog")  # graphid's = lives in ag_catalog
        return dict(conn.execute(
            "SELECT g.tenant_id, count(*) FROM hybrid_graph._ag_label_edge e "
            "JOIN hybrid.graph_node g ON g.vertex_id = e.start_id GROUP BY 1").fetchall())


def run_size(args: argparse.Namespace, admin_dsn: str, size: int) -> dict[str, Any]:
    t_start = time.perf_counter()
    db = f"bench_latency_{size}"
    res: dict[str, Any] = {"size": size, "database": db}
    timings: dict[str, float] = {}
    resume = size in (args.resume or [])
    with MemorySampler(args.data_dir) as mem:
        t0 = time.perf_counter()
        res["engine"] = engine_state()  # what migrate just installed
        if resume:  # the database an interrupted run left: chunks loaded, edges partly
            db_dsn = dsn_for(admin_dsn, db)
            migrate.upgrade(db_dsn)  # the engine measured is the checkout's, not the one the database was built with
            with psycopg.connect(db_dsn) as conn:
                have = conn.execute("SELECT count(*) FROM hybrid.chunk WHERE NOT superseded").fetchone()[0]
            if have != size:
                raise RuntimeError(f"--resume {size}: {db} holds {have} live chunks, not {size}")
        else:
            create_ms: list[float] = []
            t_c = time.perf_counter()
            db_dsn = setup_database(admin_dsn, db, create_ms)
            timings["create_tenants_s"] = time.perf_counter() - t_c
            res["create_tenant"] = {"tenants": len(create_ms), "calls_total_s": round(sum(create_ms) / 1000.0, 3),
                                    "p50_ms": round(pct(create_ms, 50), 2), "p95_ms": round(pct(create_ms, 95), 2),
                                    "max_ms": round(max(create_ms), 2), "mean_ms": round(statistics.fmean(create_ms), 2),
                                    "first_ms": round(create_ms[0], 2), "last_ms": round(create_ms[-1], 2)}
        timings["setup_s"] = time.perf_counter() - t0
        res["versions"] = installed_versions(db_dsn)
        app_dsn = dsn_for(admin_dsn, db, APP_ROLE)

        mem.phase = "generate"
        t0 = time.perf_counter()
        world = World(args.seed)
        rng = np.random.default_rng(args.seed + size)
        sizes = tenant_sizes(size)
        tenants = [make_tenant(world, tenant_name(i), n, rng) for i, n in enumerate(tqdm(sizes, desc=f"{size}: generate", leave=False))]
        edges = {td.tenant_id: make_edges(td, rng) for td in tenants}
        timings["generate_s"] = time.perf_counter() - t0
        shares = [n / size for n in sizes]
        big = int(np.argmax(shares))
        small = int(np.argmin([abs(s - 0.01) if i != big else 9 for i, s in enumerate(shares)]))
        res["tenants"] = {
            "count": len(sizes),
            "largest": {"tenant_id": tenants[big].tenant_id, "chunks": sizes[big], "share": round(shares[big], 4)},
            "one_percent": {"tenant_id": tenants[small].tenant_id, "chunks": sizes[small], "share": round(shares[small], 4)},
            "smallest_chunks": min(sizes),
            "sizes": sizes,
        }
        chosen = choose_picks(sizes)
        res["tenants"]["picks"] = {label: {"tenant_id": tenants[i].tenant_id, "chunks": sizes[i],
                                           "share": round(shares[i], 5)} for label, i in chosen}
        # the measured tenants, in the order of --picks (the default: the 50% tenant, then the ~1% one)
        measured = [tenants[i] for _, i in choose_picks(sizes, by_size=False)]
        n_edges = sum(len(e) for e in edges.values())

        # ingest through the API, as the app role: with every index present (the normal path), or for
        # sizes >= --bulk-above inside HybridClient(admin).bulk_load() (HNSW dropped, rebuilt on exit)
        bulk = bool(args.bulk_above) and size >= args.bulk_above
        mem.phase = "ingest"
        n_batches = sum(len(list(doc_batches(td, args.batch))) for td in tenants)
        hnsw_check = "SELECT to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL AS present"
        with connect(app_dsn) as client:
            if resume:
                # measured by the interrupted process of this run (its log), passed in by --resumed-ingest-s
                load_s, rebuild_s = args.resumed_ingest_s
                timings["ingest_s"] = load_s
                if bulk:
                    timings["hnsw_rebuild_s"] = rebuild_s
                    timings["bulk_load_total_s"] = load_s + rebuild_s
                with psycopg.connect(db_dsn) as conn:
                    res["hnsw_present_after_load"] = conn.execute(hnsw_check).fetchone()[0]
                res["hnsw_present_during_load"] = not bulk
                res["resumed"] = {"ingest_load_s": load_s, "hnsw_rebuild_s": rebuild_s if bulk else None}
            else:
                ingest_all(client, db_dsn, tenants, size, bulk, args.batch, res, timings, mem)

            mem.phase = "edges"
            t0 = time.perf_counter()
            added = submitted = 0
            present = edges_present_by_tenant(db_dsn) if resume else {}
            # the measured tenants first, so that an edge budget never leaves them without their graph
            order = measured + [td for td in tenants if td not in measured]
            skipped_complete: list[str] = []
            stopped: list[str] = []
            with tqdm(total=n_edges, desc=f"{size}: edges", unit="edge", leave=False) as bar:
                for td in order:
                    want = len({(e.src, e.dst, e.rel) for e in edges[td.tenant_id]})
                    if present.get(td.tenant_id, 0) >= want:
                        skipped_complete.append(td.tenant_id)
                        bar.update(len(edges[td.tenant_id]))
                        continue
                    if args.edge_budget_s and td not in measured \
                            and time.perf_counter() - t0 > args.edge_budget_s:
                        stopped.append(td.tenant_id)
                        continue
                    for part in batched(edges[td.tenant_id], 3 * args.batch):
                        with client.tenant(td.tenant_id) as t:
                            er = t.add_edges(part)
                        added += er.edges_added
                        submitted += len(part)
                        bar.update(len(part))
            timings["edges_s"] = time.perf_counter() - t0
            if resume or stopped:
                after = edges_present_by_tenant(db_dsn)
                res["edges_coverage"] = {
                    "tenants_already_complete": skipped_complete,
                    "tenants_not_loaded_edge_budget": stopped,
                    "edges_in_graph": sum(after.values()),
                    "edges_wanted": sum(len({(e.src, e.dst, e.rel) for e in edges[td.tenant_id]}) for td in tenants),
                    "measured_tenants_complete": all(
                        after.get(td.tenant_id, 0) >= len({(e.src, e.dst, e.rel) for e in edges[td.tenant_id]})
                        for td in measured),
                }
        res["ingest"] = {
            "chunks": size,
            "batches": n_batches,
            "chunks_per_s": round(size / timings["ingest_s"], 1),
            "edges_submitted": submitted,
            "edges_generated": n_edges,
            "edges_added": added,
            "edges_per_s": round(submitted / timings["edges_s"], 1) if timings["edges_s"] > 0 else None,
            "bulk_load": bulk,
            "hnsw_present_during_load": res.pop("hnsw_present_during_load", True),
        }
        if bulk:
            res["ingest"]["hnsw_present_after_load"] = res.pop("hnsw_present_after_load", None)
            res["ingest"]["load_only_chunks_per_s"] = res["ingest"]["chunks_per_s"]
            res["ingest"]["hnsw_rebuild_s"] = round(timings["hnsw_rebuild_s"], 2)
            res["ingest"]["load_plus_rebuild_chunks_per_s"] = round(size / timings["bulk_load_total_s"], 1)

        mem.phase = "analyze"
        t0 = time.perf_counter()
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) hybrid.chunk")
            conn.execute("VACUUM (ANALYZE) hybrid.graph_node")
            conn.execute("ANALYZE")
            # summed over the partition tree: a partitioned table or index has no storage of its own
            res["storage"] = dict(conn.execute("""
                SELECT 'table_mb', (SELECT sum(pg_table_size(relid)) FROM pg_partition_tree('hybrid.chunk')) / 1048576.0
                UNION ALL SELECT 'hnsw_mb', (SELECT sum(pg_relation_size(relid))
                    FROM pg_partition_tree(to_regclass('hybrid.chunk_embedding_hnsw'))) / 1048576.0
                UNION ALL SELECT 'bm25_mb', (SELECT sum(pg_relation_size(relid))
                    FROM pg_partition_tree(to_regclass('hybrid.chunk_content_bm25'))) / 1048576.0
                UNION ALL SELECT 'gin_mb', (SELECT sum(pg_relation_size(relid))
                    FROM pg_partition_tree(to_regclass('hybrid.chunk_tsv_gin'))) / 1048576.0
                UNION ALL SELECT 'database_mb', pg_database_size(current_database()) / 1048576.0""").fetchall())
            res["storage"] = {k: round(float(v or 0), 1) for k, v in res["storage"].items()}
            if conn.execute("SELECT to_regprocedure('hybrid.vector_index_density()') IS NOT NULL").fetchone() == (True,):
                # the HNSW graph density of the largest partitions (engines from 98f644e build it by size)
                res["hnsw_density"] = [dict(zip(("tenant_id", "live_rows", "m", "ef_construction"), r)) for r in conn.execute(
                    "SELECT tenant_id, live_rows, m, ef_construction FROM hybrid.vector_index_density() LIMIT 5").fetchall()]
        timings["vacuum_analyze_s"] = time.perf_counter() - t0

        # queries, as the app role acting for a tenant (RLS applies)
        mem.phase = "queries"
        qrng = np.random.default_rng(args.seed + 7 * size + 1)
        lat: dict[str, Any] = {}
        t0 = time.perf_counter()
        picks = [(label, tenants[i]) for label, i in chosen]
        total_steps = sum(args.warmup + 2 * args.queries for _ in picks)
        with connect(app_dsn) as client, tqdm(total=total_steps, desc=f"{size}: queries", unit="q", leave=False) as bar:
            for label, td in picks:
                qs = make_queries(world, td, args.queries + args.warmup, qrng)
                lat[label] = measure_tenant(client, td, qs[args.warmup:], qs[: args.warmup], bar, args.method_budget_s)
                lat[label]["tenant_id"] = td.tenant_id
                lat[label]["chunks"] = len(td.chunk_ids)
        timings["queries_s"] = time.perf_counter() - t0
        res["latency"] = lat
        if args.explain:
            mem.phase = "explain"
            path = args.out.parent / f"{args.out.stem}_explain_{size}.txt"
            path.write_text(f"# EXPLAIN (ANALYZE, BUFFERS) as {APP_ROLE} under RLS, {size:,} chunks\n\n"
                            + explain_report(app_dsn, picks, world, args.seed + 3, db_dsn))
            res["explain_file"] = str(path)

        # index build times (after the queries, which ran on the incrementally built index)
        if not args.skip_reindex:
            mem.phase = "reindex"
            with psycopg.connect(db_dsn, autocommit=True) as conn:
                for name, idx in [("hnsw", "hybrid.chunk_embedding_hnsw"), ("bm25", "hybrid.chunk_content_bm25"),
                                  ("gin_tsv", "hybrid.chunk_tsv_gin")]:
                    if name == "hnsw" and bulk:
                        continue  # just built by resume_vector_index: that build is hnsw_rebuild_s
                    t0 = time.perf_counter()
                    conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.SQL(idx)))
                    timings[f"reindex_{name}_s"] = time.perf_counter() - t0
    res["memory"] = mem.report()
    timings["total_s"] = time.perf_counter() - t_start
    res["timings"] = {k: round(v, 2) for k, v in timings.items()}
    res["targets"] = targets(res)
    if not args.keep_db:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
    return res


def ingest_probe_bulk_load(args: argparse.Namespace, admin_dsn: str, n: int) -> dict[str, Any]:
    """The same API path inside HybridClient.bulk_load() (HNSW dropped, rebuilt at the end): one tenant."""
    db = "bench_latency_probe"
    db_dsn = setup_database(admin_dsn, db)
    out: dict[str, Any] = {"chunks": n}
    world = World(args.seed)
    rng = np.random.default_rng(args.seed + 99)
    td = make_tenant(world, "t000", n, rng)
    with connect(db_dsn) as admin, connect(dsn_for(admin_dsn, db, APP_ROLE)) as client:
        t0 = time.perf_counter()
        with admin.bulk_load():
            for lo, hi in doc_batches(td, args.batch):
                chunks = [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                embedding=td.vectors[j], position=int(td.positions[j]),
                                metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}",
                                          "topic": int(td.clusters[j])})
                           for j in range(lo, hi)]
                with client.tenant("t000") as t:
                    t.ingest(chunks, corpus_id="main")
            t1 = time.perf_counter()
        t2 = time.perf_counter()
    out["load_without_hnsw_chunks_per_s"] = round(n / (t1 - t0), 1)
    out["hnsw_rebuild_s"] = round(t2 - t1, 2)
    out["bulk_load_total_chunks_per_s"] = round(n / (t2 - t0), 1)
    with connect(dsn_for(admin_dsn, db, APP_ROLE)) as client:
        t0 = time.perf_counter()
        extra = make_tenant(world, "t001", min(n, 5000), rng)
        for lo, hi in doc_batches(extra, args.batch):
            chunks = [Chunk(chunk_id=extra.chunk_ids[j], document_id=extra.doc_ids[j], content=extra.texts[j],
                            embedding=extra.vectors[j], position=int(extra.positions[j]), metadata={})
                      for j in range(lo, hi)]
            with client.tenant("t001") as t:
                t.ingest(chunks, corpus_id="main")
        out["then_with_hnsw_chunks_per_s"] = round(len(extra.chunk_ids) / (time.perf_counter() - t0), 1)
        out["then_with_hnsw_chunks"] = len(extra.chunk_ids)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
    return out


# ----------------------------------------------------------------------------- EXPLAIN

# The statements the branch functions run, read from the installed functions themselves (pg_proc), with
# the functions' variables bound as parameters: EXPLAIN (ANALYZE, BUFFERS) as the app role, tenant set,
# under RLS. Nothing of the engine's SQL is copied here, so the plans are of what the engine runs.
ENGINE_VARIABLES = {
    "query_embedding": "%(v)s::vector", "query_text": "%(t)s", "v_query": "hybrid._or_tsquery(%(t)s)",
    "top_k": "%(k)s", "corpus_ids": "NULL::text[]", "filter": "NULL::jsonb", "cap": "%(threshold)s",
    "v_tenant": "%(tenant)s", "v_acl": "%(acl)s::text[]", "v_all": "%(all)s",
    "v_key": "%(key)s::integer", "_scope_size.tenant_key": "%(key)s::integer",
    "v_types": "NULL::oid[]", "v_front": "%(seeds)s::text[]", "v_pos": "%(pos)s::integer[]", "v_visited": "%(seeds)s::text[]",
    "d_ids": "%(d)s::text[]", "l_ids": "%(l)s::text[]", "g_ids": "%(g)s::text[]",
    "d_scores": "%(dv)s::float8[]", "l_scores": "%(lv)s::float8[]", "g_dist": "%(gv)s::integer[]",
    "vector_weight": "1.0::float8", "keyword_weight": "1.0::float8", "graph_weight": "0.5::float8",
    "rrf_k": "60::float8", "per_document": "false", "with_graph_context": "false",
    "fusion": "'convex'::text", "skip": "0", "siblings": "0",
}


def engine_statements(conn: psycopg.Connection[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(title, statement, settings) for each statement the installed branch functions and hybrid.retrieve run."""
    import re

    def source(fn: str) -> str:
        row = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = %s::regproc", (fn,)).fetchone()
        assert row is not None, fn
        return str(row[0])

    def bind(stmt: str, extra: dict[str, str] | None = None) -> str:
        names = {**ENGINE_VARIABLES, **(extra or {})}
        pattern = re.compile(r"(?<![.\w%])(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b")
        stmt = re.sub(r"--[^\n]*", "", stmt)
        return pattern.sub(lambda m: names[m.group(1)], stmt).strip().rstrip(";")

    def returned(fn: str) -> list[str]:
        return re.findall(r"RETURN QUERY\s+(.*?);\s*\n", re.sub(r"--[^\n]*", "", source(fn)), re.S)

    def unwrap(stmt: str) -> str:
        # EXECUTE format($sql$ ... $sql$, a, b, ...) USING x, y, ...: the statement it runs, the
        # format arguments as %(name)s parameters and $n as the USING expressions
        m = re.match(r"EXECUTE format\(\$sql\$(.*)\$sql\$,(.*?)\)\s+USING\s+(.*)$", stmt, re.S)
        if m is None:
            return stmt
        body, fargs, using = m.group(1), [a.strip() for a in m.group(2).split(",")], [u.strip() for u in m.group(3).split(",")]
        it = iter(fargs)
        body = re.sub(r"%[LsI]", lambda _: {"v_index": "__BM25_INDEX__", "v_part": "__PARTITION__"}[next(it)], body)
        return re.sub(r"\$(\d+)", lambda g: using[int(g.group(1)) - 1], body)

    dense = returned("hybrid.search_dense")
    lexical = returned("hybrid.search_lexical")
    graph_hop = re.search(r"SELECT array_agg\(n\.node_id.*?;\s*\n", source("hybrid.search_graph"), re.S)
    assert len(dense) == 2 and len(lexical) == 2 and graph_hop is not None, "the branch functions changed shape"
    hop = re.sub(r"\s+INTO v_next_ids, v_next_pos, v_next_kind", "", graph_hop.group(0))
    return [
        ("_scope_size (run by search_dense)", bind(source("hybrid._scope_size")), {}),
        ("search_dense, exact path (scope <= exact_threshold)", bind(dense[0]), {}),
        ("search_dense, HNSW path (scope > exact_threshold; iterative_scan relaxed_order, ef_search of hybrid._dense_plan)",
         bind(dense[1]), {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "%(ef)s"}),
        ("search_lexical ts_rank (GIN)", bind(lexical[0]), {"enable_sort": "off"}),
        ("search_lexical bm25 (the partition's BM25 index's ordered scan, as hybrid_definer reads it; enable_sort off "
         "as the function sets it)", bind(unwrap(lexical[1])), {"enable_sort": "off", "role": "hybrid_definer"}),
        ("search_graph, one hop from the seeds (the loop body)", bind(hop), {}),
        ("hybrid.retrieve, fusion + hydration of the fused ids", bind(returned("hybrid.retrieve")[0],
                                                                     {"top_k": "10"}), {}),
        ("(d) pgvector-python RRF CTE (RLS only, no explicit tenant predicate; session defaults)",
         PGVECTOR_RRF_SQL.replace("%(embedding)s", "%(v)s").replace("%(query)s", "%(t)s").replace("%(k)s", "60"), {}),
    ]


def explain_report(app_dsn: str, picks: list[tuple[str, TenantData]], world: World, seed: int,
                   admin_dsn: str | None = None) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of each branch statement as the app role, for each picked tenant.

    With admin_dsn (the database's superuser), the HNSW statement runs at the ef_search that
    hybrid._dense_plan gives the tenant, and the BM25 statement, which reads the tenant's partition
    by name, runs as hybrid_definer, as hybrid.search_lexical does.
    """
    import re

    rng = np.random.default_rng(seed)
    out: list[str] = []
    admin = psycopg.connect(admin_dsn, autocommit=True) if admin_dsn else None
    if admin is not None:
        # the BM25 statement reads the partition by name, which only the engine's definer may, with
        # the caller's tenant rules (hybrid._caller): run it inside a function owned by hybrid_definer
        admin.execute("DROP SCHEMA IF EXISTS bench_explain CASCADE")
        admin.execute("CREATE SCHEMA bench_explain")
        admin.execute("CREATE FUNCTION bench_explain.run(q text) RETURNS SETOF text LANGUAGE plpgsql SECURITY DEFINER "
                      "SET search_path = pg_catalog, public, ag_catalog, pg_temp "
                      "AS $f$ DECLARE r record; BEGIN FOR r IN EXECUTE q LOOP RETURN NEXT r.\"QUERY PLAN\"; END LOOP; END $f$")
        admin.execute("ALTER FUNCTION bench_explain.run(text) OWNER TO hybrid_definer")
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA bench_explain TO {}").format(sql.Identifier(APP_ROLE)))
        admin.execute(sql.SQL("GRANT EXECUTE ON FUNCTION bench_explain.run(text) TO {}").format(sql.Identifier(APP_ROLE)))
    with psycopg.connect(app_dsn) as conn:
        for label, td in picks:
            q = make_queries(world, td, 1, rng)[0]
            v = vector_literal(q.vector)
            with conn.transaction():
                conn.execute(SET_TENANT, (td.tenant_id,))
                d = [r[0] for r in conn.execute(DENSE_SQL, (v, PER_SOURCE_K)).fetchall()]
                lx = [r[0] for r in conn.execute(LEXICAL_SQL, (q.text, PER_SOURCE_K)).fetchall()]
                g = [r[0] for r in conn.execute(GRAPH_SQL, (q.seeds, PER_SOURCE_K)).fetchall()]
                # the default of search_dense's exact_threshold (sql/idempotent/050_search.sql)
                threshold = conn.execute(
                    "SELECT coalesce((SELECT value::integer FROM hybrid.setting WHERE key = 'exact_threshold'), 5000)"
                ).fetchone()[0]
                key = conn.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = %s",
                                   (td.tenant_id,)).fetchone()[0]
                scope = conn.execute("SELECT hybrid._scope_size(%s, NULL, NULL, %s)", (key, threshold)).fetchone()[0]
                acl = conn.execute("SELECT hybrid._current_acl(), hybrid._acl_all()").fetchone()
            ef, bm25_index, partition = 100, None, None
            if admin is not None:
                ef, bm25_index, partition = admin.execute(
                    "SELECT greatest(hybrid._dense_plan(%s::integer, NULL, NULL, NULL, %s), 100), "
                    "hybrid._bm25_partition_index(%s::integer), hybrid._chunk_partition(%s::integer)::text",
                    (key, PER_SOURCE_K, key, key)).fetchone()
            params = {"v": v, "t": q.text, "seeds": q.seeds, "pos": list(range(1, len(q.seeds) + 1)),
                      "ef": str(ef),
                      "tenant": td.tenant_id, "key": key, "d": d, "l": lx, "g": g, "acl": list(acl[0]), "all": bool(acl[1]),
                      "threshold": threshold, "k": PER_SOURCE_K, "dv": [0.0] * len(d), "lv": [0.0] * len(lx),
                      "gv": [1] * len(g)}
            out.append(f"#### tenant {td.tenant_id} ({label}, {len(td.chunk_ids):,} chunks; _scope_size({threshold}) = "
                       f"{scope}: search_dense takes the {'exact' if scope <= threshold else 'HNSW'} path)")
            out.append(f"query text: {q.text!r}; seeds: {q.seeds}")
            for title, stmt, gucs in engine_statements(conn):
                gucs = dict(gucs)
                role = gucs.pop("role", None)
                c = conn
                if role is not None and admin is None:
                    out += ["", f"== {title}", f"(not run: needs the superuser's DSN to run as {role})"]
                    continue
                with c.transaction():
                    c.execute(SET_TENANT, (td.tenant_id,))
                    c.execute("SET LOCAL search_path = pg_catalog, public, ag_catalog, pg_temp")
                    for name, value in gucs.items():
                        c.execute("SELECT set_config(%s, %s, true)", (name, value % params if "%(" in value else value))
                    try:
                        with c.transaction():  # a savepoint: a statement that cannot be bound here fails alone
                            cur = c.cursor()
                            # engine-made names (regclass text), spliced as the function's format() does
                            stmt = stmt.replace("__BM25_INDEX__", f"'{bm25_index}'").replace("__PARTITION__", str(partition))
                            if role is None:
                                plan = [r[0] for r in cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params).fetchall()]
                            else:
                                text = psycopg.ClientCursor(c).mogrify("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params)
                                plan = [r[0] for r in cur.execute("SELECT * FROM bench_explain.run(%s)", (text,)).fetchall()]
                    except psycopg.Error as exc:
                        plan = [f"ERROR: {exc}"]
                text = "\n".join(plan)
                text = re.sub(r"'\[[-0-9.,e]+\]'::vector", "'<query vector>'::vector", text)
                out += ["", f"== {title}", text]
            out.append("")
    if admin is not None:
        admin.execute("DROP SCHEMA IF EXISTS bench_explain CASCADE")
        admin.close()
    return "\n".join(out)


def explain_only(args: argparse.Namespace, admin_dsn: str) -> None:
    """Rewrite <out>_explain_<size>.txt from the databases a --keep-db run left (same data, same queries)."""
    for size in sorted(args.sizes):
        db = f"bench_latency_{size}"
        world = World(args.seed)
        rng = np.random.default_rng(args.seed + size)
        sizes = tenant_sizes(size)
        tenants = [make_tenant(world, tenant_name(i), n, rng) for i, n in enumerate(tqdm(sizes, desc=f"{size}: generate", leave=False))]
        picks = [(label, tenants[i]) for label, i in choose_picks(sizes)]
        app_dsn = dsn_for(admin_dsn, db, APP_ROLE)
        path = args.out.parent / f"{args.out.stem}_explain_{size}.txt"
        eng = engine_state()
        path.write_text(f"# EXPLAIN (ANALYZE, BUFFERS) as {APP_ROLE} under RLS, {size:,} chunks "
                        f"(engine git {eng['git_head']}, digest {eng['sql_and_pyhybrid_sha256']}; written by --explain-only "
                        f"on the database of the latency run)\n\n"
                        + explain_report(app_dsn, picks, world, args.seed + 3, dsn_for(admin_dsn, db)))
        print(path, file=sys.stderr)


# ----------------------------------------------------------------------------- report


def targets(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in res["latency"]:
        lat = res["latency"][label]
        hr = lat["hybrid_retrieve"]["p95_ms"]
        sum_p95 = lat["dense"]["p95_ms"] + lat["lexical_bm25"]["p95_ms"] + lat["graph"]["p95_ms"]
        out[f"{label}_retrieve_vs_branch_sum"] = {
            "hybrid_retrieve_p95_ms": hr,
            "sum_of_branch_p95_ms": round(sum_p95, 3),
            "p95_of_per_query_branch_sum_ms": lat["branch_sum"]["p95_ms"],
            "ratio_to_sum_of_p95": round(hr / sum_p95, 3),
            "ratio_to_p95_of_sum": round(hr / lat["branch_sum"]["p95_ms"], 3),
            "met": hr <= 1.2 * sum_p95,
            "met_strict": hr <= 1.2 * lat["branch_sum"]["p95_ms"],
        }
        cf = lat["client_fusion"]["p95_ms"]
        out[f"{label}_retrieve_below_client_fusion"] = {"hybrid_retrieve_p95_ms": hr, "client_fusion_p95_ms": cf,
                                                        "met": hr < cf}
        rc = lat["recall_at_10"]["search_dense_mean"]
        out[f"{label}_recall_at_10"] = {"value": rc, "met": rc >= 0.95}
    ing = res["ingest"]
    if ing.get("bulk_load"):
        out["bulk_load_only_chunks_per_s"] = {"value": ing["load_only_chunks_per_s"],
                                              "met": ing["load_only_chunks_per_s"] >= 10000}
        out["bulk_load_plus_rebuild_chunks_per_s"] = {"value": ing["load_plus_rebuild_chunks_per_s"],
                                                      "met": ing["load_plus_rebuild_chunks_per_s"] >= 10000}
    else:
        out["ingest_chunks_per_s"] = {"value": ing["chunks_per_s"], "met": ing["chunks_per_s"] >= 10000}
    if res["size"] >= 1_000_000:
        worst = max(res["latency"][lb]["hybrid_retrieve"]["p95_ms"] for lb in res["latency"])
        out["retrieve_p95_at_1m"] = {"value": worst, "met": worst <= 50}
    return out


def yn(b: bool) -> str:
    return "met" if b else "**not met**"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# pyhybrid latency benchmark",
        "",
        f"Date {m['date']}; {m['nproc']} cores ({m['cpu_model']}), {m['memory_gb']} GB RAM; {m['os']}.",
        f"{m['postgres']}.",
        "Extensions: " + ", ".join(f"{k} {v}" for k, v in report["runs"][0]["versions"].items()) + ".",
        "Server settings: " + ", ".join(f"{k}={v}" for k, v in sorted(m["server_settings"].items())) + ".",
        f"Load average at start {m['loadavg_start']}, at end {report.get('loadavg_end')} "
        "(other sessions share this machine).",
        "",
        f"Command: `{report['command']}`; wall time {report['wall_s']:.0f} s"
        + (f" (sizes {', '.join(f'{x:,}' for x in report.get('sizes_this_command', []))})" if report.get('earlier_commands') else "")
        + ".",
        *[f"Earlier command of this run (sizes {', '.join(f'{x:,}' for x in e['sizes'])}): `{e['command']}`; "
          f"wall time {e['wall_s']:.0f} s; date {e['date']}; engine git {e['engine']['git_head']}, digest "
          f"{e['engine']['sql_and_pyhybrid_sha256']}." for e in report.get("earlier_commands", [])],
        f"Engine: git {report['engine_at_start']['git_head']} ({report['engine_at_start']['git_head_subject']}), "
        f"imported from {report['engine_at_start'].get('engine_root', '?')}; "
        f"local changes in sql/ or pyhybrid/: {len(report['engine_at_start']['local_changes_in_sql_or_pyhybrid'])} files; "
        f"digest of sql/ + pyhybrid/ {report['engine_at_start']['sql_and_pyhybrid_sha256']} at start"
        + (f", {report['engine_at_end']['sql_and_pyhybrid_sha256']} at end"
           + (" (**the engine changed during the run**)" if report['engine_at_end']['sql_and_pyhybrid_sha256']
              != report['engine_at_start']['sql_and_pyhybrid_sha256'] else " (unchanged)")
           if report.get("engine_at_end") else "") + ".",
        "",
        "Synthetic data: 384-d vectors around 200 L2-normalised gaussian topic centres (each topic varying in its",
        "own 16-d subspace plus isotropic noise), text of 60 to 160 Zipf-distributed pseudo-words (30% from the",
        "topic's own 300 words), documents of ~5 chunks on one topic, ~3 edges per chunk within the tenant (NEXT",
        f"within a document, RELATED to chunks of the same topic), {report['config']['tenants']:,} tenants: one with 50% of the rows, the",
        "others 1/rank (one ~1%). Everything loaded through TenantSession.ingest / add_edges as the",
        f"non-superuser role {APP_ROLE} (member of hybrid_app), batches of {report['config']['batch']} chunks.",
        f"Queries: {report['config']['queries']} per tenant and method after {report['config']['warmup']} warm-up",
        "queries, each method timed end to end from Python (psycopg 3, unix socket, one transaction with",
        "set_config('hybrid.tenant_id', ..., true)), methods interleaved query by query. Per-source k = 30, top_k = 10,",
        "weights 1 / 1 / 0.5, rrf k = 60, graph 1 hop from 3 random chunk ids of the tenant.",
        "",
    ]
    for run in report["runs"]:
        n = run["size"]
        t = run["tenants"]
        labels = list(run["latency"])  # measured order: ascending tenant size
        lines += [
            f"## {n:,} chunks",
            "",
            f"Engine installed for this size: git {run['engine']['git_head']}, digest {run['engine']['sql_and_pyhybrid_sha256']}"
            f", {len(run['engine']['local_changes_in_sql_or_pyhybrid'])} locally changed files in sql/ or pyhybrid/.",
            "",
            *([f"**Resumed run.** The chunks were loaded and the HNSW index rebuilt by an earlier process of this "
               f"run (same command without --resume), which was stopped during add_edges; its load "
               f"({run['resumed']['ingest_load_s']:.0f} s) and rebuild "
               + (f"({run['resumed']['hnsw_rebuild_s']:.0f} s) " if run['resumed'].get('hnsw_rebuild_s') is not None else "")
               + "times are taken from its log. Its memory peaks and data generation time are not in this report; "
               "everything else below was measured by the resumed process on that database.", ""]
              if run.get("resumed") else []),
            *([f"Graph edges: {run['edges_coverage']['edges_in_graph']:,} of {run['edges_coverage']['edges_wanted']:,} "
               f"distinct edges in the graph when the queries ran; the two measured tenants complete: "
               f"{run['edges_coverage']['measured_tenants_complete']}; tenants left without edges by the edge budget: "
               f"{len(run['edges_coverage']['tenants_not_loaded_edge_budget'])}; tenants already complete before this "
               f"process: {len(run['edges_coverage']['tenants_already_complete'])}"
               + (f" ({', '.join(run['edges_coverage']['tenants_already_complete'])})"
                  if 0 < len(run['edges_coverage']['tenants_already_complete']) <= 5 else "") + ".", ""]
              if run.get("edges_coverage") else []),
            f"Tenants: largest {t['largest']['tenant_id']} {t['largest']['chunks']:,} chunks "
            f"({t['largest']['share']:.1%}), the ~1% tenant {t['one_percent']['tenant_id']} "
            f"{t['one_percent']['chunks']:,} chunks ({t['one_percent']['share']:.2%}), smallest {t['smallest_chunks']} chunks.",
            *([("Measured tenants (nearest each share of --picks): "
                + ", ".join(f"{lb[:-3]}% {pk['tenant_id']} {pk['chunks']:,} chunks ({pk['share']:.3%})"
                            for lb, pk in t["picks"].items()) + ".")]
              if set(t.get("picks", {})) - {"1pct", "50pct"} else []),
            *([f"create_tenant: {ct['tenants']:,} calls in {tm0['create_tenants_s']:.2f} s (calls alone {ct['calls_total_s']:.2f} s); "
               f"per call p50 {ct['p50_ms']:.1f} ms, p95 {ct['p95_ms']:.1f} ms, max {ct['max_ms']:.1f} ms "
               f"(first {ct['first_ms']:.1f} ms, last {ct['last_ms']:.1f} ms)."]
              if (ct := run.get("create_tenant")) and (tm0 := run["timings"]).get("create_tenants_s") is not None
 else []),
            "",
            "### Query latency (ms)",
            "",
            "| method | " + " | ".join(f"{lb[:-3]}% {c}" for lb in labels for c in ("p50", "p95", "p99", "rows")) + " |",
            "|---|" + "---:|" * (4 * len(labels)),
        ]
        for mth in ["dense", "lexical_bm25", "graph", "branch_sum", "hybrid_retrieve", "client_fusion", "pgvector_rrf_cte"]:
            cells = []
            for lb in labels:
                a = run["latency"][lb][mth]
                ra = f"{a['rows_mean']:.1f}" if mth != "branch_sum" else ""
                cells.append(f"{a['p50_ms']:.2f} | {a['p95_ms']:.2f} | {a['p99_ms']:.2f} | {ra}")
            lines.append(f"| {METHOD_LABELS[mth]} | " + " | ".join(cells) + " |")
        short = [f"{METHOD_LABELS[m]} {lb}: n={run['latency'][lb][m]['n']}" for lb in labels for m in METHODS
                 if run["latency"][lb][m]["n"] < report["config"]["queries"]]
        short += [f"plain ORDER BY reference {lb}: n={run['latency'][lb]['recall_at_10']['naive_hnsw_queries']}"
                  for lb in labels
                  if run["latency"][lb]["recall_at_10"].get("naive_hnsw_queries", report["config"]["queries"])
                  < report["config"]["queries"]]
        lines += ["", "rows = mean rows returned (branches asked for 30, fused methods for 10)."
                  + (" Stopped early (time budget): " + "; ".join(short) + "." if short else ""), "",
                  "### Dense recall@10 vs exact (numpy over the tenant's vectors)", "",
                  "| tenant | search_dense mean | min | 5th pct | queries with recall 0 | plain `ORDER BY embedding <=> q LIMIT 10` under RLS | its mean rows | its queries with 0 rows |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label in labels:
            r = run["latency"][label]["recall_at_10"]
            lines.append(f"| {label} ({run['latency'][label]['chunks']:,} chunks) | {r['search_dense_mean']:.3f} | "
                         f"{r['search_dense_min']:.2f} | {r['search_dense_p05']:.2f} | {r['search_dense_zero_recall_queries']} | "
                         f"{r['naive_hnsw_under_rls_mean']:.3f} | "
                         f"{r['naive_hnsw_rows_mean']:.1f} | {r['naive_hnsw_zero_row_queries']} |")
        ing = run["ingest"]
        tm = run["timings"]
        mem = run["memory"]
        lines += [
            "",
            "### Ingest, indexes, memory",
            "",
            "| what | value |",
            "|---|---:|",
            *([f"| ingest, HNSW + BM25 + GIN present (API end to end) | {ing['chunks_per_s']:,.0f} chunks/s ({tm['ingest_s']:.1f} s, {ing['batches']} batches) |"]
              if not ing.get("bulk_load") else [
              f"| ingest inside bulk_load(): HNSW dropped, BM25 + GIN present (API end to end; load only) | {ing['load_only_chunks_per_s']:,.0f} chunks/s ({tm['ingest_s']:.1f} s, {ing['batches']} batches) |",
              f"| HNSW rebuild on leaving bulk_load() (hybrid.resume_vector_index) | {tm['hnsw_rebuild_s']:.1f} s (HNSW present during the load: {ing['hnsw_present_during_load']}; after: {ing['hnsw_present_after_load']}) |",
              f"| bulk load + rebuild | {ing['load_plus_rebuild_chunks_per_s']:,.0f} chunks/s ({tm['bulk_load_total_s']:.1f} s) |"]),
            f"| add_edges | {ing['edges_per_s'] or 0:,.0f} edges/s ({ing['edges_submitted']:,} edges, {tm['edges_s']:.1f} s) |",
            f"| VACUUM ANALYZE | {tm['vacuum_analyze_s']:.1f} s |",
            *([f"| create_tenant x {run['create_tenant']['tenants']:,} (setup) | {tm['create_tenants_s']:.2f} s; per call p50 "
               f"{run['create_tenant']['p50_ms']:.1f} ms, max {run['create_tenant']['max_ms']:.1f} ms |"]
              if run.get("create_tenant") and "create_tenants_s" in tm else []),
        ]
        for name in ("hnsw", "bm25", "gin_tsv"):
            if f"reindex_{name}_s" in tm:
                lines.append(f"| REINDEX {name} | {tm[f'reindex_{name}_s']:.1f} s |")
        lines += [
            f"| data generation (not in ingest) | {tm['generate_s']:.1f} s |",
            f"| storage | table {run['storage']['table_mb']:.0f} MB, HNSW {run['storage']['hnsw_mb']:.0f} MB, BM25 {run['storage']['bm25_mb']:.0f} MB, GIN {run['storage']['gin_mb']:.0f} MB |",
            *(["| HNSW density of the largest partitions | " + ", ".join(
                f"{d['live_rows']:,} rows: m {d['m']}, ef_construction {d['ef_construction']}" for d in run["hnsw_density"]) + " |"]
              if run.get("hnsw_density") else []),
            f"| server peak memory (sum of RSS of postgres processes) | {mem['peak_rss_mb']:,.0f} MB |",
            f"| server peak memory (sum of PSS, shared pages counted once) | {mem['peak_pss_mb']:,.0f} MB |",
            f"| peak RSS by phase | " + ", ".join(f"{k} {v:,.0f}" for k, v in mem["by_phase_rss_mb"].items()) + " MB |",
            f"| run time for this size | {tm['total_s']:.0f} s |",
            "",
            "### Targets",
            "",
        ]
        tg = run["targets"]
        for label in labels:
            x = tg[f"{label}_retrieve_vs_branch_sum"]
            lines.append(f"- {label}: hybrid_retrieve p95 {x['hybrid_retrieve_p95_ms']:.2f} ms <= 1.2 x sum of branch p95s "
                         f"({x['sum_of_branch_p95_ms']:.2f} ms; ratio {x['ratio_to_sum_of_p95']:.2f}): {yn(x['met'])}; "
                         f"against the p95 of per-query sums ({x['p95_of_per_query_branch_sum_ms']:.2f} ms; ratio "
                         f"{x['ratio_to_p95_of_sum']:.2f}): {yn(x['met_strict'])}")
            y = tg[f"{label}_retrieve_below_client_fusion"]
            lines.append(f"- {label}: hybrid_retrieve p95 {y['hybrid_retrieve_p95_ms']:.2f} ms < client-side fusion p95 "
                         f"{y['client_fusion_p95_ms']:.2f} ms: {yn(y['met'])}")
            z = tg[f"{label}_recall_at_10"]
            lines.append(f"- {label}: dense recall@10 {z['value']:.3f} >= 0.95: {yn(z['met'])}")
        if "ingest_chunks_per_s" in tg:
            x = tg["ingest_chunks_per_s"]
            lines.append(f"- ingest {x['value']:,.0f} chunks/s >= 10,000: {yn(x['met'])}")
        if "bulk_load_only_chunks_per_s" in tg:
            x, y = tg["bulk_load_only_chunks_per_s"], tg["bulk_load_plus_rebuild_chunks_per_s"]
            lines.append(f"- bulk path, load only {x['value']:,.0f} chunks/s >= 10,000: {yn(x['met'])}")
            lines.append(f"- bulk path, load + HNSW rebuild {y['value']:,.0f} chunks/s >= 10,000: {yn(y['met'])}")
        if "retrieve_p95_at_1m" in tg:
            x = tg["retrieve_p95_at_1m"]
            lines.append(f"- 1M: hybrid_retrieve p95 {x['value']:.2f} ms <= 50 ms: {yn(x['met'])}")
        lines.append("")
    if report.get("ingest_probe"):
        p = report["ingest_probe"]
        lines += ["## Ingest through HybridClient.bulk_load() (HNSW dropped during the load, rebuilt after)", "",
                  f"Same API path, one tenant, {p['chunks']:,} chunks into a fresh database: load "
                  f"{p['load_without_hnsw_chunks_per_s']:,.0f} chunks/s, HNSW rebuild {p['hnsw_rebuild_s']:.1f} s, "
                  f"overall {p['bulk_load_total_chunks_per_s']:,.0f} chunks/s (target 10,000: "
                  f"{yn(p['bulk_load_total_chunks_per_s'] >= 10000)}). Then {p['then_with_hnsw_chunks']:,} more chunks "
                  f"(another tenant) with the rebuilt index present: {p['then_with_hnsw_chunks_per_s']:,.0f} chunks/s.", ""]
    if report.get("skipped"):
        lines += ["## Not run", "", report["skipped"], ""]
    for f in report.get("failed", []):
        lines += [f"## {f['size']:,} chunks: failed", "", f"After {f['elapsed_s']:.0f} s: `{f['error']}`", ""]
    lines += ["EXPLAIN (ANALYZE, BUFFERS) of every branch statement, as the app role: `<out>_explain_<size>.txt`.",
              "Diagnoses of the slow paths (written by hand from those plans): `latency_diagnosis.md`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, default=Path("bench/results/latency.json"))
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"))
    ap.add_argument("--keep-db", action="store_true", help="keep each size's database (for EXPLAIN afterwards)")
    ap.add_argument("--skip-reindex", action="store_true")
    ap.add_argument("--no-explain", dest="explain", action="store_false",
                    help="do not write <out>_explain_<size>.txt (EXPLAIN ANALYZE of each branch statement)")
    ap.add_argument("--method-budget-s", type=float, default=300.0,
                    help="stop timing a method for a tenant after this many seconds (n then < --queries)")
    ap.add_argument("--probe-rows", type=int, default=50000,
                    help="ingest probe through HybridClient.bulk_load(), one tenant (0: skip)")
    ap.add_argument("--max-1m-minutes", type=float, default=45.0,
                    help="skip a size >= 1M loaded the normal way when the extrapolated run time exceeds this")
    ap.add_argument("--explain-only", action="store_true",
                    help="only rewrite <out>_explain_<size>.txt from the databases a --keep-db run left")
    ap.add_argument("--resume", type=int, nargs="*", default=[],
                    help="sizes whose database an interrupted --keep-db run left with every chunk loaded: skip setup "
                         "and ingest, load the missing edges, then measure as usual (needs --resumed-ingest-s)")
    ap.add_argument("--resumed-ingest-s", type=float, nargs=2, metavar=("LOAD_S", "REBUILD_S"),
                    help="the interrupted process's measured load and HNSW rebuild seconds (from its log)")
    ap.add_argument("--append", action="store_true",
                    help="keep the runs of other sizes already in --out (their own engine state is kept with them)")
    ap.add_argument("--edge-budget-s", type=float, default=0.0,
                    help="after the 1%% and the 50%% tenant, start no other tenant's edges past this many seconds "
                         "(checked before each tenant: one already started is loaded whole; 0: load all); the "
                         "coverage is reported")
    ap.add_argument("--ef-search", type=int, default=None,
                    help="set hybrid.setting hnsw_ef_search for the run (default: the engine's, 100)")
    ap.add_argument("--tenants", type=int, default=100,
                    help="tenants per database (one holds ~50%% of the rows, the rest 1/rank)")
    ap.add_argument("--picks", type=float, nargs="+", default=[0.5, 0.01],
                    help="row shares: the tenant nearest each is measured (labelled e.g. 50pct, 1pct, 0.1pct)")
    ap.add_argument("--bulk-above", type=int, default=0,
                    help="load sizes >= N inside HybridClient(admin).bulk_load() (0: never)")
    args = ap.parse_args(argv)
    global EF_SEARCH, N_TENANTS, PICKS
    EF_SEARCH = args.ef_search
    N_TENANTS = args.tenants
    PICKS = list(args.picks)
    if args.tenants < len(args.picks):
        ap.error("--tenants must be at least the number of --picks")
    if args.queries < 1:
        ap.error("--queries must be >= 1")
    if args.resume and not args.resumed_ingest_s:
        ap.error("--resume needs --resumed-ingest-s LOAD_S REBUILD_S")

    t_all = time.perf_counter()
    admin_dsn = start_embedded(args.data_dir)
    admin_dsn = configure_server(args.data_dir, admin_dsn)
    if args.explain_only:
        explain_only(args, admin_dsn)
        return 0
    report: dict[str, Any] = {
        "command": (f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else "") + "python " + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_info(admin_dsn),
        "engine_at_start": engine_state(),
        "config": {"queries": args.queries, "warmup": args.warmup, "batch": args.batch, "seed": args.seed,
                   "per_source_k": PER_SOURCE_K, "top_k": TOP_K, "weights": [WEIGHTS.vector, WEIGHTS.keyword, WEIGHTS.graph],
                   "rrf_k": RRF_K, "tenants": N_TENANTS, "picks": PICKS, "dim": DIM, "clusters": N_CLUSTERS, "vocab": VOCAB},
        "runs": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md_path = args.out.with_suffix(".md")
    if args.append and args.out.exists():
        prev = json.loads(args.out.read_text())
        kept = [r for r in prev["runs"] if r["size"] not in args.sizes]
        report["runs"] = kept
        report["sizes_this_command"] = sorted(args.sizes)
        report["earlier_commands"] = prev.get("earlier_commands", []) + [{
            "command": prev["command"], "wall_s": prev.get("wall_s"), "date": prev["machine"]["date"],
            "sizes": [r["size"] for r in kept], "engine": prev["engine_at_start"],
            "loadavg_start": prev["machine"].get("loadavg_start")}]
    for size in sorted(args.sizes):
        if size >= 1_000_000 and report["runs"] and not (args.bulk_above and size >= args.bulk_above):
            prev = report["runs"][-1]
            est = prev["timings"]["total_s"] * size / prev["size"] * 1.3 / 60
            if est > args.max_1m_minutes:
                report["skipped"] = (f"{size:,} chunks: skipped; the {prev['size']:,} run took "
                                     f"{prev['timings']['total_s']:.0f} s, which extrapolates to ~{est:.0f} min "
                                     f"(> {args.max_1m_minutes:.0f} min allowed).")
                print(report["skipped"], file=sys.stderr)
                continue
        t_size = time.perf_counter()
        try:
            res = run_size(args, admin_dsn, size)
        except Exception as exc:  # record it; the sizes already measured stay in the report
            traceback.print_exc()
            report.setdefault("failed", []).append({"size": size, "error": f"{type(exc).__name__}: {exc}",
                                                    "elapsed_s": round(time.perf_counter() - t_size, 1)})
            report["wall_s"] = time.perf_counter() - t_all
            md_path.write_text(markdown(report)) if report["runs"] else None
            continue
        report["runs"].append(res)
        report["runs"].sort(key=lambda r: r["size"])
        report["wall_s"] = time.perf_counter() - t_all
        report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        args.out.write_text(json.dumps(report, indent=1))
        md_path.write_text(markdown(report))
        print(f"{size}: done in {res['timings']['total_s']:.0f} s", file=sys.stderr)
    if args.probe_rows:
        report["ingest_probe"] = ingest_probe_bulk_load(args, admin_dsn, args.probe_rows)
    report["wall_s"] = time.perf_counter() - t_all
    report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report["engine_at_end"] = engine_state()
    args.out.write_text(json.dumps(report, indent=1))
    md_path.write_text(markdown(report))
    print(md_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
