"""Latency, ingest and recall of pyhybrid on synthetic multi-tenant corpora (commands and knobs: bench/README.md).

Per --sizes: a fresh database of --tenants tenants of Zipf-skewed sizes, loaded through the ingestion API as a
non-superuser app role; for the tenants nearest --picks, under RLS, each of METHODS (labelled in bench/report.py)
interleaved per query, and dense recall@10 against exact search.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import traceback
from bisect import bisect_right
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import psutil
import psycopg
from psycopg import sql
from tqdm import tqdm

from _common import (control_ms, cpu_seconds, drop_databases, engine_state, fresh_database, installed_versions, pct, server_processes,
                     start_meta, summarize, vector_literal, write_result)
from pyhybrid import Edge, HybridWeights, connect, migrate
from pyhybrid.ingest import ingest_records
from pyhybrid.fusion import rrf_scores
from pyhybrid.maintenance import merge_bm25
from pyhybrid.server import start_embedded, stop_embedded

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
SERVER_SETTINGS = {"shared_buffers": "2GB", "effective_cache_size": "8GB", "maintenance_work_mem": "1GB", "max_wal_size": "4GB"}

METHODS = ["dense", "lexical_bm25", "graph", "hybrid_retrieve", "client_fusion", "pgvector_rrf_cte"]
# --bm25-ab: the engine's choice (lexical_bm25, hybrid_retrieve) beside each BM25 scorer forced by a setting: the index
# scan, the index re-scored with <@> (the call before merge_bm25) and the exact SQL scorer (any PostgreSQL)
BM25_AB = {"lexical_bm25_index": ("bm25_scorer", "index"), "lexical_bm25_rescored": ("bm25_rescore", "on"),
           "lexical_bm25_sql": ("bm25_scorer", "sql"), "hybrid_bm25_index": ("bm25_scorer", "index"),
           "hybrid_bm25_sql": ("bm25_scorer", "sql")}


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


def tenant_sizes(total: int) -> list[int]:
    """One tenant owns half the rows; the rest follow 1/rank (with 100 tenants the 10th of them holds ~1%)."""
    shares = np.array([0.5] + list(0.5 * (1.0 / np.arange(1, N_TENANTS)) / np.sum(1.0 / np.arange(1, N_TENANTS))))
    raw = shares * total
    sizes = np.maximum(1, np.floor(raw)).astype(int)
    rest = total - sizes.sum()
    sizes[np.argsort(-(raw - np.floor(raw)))[: max(0, rest)]] += 1  # the largest remainders
    return sizes.tolist()


def tenant_name(i: int) -> str:
    """t000, t001, ... (wider when there are more than 1,000 tenants)."""
    return f"t{i:0{max(3, len(str(N_TENANTS - 1)))}d}"


def choose_picks(sizes: list[int]) -> list[tuple[str, int]]:
    """(label, tenant index) of the tenant whose row share is nearest each of --picks (0.5 -> "50pct",
    0.001 -> "0.1pct"; a tenant is picked once), by ascending tenant size: the order of measurement."""
    shares = [n / sum(sizes) for n in sizes]
    taken: list[tuple[str, int]] = []
    for p in PICKS:
        used = {i for _, i in taken}
        i = int(np.argmin([abs(s - p) if i not in used else 9 for i, s in enumerate(shares)]))
        taken.append((f"{p * 100:g}pct", i))
    return sorted(taken, key=lambda li: (sizes[li[1]], li[0]))


class World:
    """The generative model shared by corpus and queries."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
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
        return [" ".join(toks[s:e]) for s, e in zip(ends - lengths, ends)]


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


def generate(seed: int, size: int) -> tuple[World, np.random.Generator, list[int], list[TenantData]]:
    """The corpus of one size: the world, the rng (edges are drawn from it next), tenant sizes, tenants."""
    world, rng, sizes = World(seed), np.random.default_rng(seed + size), tenant_sizes(size)
    return world, rng, sizes, [make_tenant(world, tenant_name(i), n, rng)
                               for i, n in enumerate(tqdm(sizes, desc=f"{size}: generate", leave=False))]


def make_edges(td: TenantData, rng: np.random.Generator) -> list[Edge]:
    """~3 edges per chunk: NEXT within a document, and RELATED to chunks of the same topic (same tenant)."""
    n = len(td.chunk_ids)
    edges = [Edge(td.chunk_ids[i - 1], td.chunk_ids[i], "NEXT")
             for i in range(1, n) if td.doc_ids[i] == td.doc_ids[i - 1]]
    if n < 2:
        return edges
    by_cluster = {int(c): np.flatnonzero(td.clusters == c) for c in np.unique(td.clusters)}
    for s in rng.integers(0, n, size=3 * n - len(edges)):
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
        seeds = [td.chunk_ids[j] for j in rng.choice(len(td.chunk_ids), size=min(3, len(td.chunk_ids)), replace=False)]
        out.append(Query(vecs[i], " ".join(words), seeds))
    return out


def dsn_for(admin_dsn: str, db: str, user: str = "postgres") -> str:
    return f"postgresql://{user}:@/{db}?host={admin_dsn.split('host=', 1)[1]}"


def configure_server(data_dir: Path, admin_dsn: str) -> str:
    """Apply SERVER_SETTINGS (ALTER SYSTEM) and restart the embedded server if one needs it."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name, value in SERVER_SETTINGS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.5)
        pending = conn.execute("SELECT count(*) FROM pg_settings WHERE pending_restart").fetchone()[0]
    if pending:  # start_embedded starts a server this process stopped (its cached handle included)
        stop_embedded(data_dir)
        admin_dsn = start_embedded(data_dir)
    return admin_dsn


class _Sampler:
    """A thread running _run from entering the block to leaving it; _run polls until _stop is set."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class MemorySampler(_Sampler):
    """Samples the summed RSS (and PSS) of the server's postgres processes in a thread.

    PSS means walking every process's page tables (/proc/PID/smaps_rollup): with 2 GB of shared_buffers
    mapped in each backend that took ~6% of both cores during a bulk load's index builds, CPU the server
    being measured lost. So RSS (a counter, /proc/PID/statm) is read every interval and PSS every
    pss_interval; the thread's own CPU time is reported (sampler_cpu_s)."""

    def __init__(self, data_dir: Path, interval: float = 0.5, pss_interval: float = 3.0) -> None:
        super().__init__()
        self.data_dir, self.interval, self.pss_interval, self.phase = data_dir, interval, pss_interval, "setup"
        self.peak_rss: dict[str, int] = {}
        self.peak_pss: dict[str, int] = {}
        self.cpu_s = 0.0

    def _run(self) -> None:
        next_pss = 0.0
        while not self._stop.is_set():
            with suppress(Exception):  # the server restarting, a process gone: the next sample counts
                full = time.monotonic() >= next_pss
                rss = pss = 0
                for p in server_processes(self.data_dir):
                    with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                        if full:
                            mi = p.memory_full_info()
                            rss, pss = rss + mi.rss, pss + getattr(mi, "pss", mi.rss)
                        else:
                            rss += p.memory_info().rss
                ph = self.phase
                self.peak_rss[ph] = max(self.peak_rss.get(ph, 0), rss)
                if full:
                    self.peak_pss[ph] = max(self.peak_pss.get(ph, 0), pss)
                    next_pss = time.monotonic() + self.pss_interval
            self.cpu_s = time.thread_time()
            self._stop.wait(self.interval)

    def report(self) -> dict[str, Any]:
        mb = 1024 * 1024
        return {"peak_rss_mb": round(max(self.peak_rss.values(), default=0) / mb, 1),
                "peak_pss_mb": round(max(self.peak_pss.values(), default=0) / mb, 1),
                "by_phase_rss_mb": {k: round(v / mb, 1) for k, v in self.peak_rss.items()},
                "by_phase_pss_mb": {k: round(v / mb, 1) for k, v in self.peak_pss.items()},
                "sampled_every_s": {"rss": self.interval, "pss": self.pss_interval}, "sampler_cpu_s": round(self.cpu_s, 1)}


class BuildMonitor(_Sampler):
    """What a bulk load's index rebuild is made of: polls pg_stat_progress_create_index and /proc/stat in a
    thread and gives each interval's wall time and CPU to every index building then, by its access method
    (gin, bm25, and hnsw by partition). Builds on several connections (bulk_load(build_workers=N)) overlap,
    so the parts' seconds may add up to more than the rebuild's."""

    def __init__(self, db_dsn: str, interval: float = 0.5) -> None:
        super().__init__()
        self.db_dsn, self.interval = db_dsn, interval
        self.wall: dict[str, float] = {}
        self.busy: dict[str, float] = {}  # core-seconds not idle nor waiting on I/O
        self.total_wall = self.total_busy = 0.0
        self.counting = threading.Event()  # set while the rebuild runs

    def _run(self) -> None:
        text_builds, last_done = 0, -1
        with psycopg.connect(self.db_dsn, autocommit=True) as conn:
            t_prev, (tot_prev, idle_prev) = time.perf_counter(), cpu_seconds()
            while not self._stop.wait(self.interval):
                labels: set[str] = set()
                with suppress(psycopg.Error):
                    # a build's progress row does not name its index (index_relid stays 0): bulk_load's build
                    # workers name their job in application_name ("pyhybrid build <kind> <partition>"); the
                    # resume calls build the text indexes on the parent (GIN, then BM25: partitions_done
                    # starts over) and the HNSW ones a partition at a time
                    for app, query, rel, done in conn.execute(
                            "SELECT a.application_name, a.query, p.relid::regclass::text, p.partitions_done "
                            "FROM pg_stat_progress_create_index p JOIN pg_stat_activity a ON a.pid = p.pid "
                            "WHERE p.datid = (SELECT oid FROM pg_database WHERE datname = current_database())"):
                        if app.startswith("pyhybrid build "):
                            kind, part = app.split()[2:4]
                            labels.add("hnsw " + part.removeprefix("hybrid.") if kind == "hnsw" else kind)
                        elif "resume_text" in query:
                            if done < last_done or text_builds == 0:
                                text_builds += 1
                            last_done = done
                            labels.add({1: "gin", 2: "bm25"}.get(text_builds, f"text index {text_builds}"))
                        elif "resume_vector" in query:
                            labels.add("hnsw " + rel.removeprefix("hybrid."))
                t, (tot, idle) = time.perf_counter(), cpu_seconds()
                dt, busy = t - t_prev, max(0.0, (tot - tot_prev) - (idle - idle_prev))
                t_prev, tot_prev, idle_prev = t, tot, idle
                if not self.counting.is_set():
                    continue  # the load, before the rebuild
                self.total_wall, self.total_busy = self.total_wall + dt, self.total_busy + busy
                for label in labels or {"other (attach, BM25 segments, audit samples)"}:
                    self.wall[label] = self.wall.get(label, 0.0) + dt
                    self.busy[label] = self.busy.get(label, 0.0) + busy

    def report(self) -> dict[str, Any]:
        """Seconds and CPU use (share of all cores, of every build running then) per part: gin, bm25, the
        largest partition's HNSW, the other partitions' HNSW, the rest; and the whole rebuild's."""
        hnsw = {k: v for k, v in self.wall.items() if k.startswith("hnsw ")}
        largest = max(hnsw, key=hnsw.__getitem__, default=None)
        parts: dict[str, list[str]] = {"gin": ["gin"], "bm25": ["bm25"], "hnsw_largest_partition": [largest] if largest else [],
                                       "hnsw_other_partitions": [k for k in hnsw if k != largest],
                                       "other": [k for k in self.wall if not k.startswith("hnsw ") and k not in ("gin", "bm25")]}
        cores, sums = os.cpu_count() or 1, {name: (sum(self.wall.get(k, 0.0) for k in keys), sum(self.busy.get(k, 0.0) for k in keys))
                                            for name, keys in parts.items()}
        out: dict[str, Any] = {name: {"s": round(wall, 1), "cpu_busy_pct": round(100 * busy / (wall * cores), 1) if wall else None}
                               for name, (wall, busy) in {**sums, "all": (self.total_wall, self.total_busy)}.items()}
        out["hnsw_largest_partition"]["partition"] = largest and largest.removeprefix("hnsw ")
        out["sampled_every_s"] = self.interval  # a build shorter than that may count toward its neighbour
        out["overlapping"] = "parts' seconds overlap where builds ran at once (build_workers > 1)"
        return out


def server_info(admin_dsn: str) -> dict[str, Any]:
    """The server's version, the extensions it offers and its settings (the machine is in the result's meta)."""
    names = [*SERVER_SETTINGS, "work_mem", "jit", "max_parallel_workers_per_gather", "max_parallel_maintenance_workers",
             "synchronous_commit", "shared_preload_libraries"]
    with psycopg.connect(admin_dsn) as conn:
        return {"postgres": conn.execute("SELECT version()").fetchone()[0],
                "extensions_available": dict(conn.execute("SELECT name, default_version FROM pg_available_extensions "
                                                          "WHERE name IN ('vector','age','pg_textsearch')").fetchall()),
                "server_settings": dict(conn.execute("SELECT name, setting || coalesce(unit, '') FROM pg_settings "
                                                     "WHERE name = ANY(%s)", (names,)).fetchall())}


# main sets them: --writers, --load-streams, --build-workers, --ef-search (None: the engine's), --no-pg-textsearch (False)
WRITERS, LOAD_STREAMS, BUILD_WORKERS, EF_SEARCH, TEXTSEARCH = 1, 1, 2, None, None


def setup_database(admin_dsn: str, db: str, size: int) -> tuple[str, list[float]]:
    """A fresh database with the engine installed and N_TENANTS tenants: its DSN, the ms of each create_tenant."""
    fresh_database(admin_dsn, db, APP_ROLE)
    db_dsn, create_ms = dsn_for(admin_dsn, db), []
    migrate.upgrade(db_dsn, pg_textsearch=TEXTSEARCH)
    with psycopg.connect(db_dsn, autocommit=True) as conn:  # each tenant placed as maintenance.place_tenants leaves it
        limit = int(conn.execute("SELECT coalesce((SELECT value FROM hybrid.setting WHERE key = k.key), k.default_value) "
                                 "FROM hybrid.setting_keys() k WHERE k.key = 'pool_max_chunks'").fetchone()[0])
        for i, rows in enumerate(tenant_sizes(size)):
            t_c = time.perf_counter()
            conn.execute("SELECT hybrid.create_tenant(%s, NULL, %s)", (tenant_name(i), "dedicated" if rows > limit else "pool"))
            create_ms.append((time.perf_counter() - t_c) * 1000.0)
        conn.execute("SELECT hybrid.grant_app(%s)", (APP_ROLE,))
        if EF_SEARCH is not None:
            conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(EF_SEARCH),))
    return db_dsn, create_ms


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
AB_SQL = (f"SELECT * FROM hybrid_retrieve(query_embedding => %s::vector, query_text => %s, graph_seeds => %s::text[], top_k => {TOP_K}, "
          f"rrf_k => {RRF_K}, vector_weight => {WEIGHTS.vector}, keyword_weight => {WEIGHTS.keyword}, graph_weight => {WEIGHTS.graph})")
NAIVE_KNN_SQL = "SELECT chunk_id FROM hybrid.chunk WHERE NOT superseded ORDER BY embedding <=> %s::vector LIMIT 10"


class Runner:
    """Runs each method for one query as the app role; returns (seconds, rows)."""

    def __init__(self, client: Any, tenant_id: str) -> None:
        self.client, self.tenant_id, self.loop, self.aclient, self.parallel_ran = client, tenant_id, None, None, 0

    def _rows(self, stmt: str, params: Any, setup: str = SET_TENANT) -> list[Any]:
        with self.client.connection() as conn, conn.transaction():
            conn.execute(setup, (self.tenant_id,))
            return conn.execute(stmt, params).fetchall()

    def _branch(self, stmt: str, params: Callable[[], Any], setup: str = SET_TENANT) -> tuple[float, int]:
        """The time of one statement for the tenant, its parameters (a query vector's literal) made inside it."""
        t0 = time.perf_counter()
        n = len(self._rows(stmt, params(), setup))
        return time.perf_counter() - t0, n

    def dense(self, q: Query) -> tuple[float, int]:
        return self._branch(DENSE_SQL, lambda: (vector_literal(q.vector), PER_SOURCE_K))

    def lexical_bm25(self, q: Query) -> tuple[float, int]:
        return self._branch(LEXICAL_SQL, lambda: (q.text, PER_SOURCE_K))

    def forced(self, method: str, q: Query) -> tuple[float, int]:  # --bm25-ab: a BM25 scorer forced (BM25_AB)
        name, value = BM25_AB[method]
        if method.startswith("hybrid"):
            return self.hybrid_retrieve(q, f"SELECT set_config('hybrid.{name}', '{value}', true)")
        return self._branch(LEXICAL_SQL, lambda: (q.text, PER_SOURCE_K), SET_TENANT + f", set_config('hybrid.{name}', '{value}', true)")

    def graph(self, q: Query) -> tuple[float, int]:
        return self._branch(GRAPH_SQL, lambda: (q.seeds, PER_SOURCE_K))

    def hybrid_retrieve(self, q: Query, setup: str = "") -> tuple[float, int]:
        t0 = time.perf_counter()
        with self.client.tenant(self.tenant_id) as t:
            if setup:
                t.conn.execute(setup)
            refs = t.retrieve(**self.kwargs(q))
        return time.perf_counter() - t0, len(refs)

    def kwargs(self, q: Query) -> dict[str, Any]:
        return dict(query_embedding=q.vector, query_text=q.text, graph_seeds=q.seeds, top_k=TOP_K, rrf_k=RRF_K,
                    vector_weight=WEIGHTS.vector, keyword_weight=WEIGHTS.keyword, graph_weight=WEIGHTS.graph)

    def aio(self, q: Query, parallel: bool) -> tuple[float, int]:
        from pyhybrid import AsyncHybridClient, _parallel
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            real = getattr(_parallel.retrieve, "__wrapped__", _parallel.retrieve)  # not an earlier runner's wrapper
            self.aclient = self.loop.run_until_complete(AsyncHybridClient(self.client.dsn, pool=True, max_size=4).open())
            async def counted(*a: Any) -> Any:  # parallel=True calls that ran parallel (not the one call instead)
                rows, self.parallel_ran = await real(*a), self.parallel_ran + 1
                return rows
            counted.__wrapped__ = real  # type: ignore[attr-defined]
            _parallel.retrieve = counted
        t0 = time.perf_counter()
        async def go() -> list[Any]:
            async with self.aclient.tenant(self.tenant_id, read_only=True) as t:
                # dense + lexical: a call with the graph makes the one call (graph hits score from their seeds)
                return await t.retrieve(parallel=parallel, **{**self.kwargs(q), "graph_seeds": None})
        refs = self.loop.run_until_complete(go())
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
        return self._branch(PGVECTOR_RRF_SQL, lambda: {"embedding": vector_literal(q.vector), "query": q.text, "k": RRF_K})

    def dense_ids(self, q: Query, stmt: str = DENSE_SQL, k: int | None = TOP_K) -> list[str]:
        v = vector_literal(q.vector)
        return [r["chunk_id"] for r in self._rows(stmt, (v, k) if k is not None else (v,))]


def exact_top(td: TenantData, q: Query, k: int) -> set[str]:
    """The ids of the k chunks of td nearest q by exact cosine (numpy)."""
    return {td.chunk_ids[j] for j in np.argpartition(-(td.vectors @ (q.vector / np.linalg.norm(q.vector))), k - 1)[:k]}


def measure_tenant(client: Any, td: TenantData, queries: list[Query], warmup: list[Query], bar: tqdm, budget_s: float) -> dict[str, Any]:
    run = Runner(client, td.tenant_id)
    fns: dict[str, Callable[[Query], tuple[float, int]]] = {
        m: partial(run.forced, m) if m in BM25_AB else getattr(run, m, None) or partial(run.aio, parallel=m == "aio_parallel")
        for m in METHODS}
    for q in warmup:
        for m in METHODS:
            fns[m](q)
        bar.update(1)
    ms: dict[str, list[float]] = {m: [] for m in METHODS}
    rows: dict[str, list[int]] = {m: [] for m in METHODS}
    # methods interleaved per query in a seeded random order, so background load and a query's cold pages hit them
    spent = {m: 0.0 for m in METHODS}  # alike (a fixed rotation left hybrid_retrieve the first to read them on 4 of 9)
    for i, q in enumerate(queries):
        order = [METHODS[j] for j in np.random.default_rng(i).permutation(len(METHODS))]
        for m in order:
            if spent[m] > budget_s:  # a method this slow stops early; its n says how many ran
                continue
            el, n = fns[m](q)
            spent[m] += el
            ms[m].append(el * 1000.0)
            rows[m].append(n)
        bar.update(1)
    out = {m: summarize(ms[m], rows[m]) for m in METHODS}
    out["branch_sum"] = summarize([a + b + c for a, b, c in zip(ms["dense"], ms["lexical_bm25"], ms["graph"])], [])
    out["branch_max"] = summarize([max(a, b, c) for a, b, c in zip(ms["dense"], ms["lexical_bm25"], ms["graph"])], [])
    if run.loop is not None:  # --parallel
        out["aio_parallel"]["parallel_ran_incl_warmup"] = run.parallel_ran
        run.loop.run_until_complete(run.aclient.close())
    out["_raw_ms"] = {m: [round(x, 3) for x in ms[m]] for m in METHODS}

    # dense recall@10 against exact search over the tenant's vectors
    recalls, naive, naive_rows = [], [], []  # search_dense's recall, the naive statement's and its rows
    naive_spent, k = 0.0, min(TOP_K, len(td.chunk_ids))
    for q in queries:
        exact = exact_top(td, q, k)
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
        "search_dense_mean": round(statistics.fmean(recalls), 4), "search_dense_min": round(min(recalls), 4),
        "search_dense_p05": round(pct(recalls, 5), 4), "search_dense_zero_recall_queries": sum(1 for r in recalls if r == 0),
        "naive_hnsw_under_rls_mean": round(statistics.fmean(naive), 4), "naive_hnsw_under_rls_min": round(min(naive), 4),
        "naive_hnsw_rows_mean": round(statistics.fmean(naive_rows), 2),
        "naive_hnsw_zero_row_queries": sum(1 for n in naive_rows if n == 0), "naive_hnsw_queries": len(naive),
        "naive_hnsw_ms_mean": round(1000 * naive_spent / max(1, len(naive)), 2)}
    return out


def engine_ab(args: argparse.Namespace, db_dsn: str, app_dsn: str, picks: list[tuple[str, TenantData]], world: World,
              qrng: np.random.Generator) -> dict[str, Any]:
    """--engine-ab DIR: hybrid_retrieve of DIR's engine (A) against this checkout's (B), each installed by its own
    pyhybrid.migrate (the later head first downgraded to the other's) by round, ABBA; a round warms up on --warmup
    queries a tenant, then times the same --queries, tenants alternating. Every query's rows are compared."""
    trees = {"A": args.engine_ab.resolve(), "B": Path(migrate.__file__).resolve().parent.parent}
    def migrate_as(e: str, code: str) -> str:  # engine e's pyhybrid.migrate, in a process of its own run from its tree
        return subprocess.run([sys.executable, "-c", f"import psycopg; from pyhybrid import migrate; assert migrate.__file__.startswith("
                               f"{str(trees[e])!r}); dsn = {db_dsn!r}; {code}"], env={**os.environ, "PYTHONPATH": str(trees[e])},
                              cwd=trees[e], check=True, capture_output=True, text=True).stdout
    heads = {e: migrate_as(e, "print(migrate.head_revision())").strip() for e in "AB"}
    def install(e: str, now: str) -> str:  # the later head's migrate takes its revisions off first, then e's installs its own
        if heads[now] > heads[e]:
            migrate_as(now, f"migrate.downgrade(dsn, revision={heads[e]!r})")
        assert migrate_as(e, "migrate.upgrade(dsn); print(migrate.is_current(psycopg.connect(dsn)))").strip() == "True", e
        return e
    qs = {label: [(vector_literal(q.vector), q.text, q.seeds) for q in make_queries(world, td, args.warmup + args.queries, qrng)]
          for label, td in picks}
    ms: dict[tuple[str, str], list[list[float]]] = {(label, e): [] for label in qs for e in "AB"}
    rows: dict[tuple[str, int, str], set[Any]] = {(label, i, e): set() for label in qs for i in range(args.queries) for e in "AB"}
    rounds: list[dict[str, Any]] = []
    now = "B"  # the engine installed
    try:
        for r in range(args.rounds):
            e, was, t0 = "AB"[(r + 1) // 2 % 2], now, time.perf_counter()  # A B B A A B B A ...
            now = install(e, now)  # every round: e's upgrade checks the database is at its revision and SQL
            rounds.append({"engine": e, "switched": e != was, "install_s": round(time.perf_counter() - t0, 1)})
            for label in qs:
                ms[(label, e)].append([])
            with connect(app_dsn) as client:
                for i in range(-args.warmup, args.queries):
                    for label, td in picks[:: -1 if i % 2 else 1]:
                        runner, t0 = Runner(client, td.tenant_id), time.perf_counter()
                        got = runner._rows(AB_SQL, qs[label][i + args.warmup])
                        if i >= 0:
                            ms[(label, e)][-1].append(1000.0 * (time.perf_counter() - t0))
                            rows[(label, i, e)].add(tuple((x["chunk_id"], x["score"]) for x in got))  # ids and scores
            rounds[-1].update({f"{label}_p50_ms": round(pct(ms[(label, e)][-1], 50), 3) for label in qs}, loadavg=os.getloadavg(), control_ms=control_ms())
            print(f"engine_ab round {r}: {rounds[-1]}", file=sys.stderr)
    finally:
        install("B", now)
    out: dict[str, Any] = {"a": str(trees["A"]), "b": str(trees["B"]), "heads": heads, "rounds": rounds, "queries_compared": len(rows) // 2,
                           "queries_rows_differ": sum(len(rows[k] | rows[(*k[:2], "B")]) > 1 for k in rows if k[2] == "A")}
    for label in qs:
        a, b = (dict[str, Any](summarize([x for rnd in ms[(label, e)] for x in rnd]), round_p50_ms=[round(pct(x, 50), 3) for x in ms[(label, e)]],
                               round_p95_ms=[round(pct(x, 95), 3) for x in ms[(label, e)]]) for e in "AB")
        out.update({f"{label} A": a, f"{label} B": b, f"{label} B/A": {k: round(b[k] / a[k], 3) for k in ("p50_ms", "p95_ms", "mean_ms")}})
        # B's median over A's in each pair of rounds (A B, B A, ...), the two beside each other in time
        out[f"{label} B/A"]["round_pairs_p50"] = [round(y / x, 3) for x, y in zip(a["round_p50_ms"], b["round_p50_ms"])]
    return out


def index_kinds(db_dsn: str, app_dsn: str, td: TenantData, queries: list[Query], kinds: list[str],
                ivfflat_probes: int | None = None) -> dict[str, Any]:
    """--index-kinds: the dense index kinds of hybrid._dense_kind side by side on td's partition, each built there
    (the engine's HNSW set aside; the HNSW kinds as dense as hybrid._hnsw_density gives the partition) and searched
    by the engine's statement for it (hybrid._dense_statement) as the app role, without the dense audit, kinds
    interleaved per query; recall@10 against exact numpy search."""
    out: dict[str, Any] = {}
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        key, part, ef = conn.execute("SELECT k, hybrid._chunk_partition(k)::text, hybrid._dense_plan(k, NULL, NULL, NULL, %s) "
                                     "FROM hybrid._tenant_key(%s) k", (PER_SOURCE_K, td.tenant_id)).fetchone()
        rows, m, efc = conn.execute(f"SELECT n, d.m, d.ef_construction FROM (SELECT count(*) AS n FROM {part} "
                                    "WHERE NOT superseded) c, hybrid._hnsw_density(c.n) d").fetchone()
        # IVFFlat as the engine builds it (hybrid._ivfflat_lists; below ivfflat_rows, where it builds HNSW, by the same
        # rule) and searches it (setting ivfflat_probes, unless --ivfflat-probes)
        lists, probes = conn.execute(
            "SELECT coalesce(hybrid._ivfflat_lists(%s), ceil(sqrt(2 * %s))::integer), coalesce((SELECT value FROM "
            "hybrid.setting WHERE key = 'ivfflat_probes'), (SELECT default_value FROM hybrid.setting_keys() WHERE key = "
            "'ivfflat_probes'))::integer", (rows, rows)).fetchone()
        probes = ivfflat_probes or probes
        conn.execute("SELECT hybrid.suspend_vector_index()")
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                     (f"{conn.execute('SELECT hybrid._hnsw_build_memory(%s, %s)', (rows, m)).fetchone()[0] // 1024}kB",))
        # diskann: vectorscale's StreamingDiskANN on l2_normalize() (the same order; an index the vector kind cannot
        # pick), its SBQ candidates re-ranked by the statement as bit's are (rescoring from an expression panics in 0.9).
        # ivfflat: the engine's index for large partitions on the same normalized vectors by inner product (the cosine
        # order again, under an operator no other kind's index serves), probes lists scanned, iteratively
        for k in kinds:
            base = "vector" if k in ("diskann", "ivfflat") else k
            key_sql, stmt = conn.execute("SELECT hybrid._dense_index_key(%s, %s), hybrid._dense_statement(%s, %s)", (DIM, base, base, DIM)).fetchone()
            method, params, built_with = "hnsw", f"WITH (m = {m}, ef_construction = {efc})", f"m {m}, ef_construction {efc}"
            if k == "diskann":
                conn.execute("CREATE EXTENSION IF NOT EXISTS vectorscale")
                key_sql, stmt = f"(l2_normalize(embedding)::vector({DIM})) vector_cosine_ops", stmt.replace(
                    "BY c.embedding <=>", f"BY l2_normalize(c.embedding)::vector({DIM}) <=>")
                method, params, built_with = "diskann", "", "vectorscale defaults"
            elif k == "ivfflat":
                key_sql, stmt = f"(l2_normalize(embedding)::vector({DIM})) vector_ip_ops", stmt.replace(
                    "BY c.embedding <=>", f"BY l2_normalize(c.embedding)::vector({DIM}) <#>")
                method, params, built_with = "ivfflat", f"WITH (lists = {lists})", f"lists {lists}, probes {probes}"
            t0, (tot0, idle0) = time.perf_counter(), cpu_seconds()
            conn.execute(f"CREATE INDEX bench_{k} ON {part} USING {method} ({key_sql}) {params} WHERE NOT superseded")
            (tot, idle), build_s = cpu_seconds(), round(time.perf_counter() - t0, 1)
            out[k] = {"build_s": build_s, "build_core_s": round((tot - tot0) - (idle - idle0), 1), "ms": [], "recall": [], "ef_search": ef, "statement": stmt,
                      "built_with": built_with, "rows": rows,
                      "size_mb": round(conn.execute(f"SELECT pg_relation_size('hybrid.bench_{k}') / 1048576.0::float8").fetchone()[0], 1)}
    with psycopg.connect(app_dsn) as conn:
        for i, q in enumerate(queries):
            exact = exact_top(td, q, TOP_K)
            for k in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:
                t0 = time.perf_counter()
                with conn.transaction():
                    conn.execute("SELECT set_config('hybrid.tenant_id', %s, true), set_config('hnsw.ef_search', %s, true), "
                                 "set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('enable_sort', 'off', true), "
                                 "set_config('diskann.query_search_list_size', %s, true), set_config('diskann.query_rescore', %s, true), "
                                 "set_config('ivfflat.probes', %s, true), set_config('ivfflat.iterative_scan', 'relaxed_order', true)",
                                 (td.tenant_id, str(ef), str(ef), "0", str(probes)))
                    got = [r[0] for r in conn.execute(re.sub(r"\$(\d)", r"%(p\1)s", out[k]["statement"]), dict(  # search_dense's values
                        p1=vector_literal(q.vector), p2=key, p3=td.tenant_id, p4=[], p5=True, p6=None, p7=None, p8=PER_SOURCE_K,
                        p9=PER_SOURCE_K if k not in ("bit", "diskann") else max(ef, 4 * PER_SOURCE_K))).fetchall()]
                out[k]["ms"].append(1000 * (time.perf_counter() - t0))
                out[k]["recall"].append(len(exact & set(got[:TOP_K])) / TOP_K)
    with psycopg.connect(db_dsn, autocommit=True) as conn:  # the engine's index back
        conn.execute("DROP INDEX " + ", ".join(f"hybrid.bench_{k}" for k in kinds) + "; DROP EXTENSION IF EXISTS vectorscale; "
                     "SELECT hybrid.resume_vector_index()")
    return {k: {**summarize(v.pop("ms"), []), "recall_at_10_mean": round(statistics.fmean(v["recall"]), 4),
                "recall_at_10_min": min(v["recall"]), "zero_recall_queries": v.pop("recall").count(0.0), **v}
            for k, v in out.items()}


def doc_batches(td: TenantData, batch: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of about batch chunks that never split a document: ingesting a document
    again supersedes its chunks missing from the new batch, so a split document would lose chunks."""
    n, lo = len(td.doc_ids), 0
    ends = [0] + [i for i in range(1, n) if td.doc_ids[i] != td.doc_ids[i - 1]] + [n]  # where documents end
    while lo < n:  # the last end within batch chunks, else (a document longer than a batch goes in whole) the next
        hi = ends[bisect_right(ends, lo + batch) - 1]
        hi = hi if hi > lo else ends[bisect_right(ends, lo)]
        yield lo, hi
        lo = hi


def ingest_all(client: Any, db_dsn: str, tenants: list[TenantData], size: int, bulk: bool, batch: int, mem: MemorySampler) -> dict[str, Any]:
    """Every tenant's chunks through TenantSession.ingest as the app role, batches cut at document
    boundaries; with bulk, inside HybridClient(admin).bulk_load() (HNSW, GIN, BM25 dropped, rebuilt on exit).
    Returns the load's seconds and CPU use and, with bulk, the rebuild's, by part."""
    hnsw_check = "SELECT to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL AS present"
    out: dict[str, Any] = {"hnsw_present_during_load": True}
    with (connect(db_dsn) if bulk else nullcontext()) as admin, (BuildMonitor(db_dsn) if bulk else nullcontext()) as builds:
        t0 = time.perf_counter()
        with (admin.bulk_load(build_workers=BUILD_WORKERS) if bulk else nullcontext()):
            if bulk:
                with admin.connection() as c, c.transaction():  # not left open: resume would be a savepoint in it
                    out["hnsw_present_during_load"] = c.execute(hnsw_check).fetchone()["present"]
            with tqdm(total=size, desc=f"{size}: ingest", unit="chunk", leave=False) as bar:
                def load(td: TenantData) -> None:  # pyhybrid ingest's path for pre-embedded records (--writers at once)
                    recs = ({"chunk_id": td.chunk_ids[j], "document_id": td.doc_ids[j], "content": td.texts[j],
                             "embedding": td.vectors[j], "position": int(td.positions[j]), "metadata": {
                                 "title": f"{td.doc_ids[j]} part {int(td.positions[j])}", "topic": int(td.clusters[j])}}
                            for j in range(len(td.chunk_ids)))
                    r = ingest_records(client.dsn, td.tenant_id, "main", recs, batch_size=batch, quiet=True, writers=WRITERS)
                    assert r["inserted"] == len(td.chunk_ids) and r["superseded"] == 0, r
                    bar.update(len(td.chunk_ids))

                # --load-streams tenants at once (one ingest each, as separate `pyhybrid ingest` runs would),
                # the largest first: a small tenant is one batch, which --writers alone cannot spread
                cpu0 = cpu_seconds()
                with ThreadPoolExecutor(LOAD_STREAMS) as pool:
                    for f in [pool.submit(load, td) for td in tenants]:
                        f.result()
                cpu1 = cpu_seconds()
            t_loaded = time.perf_counter()
            # the load's CPU use, as a share of all cores (not idle nor waiting on I/O; client and server)
            out["load_cpu_busy_pct"] = round(100 * ((cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1])) /
                                             ((cpu1[0] - cpu0[0]) or 1), 1)
            if bulk:
                mem.phase = "hnsw_rebuild"
                print(f"{size}: loaded in {t_loaded - t0:.1f} s; rebuilding the indexes", file=sys.stderr)
                builds.counting.set()  # until bulk_load() has rebuilt them, on leaving its block
        t_built = time.perf_counter()
        if bulk:
            builds.counting.clear()
            with admin.connection() as c, c.transaction():
                out["hnsw_present_after_load"] = c.execute(hnsw_check).fetchone()["present"]
    out["ingest_s"] = t_loaded - t0
    if bulk:
        out.update(index_builds=builds.report(), index_rebuild_s=t_built - t_loaded, bulk_load_total_s=t_built - t0)
        print(f"{size}: HNSW, GIN and BM25 rebuilt in {t_built - t_loaded:.1f} s", file=sys.stderr)
    return out


def index_state(dsn: str) -> tuple[list[Any], int]:
    """Every index of hybrid.chunk and its partitions as the catalog defines it, and the BM25 segment records."""
    with psycopg.connect(dsn) as c:
        return c.execute("""SELECT i.relname, pg_get_indexdef(i.oid), coalesce(array_to_string(i.reloptions, ','), '')
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid IN (SELECT relid FROM
            pg_partition_tree('hybrid.chunk')) ORDER BY 1""").fetchall(), c.execute("SELECT count(*) FROM hybrid.bm25_merged").fetchone()[0]


def run_size(args: argparse.Namespace, admin_dsn: str, size: int) -> dict[str, Any]:
    t_start = time.perf_counter()
    db = f"bench_latency_{size}"
    res: dict[str, Any] = {"size": size, "database": db}
    timings: dict[str, float] = {}
    resume = size in (args.resume or [])
    with MemorySampler(args.data_dir) as mem:
        t0 = time.perf_counter()
        res["engine"] = engine_state()  # what migrate just installed
        if resume:  # the complete database a --keep-db run left
            db_dsn = dsn_for(admin_dsn, db)
            migrate.upgrade(db_dsn)  # the engine measured is the checkout's, not the one the database was built with
            with psycopg.connect(db_dsn) as conn:
                have = conn.execute("SELECT count(*) FROM hybrid.chunk WHERE NOT superseded").fetchone()[0]
            if have != size:
                raise RuntimeError(f"--resume {size}: {db} holds {have} live chunks, not {size}")
        else:
            t_c = time.perf_counter()
            db_dsn, create_ms = setup_database(admin_dsn, db, size)
            timings["create_tenants_s"] = time.perf_counter() - t_c
            res["create_tenant"] = {"tenants": len(create_ms), "calls_total_s": round(sum(create_ms) / 1000.0, 3), "p50_ms": round(pct(create_ms, 50), 2),
                                    "p95_ms": round(pct(create_ms, 95), 2), "max_ms": round(max(create_ms), 2), "mean_ms": round(statistics.fmean(create_ms), 2),
                                    "first_ms": round(create_ms[0], 2), "last_ms": round(create_ms[-1], 2)}
        timings["setup_s"] = time.perf_counter() - t0
        res["versions"] = installed_versions(db_dsn)
        app_dsn = dsn_for(admin_dsn, db, APP_ROLE)

        mem.phase = "generate"
        t0 = time.perf_counter()
        world, rng, sizes, tenants = generate(args.seed, size)
        edges = {td.tenant_id: make_edges(td, rng) for td in tenants}
        timings["generate_s"] = time.perf_counter() - t0
        chosen = choose_picks(sizes)
        res["tenants"] = {"count": len(sizes), "smallest_chunks": min(sizes), "sizes": sizes, "picks": {
            label: {"tenant_id": tenants[i].tenant_id, "chunks": sizes[i], "share": round(sizes[i] / size, 5)} for label, i in chosen}}
        n_edges = sum(len(e) for e in edges.values())

        # ingest through the API, as the app role: with every index present (the normal path), or for
        # sizes >= --bulk-above inside HybridClient(admin).bulk_load() (HNSW, GIN, BM25 dropped, rebuilt on exit)
        bulk = bool(args.bulk_above) and size >= args.bulk_above
        if resume:  # a --keep-db run's complete database: nothing is loaded, so no ingest figures
            res["resumed"] = True
            if args.rebuild:  # its indexes dropped and built again as a bulk load ends: a fresh build to measure
                mem.phase, before = "rebuild", index_state(db_dsn)
                with connect(app_dsn) as client:
                    built = ingest_all(client, db_dsn, [], size, True, args.batch, mem)
                timings["rebuild_s"] = built["index_rebuild_s"]
                res["rebuild"] = {"build_workers": BUILD_WORKERS, "s": round(built["index_rebuild_s"], 1),
                                  "same_indexes_as_before": index_state(db_dsn) == before, "index_builds": built["index_builds"]}
        else:
            mem.phase = "ingest"
            n_batches = sum(len(list(doc_batches(td, args.batch))) for td in tenants)
            with connect(app_dsn) as client:
                load = ingest_all(client, db_dsn, tenants, size, bulk, args.batch, mem)
                mem.phase = "edges"
                t0 = time.perf_counter()
                added = submitted = 0
                with tqdm(total=n_edges, desc=f"{size}: edges", unit="edge", leave=False) as bar:
                    for td in tenants:
                        for part in (edges[td.tenant_id][i:i + 3 * args.batch] for i in range(0, len(edges[td.tenant_id]), 3 * args.batch)):
                            with client.tenant(td.tenant_id) as t:
                                added += t.add_edges(part).edges_added
                            submitted += len(part)
                            bar.update(len(part))
                timings["edges_s"] = time.perf_counter() - t0
            timings.update({k: load[k] for k in ("ingest_s", "index_rebuild_s", "bulk_load_total_s") if k in load})
            res["ingest"] = {
                "chunks": size, "batches": n_batches, "chunks_per_s": round(size / load["ingest_s"], 1),
                "edges_submitted": submitted, "edges_generated": n_edges, "edges_added": added,
                "edges_per_s": round(submitted / timings["edges_s"], 1) if timings["edges_s"] > 0 else None,
                "bulk_load": bulk, "hnsw_present_during_load": load["hnsw_present_during_load"],
                "load_cpu_busy_pct": load["load_cpu_busy_pct"]}
            if bulk:
                res["ingest"].update(hnsw_present_after_load=load["hnsw_present_after_load"], load_only_chunks_per_s=res["ingest"]["chunks_per_s"],
                                     index_rebuild_s=round(load["index_rebuild_s"], 2), index_builds=load["index_builds"],
                                     load_plus_rebuild_chunks_per_s=round(size / load["bulk_load_total_s"], 1))

        mem.phase = "analyze"
        t0 = time.perf_counter()
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) hybrid.chunk, hybrid.graph_node")
            conn.execute("ANALYZE")
            # summed over the partition tree: a partitioned table or index has no storage of its own
            tree = "(SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree(to_regclass('hybrid.chunk_{}'))) / 1048576.0".format
            res["storage"] = {k: round(float(v or 0), 1) for k, v in conn.execute(f"""
                SELECT 'table_mb', (SELECT sum(pg_table_size(relid)) FROM pg_partition_tree('hybrid.chunk')) / 1048576.0
                UNION ALL SELECT 'hnsw_mb', {tree('embedding_hnsw')}
                UNION ALL SELECT 'ivfflat_mb', (SELECT sum(pg_relation_size(i.oid)) FROM pg_class i JOIN pg_am a
                    ON a.oid = i.relam WHERE a.amname = 'ivfflat' AND i.relnamespace = 'hybrid'::regnamespace) / 1048576.0
                UNION ALL SELECT 'bm25_mb', {tree('content_bm25')} UNION ALL SELECT 'gin_mb', {tree('tsv_gin')}
                UNION ALL SELECT 'database_mb', pg_database_size(current_database()) / 1048576.0""").fetchall()}
        timings["vacuum_analyze_s"] = time.perf_counter() - t0
        if args.bm25_ab:  # the measured tenants' BM25 indexes in one segment: search_lexical takes the scan's scores
            t0, res["bm25_merge"] = time.perf_counter(), [vars(a) for a in merge_bm25(db_dsn, [tenants[i].tenant_id for _, i in chosen])]
            timings["bm25_merge_s"] = time.perf_counter() - t0

        # queries, as the app role acting for a tenant (RLS applies)
        mem.phase = "queries"
        qrng = np.random.default_rng(args.seed + 7 * size + 1)
        lat: dict[str, Any] = {}
        t0 = time.perf_counter()
        picks = [(label, tenants[i]) for label, i in chosen]
        total_steps = sum(args.warmup + 2 * args.queries for _ in picks)
        if args.engine_ab:
            res["engine_ab"] = engine_ab(args, db_dsn, app_dsn, picks, world, qrng)
        with connect(app_dsn) as client, tqdm(total=total_steps, desc=f"{size}: queries", unit="q", leave=False) as bar:
            for label, td in ([] if args.engine_ab else picks):  # --engine-ab: hybrid_retrieve alone, above
                qs = make_queries(world, td, args.queries + args.warmup, qrng)
                lat[label] = measure_tenant(client, td, qs[args.warmup:], qs[: args.warmup], bar, args.method_budget_s)
                lat[label].update(tenant_id=td.tenant_id, chunks=len(td.chunk_ids), control_ms_after=control_ms())
        timings["queries_s"] = time.perf_counter() - t0
        res["latency"] = lat
        if args.index_kinds:
            mem.phase = "index_kinds"
            res["index_kinds"] = index_kinds(db_dsn, app_dsn, picks[-1][1], make_queries(world, picks[-1][1], args.queries, qrng),
                                             args.index_kinds, args.ivfflat_probes)
        if args.explain:
            mem.phase = "explain"
            try:  # a report that cannot be written (the engine's statements changed shape) keeps the run's figures
                res["explain_file"] = str(write_explain(args, size, app_dsn, db_dsn, picks, world))
            except Exception as exc:
                traceback.print_exc()
                res["explain_error"] = f"{type(exc).__name__}: {exc}"

        # index build times (after the queries, which ran on the incrementally built index)
        if not args.skip_reindex:
            mem.phase = "reindex"
            with psycopg.connect(db_dsn, autocommit=True) as conn:
                # none after a bulk load: bulk_load() just built them (index_rebuild_s)
                for name, idx in ([] if bulk else [("hnsw", "hybrid.chunk_embedding_hnsw"), ("gin_tsv", "hybrid.chunk_tsv_gin")]
                                  + ([("bm25", "hybrid.chunk_content_bm25")] if TEXTSEARCH is None else [])):
                    t0 = time.perf_counter()
                    conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.SQL(idx)))
                    timings[f"reindex_{name}_s"] = time.perf_counter() - t0
    res["memory"] = mem.report()
    timings["total_s"] = time.perf_counter() - t_start
    res["timings"] = {k: round(v, 2) for k, v in timings.items()}
    if not args.keep_db and not resume:  # a resumed database is never dropped: it took the build to make
        drop_databases(admin_dsn, [db])
    return res


ENGINE_VARIABLES = {
    "query_embedding": "%(v)s::vector", "query_text": "%(t)s", "v_query": "hybrid._or_tsquery(%(t)s)",
    "top_k": "%(k)s", "corpus_ids": "NULL::text[]", "filter": "NULL::jsonb", "cap": "%(threshold)s",
    "v_tenant": "%(tenant)s", "v_acl": "%(acl)s::text[]", "v_all": "%(all)s",
    "v_key": "%(key)s::integer", "_scope_size.tenant_key": "%(key)s::integer",
    "v_types": "NULL::oid[]", "v_front": "%(seeds)s::text[]", "v_pos": "%(pos)s::integer[]", "v_visited": "%(seeds)s::text[]",
    "per_document": "false", "with_graph_context": "false", "skip": "0", "siblings": "0", "v_kind": "%(kinds)s::text[]",
    "ids": "%(f)s::text[]", "drs": "%(fdr)s::integer[]", "lrs": "%(flr)s::integer[]", "grs": "NULL::integer[]",
    "gvs": "NULL::integer[]", **dict.fromkeys(["scores", "dvs", "lvs"], "%(fv)s::float8[]"), "p_key": "%(key)s::integer",
    "p_tenant": "%(tenant)s", "p_acl": "%(acl)s::text[]", "p_all": "%(all)s",
    # hybrid._lexical_hits's term count for hybrid.retrieve: the query's distinct terms
    "terms": "tsvector_to_array(to_tsvector('english'::regconfig, %(t)s))"}


def engine_statements(conn: psycopg.Connection[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(title, statement, settings) for each statement the installed branch functions and hybrid.retrieve run."""
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
        m = re.match(r"EXECUTE format\(\$sql\$(.*)\$sql\$,(.*)\)\s+USING\s+(.*)$", stmt, re.S)
        if m is None:
            return stmt
        body, fargs, using = m.group(1), top_level(m.group(2)), [u.strip() for u in m.group(3).split(",")]
        # the score expression: __BM25_SCORE__, the one search_lexical chose for the query (hybrid.bm25_scores:
        # the scan's own scores on a one-segment index, else re-scored with <@>)
        names = {"index_name": "__BM25_INDEX__", "hybrid._chunk_partition(p_key)": "__PARTITION__"}
        subs = [names.get(a, "__BM25_SCORE__") for a in fargs]
        it = iter(subs)  # %s in order, or %n$s for the n-th argument
        body = re.sub(r"%(?:(\d+)\$)?[LsI]", lambda g: subs[int(g.group(1)) - 1] if g.group(1) else next(it), body)
        return re.sub(r"\$(\d+)", lambda g: using[int(g.group(1)) - 1], body)

    def top_level(args: str) -> list[str]:
        """format()'s arguments: split at the commas outside parentheses and quotes."""
        out, depth, quoted, cur = [], 0, False, ""
        for ch in args:
            quoted = not quoted if ch == "'" else quoted
            depth += 0 if quoted else (ch == "(") - (ch == ")")
            if ch == "," and depth == 0 and not quoted:
                out, cur = out + [cur.strip()], ""
            else:
                cur += ch
        return out + [cur.strip()]

    def hydrate_statement(src: str) -> str:
        # v_read constant text := $r$ <the read> $r$; ... RETURN QUERY EXECUTE format($q$ ... %s, %s ... (%s ...) ...
        # $q$, <graph context>, <siblings>, CASE WHEN per_document THEN ... ELSE v_read || '<order>' END) USING p_key,
        # ...: no graph context and no siblings (the defaults: NULL columns), the plain read spliced in, $n as the
        # USING expressions
        read = re.search(r"v_read constant text := \$r\$(.*?)\$r\$;", src, re.S)
        m = re.search(r"EXECUTE format\(\$q\$(.*)\$q\$,.*?CASE WHEN per_document.*?ELSE v_read \|\| '(.*?)' END\)\s+USING\s+(.*?);",
                      src, re.S)
        assert read is not None and m is not None and m.group(1).count("%s") == 3, "hybrid._hydrate changed shape"
        parts = iter(["NULL::jsonb", "NULL::jsonb", read.group(1) + m.group(2)])
        body, using = re.sub("%s", lambda _: next(parts), m.group(1)), [u.strip() for u in m.group(3).split(",")]
        return re.sub(r"\$(\d+)", lambda g: using[int(g.group(1)) - 1], body)

    dense = [s for s in returned("hybrid.search_dense") if "unnest(v_ids" not in s] + [  # the exact path, then the HNSW one
        m[1] for m in re.finditer(r"INTO v_ids, v_ds\s+FROM (\(SELECT c\.chunk_id.*?LIMIT top_k\) s);", source("hybrid.search_dense"), re.S)]
    # the audit of each HNSW list: EXECUTE format('...' '...', v_part) INTO v_miss USING ...
    audit = re.search(r"EXECUTE format\(((?:'[^']*'\s*)+), v_part\)\s+INTO v_miss\s+USING\s+(.*?);", source("hybrid.search_dense"), re.S)
    # and the audit from the sample hybrid.refresh_audit_samples cached: v_miss := EXISTS (...) where it is current
    cached = re.search(r"v_miss := (EXISTS \(.*?\));\s*ELSE", source("hybrid.search_dense"), re.S)
    # hybrid.search_lexical wraps _lexical_hits: ts_rank there, BM25 through the index in _bm25_index_hits
    lexical = [q for q in returned("hybrid._lexical_hits") if "_bm25_" not in q] + returned("hybrid._bm25_index_hits")
    graph_hop = re.search(r"SELECT array_agg\(n\.node_id.*?;\s*\n", source("hybrid._graph_walk"), re.S)  # the hop loop
    assert len(dense) == 2 and len(lexical) == 2 and graph_hop is not None and audit is not None \
        and cached is not None, "the branch functions changed shape"
    audit_using = top_level(audit.group(2))
    audit_stmt = re.sub(r"\$(\d+)", lambda g: audit_using[int(g.group(1)) - 1],
                        "".join(re.findall(r"'([^']*)'", audit.group(1))).replace("%s", "__PARTITION__"))
    audit_vars = {"v_sample_rows": "%(sample)s::integer", "v_ids": "%(d)s::text[]", "v_d10": "%(d10)s::float8"}
    hop = re.sub(r"\s+INTO v_next_ids, v_next_pos, v_next_kind[^\n]*", "", graph_hop.group(0))
    return [
        ("_scope_size (run by search_dense with corpus_ids or filter; without, the partition's row estimate)", bind(source("hybrid._scope_size")), {}),
        ("search_dense, exact path (scope <= exact_threshold)", bind(dense[0]), {}),
        ("search_dense, index path (scope > exact_threshold; iterative_scan relaxed_order; HNSW at the ef_search of "
         "hybrid._dense_plan, or a partition's IVFFlat index at setting ivfflat_probes lists)",
         "SELECT s.chunk_id, s.d FROM " + bind(dense[1]), {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "%(ef)s",
                                                           "ivfflat.iterative_scan": "relaxed_order", "ivfflat.probes": "%(probes)s"}),
        ("search_dense's audit of the HNSW list from its cached sample (hybrid.chunk_audit_sample, where no write came "
         "since hybrid.refresh_audit_samples), as hybrid_definer", "SELECT " + bind(cached.group(1), audit_vars),
         {"role": "hybrid_definer"}),
        ("search_dense's audit of the HNSW list from the partition (its row sample, hybrid.chunk_audit_sample_idx; "
         "where the cache is not current), as hybrid_definer", bind(audit_stmt, audit_vars), {"role": "hybrid_definer"}),
        ("search_lexical ts_rank (GIN)", bind(lexical[0]), {"enable_sort": "off"}),
        ("search_lexical bm25 (the partition's BM25 index's ordered scan, as hybrid_definer reads it; enable_sort off "
         "as the function sets it; scores as it chose them for the query, hybrid.bm25_scores)", bind(unwrap(lexical[1])), {"enable_sort": "off", "role": "hybrid_definer"}),
        # _graph_walk runs as the engine's definer (through search_graph / retrieve): graph_node's RLS
        # policy, which reads the chunk table and plans every partition, is not part of its statement
        ("search_graph, one hop from the seeds (the loop body), as hybrid_definer", bind(hop), {"role": "hybrid_definer"}),
        ("hybrid._hydrate (run by hybrid.retrieve), hydration of the fused ids without per_document, as hybrid_definer",
         bind(hydrate_statement(source("hybrid._hydrate")), {"top_k": "10"}), {"role": "hybrid_definer"}),
        ("(d) pgvector-python RRF CTE (RLS only, no explicit tenant predicate; session defaults)",
         PGVECTOR_RRF_SQL.replace("%(embedding)s", "%(v)s").replace("%(query)s", "%(t)s").replace("%(k)s", "60"), {})]


def explain_report(app_dsn: str, picks: list[tuple[str, TenantData]], world: World, seed: int, admin_dsn: str) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of each branch statement as the app role, for each picked tenant. With admin_dsn
    (the database's superuser), the HNSW statement runs at the ef_search that hybrid._dense_plan gives the tenant,
    and the BM25 statement, which reads the tenant's partition by name, as hybrid_definer, as search_lexical does."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    admin = psycopg.connect(admin_dsn, autocommit=True)
    # the BM25 statement reads the partition by name, which only the engine's definer may, with
    # the caller's tenant rules (hybrid._caller): run it inside a function owned by hybrid_definer
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS bench_explain CASCADE; CREATE SCHEMA bench_explain; CREATE FUNCTION "
                          "bench_explain.run(q text) RETURNS SETOF text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, "
                          "public, ag_catalog, pg_temp AS $f$ DECLARE r record; BEGIN FOR r IN EXECUTE q LOOP RETURN NEXT r.\"QUERY PLAN\"; "
                          "END LOOP; END $f$; ALTER FUNCTION bench_explain.run(text) OWNER TO hybrid_definer; GRANT USAGE ON SCHEMA "
                          "bench_explain TO {r}; GRANT EXECUTE ON FUNCTION bench_explain.run(text) TO {r}").format(r=sql.Identifier(APP_ROLE)))
    with psycopg.connect(app_dsn) as conn:
        for label, td in picks:
            q = make_queries(world, td, 1, rng)[0]
            v = vector_literal(q.vector)
            with conn.transaction():
                conn.execute(SET_TENANT, (td.tenant_id,))
                dense_rows = conn.execute("SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, %s)", (v, PER_SOURCE_K)).fetchall()
                d = [r[0] for r in dense_rows]
                lx = [r[0] for r in conn.execute(LEXICAL_SQL, (q.text, PER_SOURCE_K)).fetchall()]
                bm25_scores = conn.execute("SELECT current_setting('hybrid.bm25_scores', true)").fetchone()[0]
                conn.execute(GRAPH_SQL, (q.seeds, PER_SOURCE_K)).fetchall()  # the branch run once before its hop's EXPLAIN
                key = conn.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = %s", (td.tenant_id,)).fetchone()[0]
                acl = conn.execute("SELECT hybrid._current_acl(), hybrid._acl_all()").fetchone()
            # search_dense's settings (hybrid.setting, else the defaults of hybrid.setting_keys()): its exact threshold
            # (the larger of exact_threshold and dense_audit_rows), its audit's sample, its breadth and IVFFlat probes
            threshold, sample, ef, bm25_index, partition, probes = admin.execute(
                "WITH s AS (SELECT r.key, coalesce(x.value, r.default_value) AS v FROM hybrid.setting_keys() r LEFT JOIN "
                "hybrid.setting x USING (key)), t(e, a) AS (SELECT (SELECT v::integer FROM s WHERE key = 'exact_threshold'), "
                "(SELECT v::integer FROM s WHERE key = 'dense_audit_rows')) SELECT greatest(e, a), hybrid._audit_sample_rows("
                "hybrid._chunk_partition(%(key)s), a), greatest(hybrid._dense_plan(%(key)s, NULL, NULL, NULL, %(k)s), 100), "
                "hybrid._bm25_partition_index(%(key)s), hybrid._chunk_partition(%(key)s)::text, (SELECT v FROM s WHERE key = "
                "'ivfflat_probes') FROM t", {"key": key, "k": PER_SOURCE_K}).fetchone()
            with conn.transaction():  # the partition's row estimate, as the tenant's app session sees it
                conn.execute(SET_TENANT, (td.tenant_id,))
                scope = conn.execute("SELECT hybrid._scope_size(%s, NULL, NULL, %s)", (key, threshold)).fetchone()[0]
            params = {"sample": sample, "d10": dense_rows[min(len(dense_rows), 10) - 1][1] if dense_rows else float("inf"),
                      "v": v, "t": q.text, "seeds": q.seeds, "pos": list(range(1, len(q.seeds) + 1)), "ef": str(ef), "probes": probes,
                      "tenant": td.tenant_id, "key": key, "d": d, "acl": list(acl[0]), "all": bool(acl[1]), "threshold": threshold,
                      "k": PER_SOURCE_K, "kinds": ["chunk"] * len(q.seeds)}
            f = params["f"] = list(dict.fromkeys(d + lx))  # the fused list hybrid.retrieve's final statement reads
            params.update(fv=[0.0] * len(f), **{k: [x.index(i) + 1 if i in x else None for i in f] for k, x in (("fdr", d), ("flr", lx))})
            out.append(f"#### tenant {td.tenant_id} ({label}, {len(td.chunk_ids):,} chunks; _scope_size({threshold}) = "
                       f"{scope}: search_dense takes the {'exact' if scope <= threshold else 'index'} path)")
            out.append(f"query text: {q.text!r}; seeds: {q.seeds}")
            for title, stmt, gucs in engine_statements(conn):
                role = gucs.pop("role", None)  # a fresh dict each call
                stmt_before = stmt
                with conn.transaction():
                    conn.execute(SET_TENANT, (td.tenant_id,))
                    conn.execute("SET LOCAL search_path = pg_catalog, public, ag_catalog, pg_temp")
                    for name, value in gucs.items():
                        conn.execute("SELECT set_config(%s, %s, true)", (name, value % params if "%(" in value else value))
                    try:
                        with conn.transaction():  # a savepoint: a statement that cannot be bound here fails alone
                            cur = conn.cursor()
                            # engine-made names (regclass text), spliced as the function's format() does
                            stmt = stmt.replace("__BM25_SCORE__", "bm25_get_current_score()" if bm25_scores == "index scan"
                                                else "(c.content <@> to_bm25query(%(t)s, __BM25_INDEX__))")
                            stmt = stmt.replace("__BM25_INDEX__", f"'{bm25_index}'").replace("__PARTITION__", str(partition))
                            if role is None:
                                plan = [r[0] for r in cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params).fetchall()]
                            else:
                                text = psycopg.ClientCursor(conn).mogrify("EXPLAIN (ANALYZE, BUFFERS) " + stmt, params)
                                plan = [r[0] for r in cur.execute("SELECT * FROM bench_explain.run(%s)", (text,)).fetchall()]
                    except psycopg.Error as exc:
                        plan = [f"ERROR: {exc}"]
                text = re.sub(r"'\[[-0-9.,e]+\]'::vector", "'<query vector>'::vector", "\n".join(plan))
                if "__BM25_SCORE__" in stmt_before:
                    text = f"hybrid.bm25_scores: {bm25_scores}\n{text}"
                out += ["", f"== {title}", text]
            out.append("")
    admin.execute("DROP SCHEMA IF EXISTS bench_explain CASCADE")
    admin.close()
    return "\n".join(out)


def write_explain(args: argparse.Namespace, size: int, app_dsn: str, db_dsn: str, picks: list[tuple[str, TenantData]], world: World) -> Path:
    """The EXPLAIN report, beside the result file: <out>_explain.txt (<out>_explain_<size>.txt for several sizes)."""
    stem = f"{args.out.stem}_explain" + ("" if len(args.sizes) == 1 else f"_{size}")
    path = args.out.parent / f"{stem}.txt"
    path.write_text(f"# EXPLAIN (ANALYZE, BUFFERS) as {APP_ROLE} under RLS, {size:,} chunks\n\n"
                    + explain_report(app_dsn, picks, world, args.seed + 3, db_dsn))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", help="corpus sizes in chunks (default: the --resume sizes, else 100000)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, default=Path("bench/results/latency_100k.json"))
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"))
    ap.add_argument("--keep-db", action="store_true", help="keep each size's database (for --resume)")
    ap.add_argument("--skip-reindex", action="store_true")
    ap.add_argument("--no-explain", dest="explain", action="store_false", help="do not write the EXPLAIN (ANALYZE, BUFFERS) report of every engine statement")
    ap.add_argument("--method-budget-s", type=float, default=300.0, help="stop timing a method for a tenant after this many seconds (n then < --queries)")
    ap.add_argument("--resume", type=int, nargs="*", default=[],
                    help="sizes whose complete database a --keep-db run left: migrate it to this checkout and "
                         "measure the queries again (no ingest figures; the database is kept)")
    ap.add_argument("--rebuild", action="store_true", help="--resume: first drop and build the kept database's "
                    "indexes again through bulk_load(build_workers=--build-workers), timed by part (a fresh build)")
    ap.add_argument("--ef-search", type=int, default=None, help="set hybrid.setting hnsw_ef_search for the run (default: the engine's breadth rule)")
    ap.add_argument("--tenants", type=int, default=100, help="tenants per database (one holds ~50%% of the rows, the rest 1/rank)")
    ap.add_argument("--picks", type=float, nargs="+", default=[0.5, 0.01], help="row shares: the tenant nearest each is measured (labelled e.g. 50pct, 1pct, 0.1pct)")
    ap.add_argument("--parallel", action="store_true", help="also time pyhybrid.aio's read-only one call and parallel=True")
    ap.add_argument("--index-kinds", nargs="+", choices=["vector", "halfvec", "bit", "diskann", "ivfflat"], default=[],
                    help="also compare these dense index kinds (hybrid._dense_kind; diskann and ivfflat beside them) on the "
                         "largest tenant measured (--picks chooses its size), the statement alone, without the audit")
    ap.add_argument("--ivfflat-probes", type=int, default=None, help="--index-kinds ivfflat: lists scanned per query (default: the engine's setting ivfflat_probes)")
    ap.add_argument("--bulk-above", type=int, default=0, help="load sizes >= N inside HybridClient(admin).bulk_load() (0: never)")
    ap.add_argument("--bm25-ab", action="store_true", help="merge_bm25 the measured tenants; time the engine's BM25 "
                    "choice beside each scorer forced (BM25_AB), interleaved")
    ap.add_argument("--writers", type=int, default=1, help="ingest_records(writers=N): batches written at once")
    ap.add_argument("--load-streams", type=int, default=1, help="tenants loaded at once (an ingest_records call each)")
    ap.add_argument("--build-workers", type=int, default=2, help="bulk_load(build_workers=N): partition indexes built at once after a bulk load")
    ap.add_argument("--engine-ab", type=Path, metavar="DIR", help="time hybrid_retrieve of DIR's engine (git archive REV | tar -x "
                    "-C DIR) against this checkout's, installed alternately by round: --rounds, ABBA (default 8)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--no-pg-textsearch", action="store_true", help="install without pg_textsearch's index (BM25 by the SQL scorer)")
    args = ap.parse_args(argv)
    args.sizes = args.sizes or args.resume or [100000]  # --resume N alone measures N, not a fresh 100k as well
    global EF_SEARCH, N_TENANTS, PICKS, METHODS, WRITERS, LOAD_STREAMS, BUILD_WORKERS, TEXTSEARCH
    METHODS = METHODS[:2] + (list(BM25_AB) if args.bm25_ab else []) + METHODS[2:] \
        + (["aio_one_call", "aio_parallel"] if args.parallel else [])  # pyhybrid.aio
    EF_SEARCH, N_TENANTS, PICKS, WRITERS, LOAD_STREAMS, BUILD_WORKERS = (args.ef_search, args.tenants, list(args.picks), args.writers,
                                                                        args.load_streams, args.build_workers)
    TEXTSEARCH = False if args.no_pg_textsearch else None
    if args.tenants < len(args.picks):
        ap.error("--tenants must be at least the number of --picks")
    if args.rebuild and not args.resume:
        ap.error("--rebuild rebuilds a kept database: give it with --resume")
    if args.queries < 1:
        ap.error("--queries must be >= 1")

    meta = start_meta("engine_ab" if args.engine_ab else "latency", argv, "latency")  # engine_ab: a finding, not in RESULTS.md
    admin_dsn = configure_server(args.data_dir, start_embedded(args.data_dir))
    report: dict[str, Any] = {"server": server_info(admin_dsn), "config": {
        "queries": args.queries, "warmup": args.warmup, "batch": args.batch, "writers": args.writers, "load_streams": args.load_streams, "build_workers": args.build_workers, "seed": args.seed,
        "per_source_k": PER_SOURCE_K, "top_k": TOP_K, "weights": [WEIGHTS.vector, WEIGHTS.keyword, WEIGHTS.graph],
        "rrf_k": RRF_K, "tenants": N_TENANTS, "picks": PICKS, "dim": DIM, "clusters": N_CLUSTERS, "vocab": VOCAB}, "runs": []}
    for size in sorted(args.sizes):
        t_size = time.perf_counter()
        try:
            res = run_size(args, admin_dsn, size)
        except Exception as exc:  # record it; the sizes already measured stay in the report
            traceback.print_exc()
            report.setdefault("failed", []).append({"size": size, "error": f"{type(exc).__name__}: {exc}", "elapsed_s": round(time.perf_counter() - t_size, 1)})
            continue
        report["runs"].append(res)
        write_result(args.out, meta, report)
        print(f"{size}: done in {res['timings']['total_s']:.0f} s", file=sys.stderr)
    report["engine_at_end"] = engine_state()
    write_result(args.out, meta, report)
    print(args.out)
    return 0 if not report.get("failed") else 1


if __name__ == "__main__":
    sys.exit(main())
