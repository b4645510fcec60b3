"""`pyhybrid doctor` as a library: the server's extensions, the schema, its indexes, RLS and BM25 health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import psycopg

from . import maintenance
from .migrate import OPTIONAL_EXTENSIONS


@dataclass(frozen=True)
class Finding:
    """One line of the report: what was checked, what was found, and the command that fixes a problem."""

    subject: str
    state: str
    problem: bool = False
    fix: str | None = None

    def __str__(self) -> str:
        return f"{self.subject:<40} {self.state}" + (f"\n    fix: {self.fix}" if self.fix else "")


_BULK_LOAD_HOLDS = {
    "chunk_embedding_hnsw": ("vector_index_suspended", "SELECT hybrid.resume_vector_index();"),
    "chunk_tsv_gin": ("text_indexes_suspended", "SELECT hybrid.resume_text_indexes();"),
    "chunk_content_bm25": ("text_indexes_suspended", "SELECT hybrid.resume_text_indexes();"),
}


def check(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """Every check on the database conn is connected to; a Finding with problem=True is a failure."""
    yield Finding("server", str(_one(conn, "SELECT version()")))
    yield Finding("connected as", str(_one(conn, "SELECT current_user || CASE WHEN rolsuper THEN ' (superuser: "
                                                 "bypasses RLS; use an app or tenant role for queries)' ELSE '' END "
                                                 "FROM pg_roles WHERE rolname = current_user")))
    avail = dict(conn.execute("SELECT name, default_version FROM pg_available_extensions "
                              "WHERE name IN ('vector', 'age', 'pg_textsearch')").fetchall())
    installed = dict(conn.execute("SELECT extname, extversion FROM pg_extension").fetchall())
    # pyhybrid migrate --no-pg-textsearch: an install that goes without the BM25 index by choice
    no_bm25 = _one(conn, "SELECT to_regclass('hybrid.setting')") is not None and _one(
        conn, "SELECT value FROM hybrid.setting WHERE key = 'pg_textsearch'") == "off"
    for name, why in (("vector", "required: embeddings and the dense branch"), *OPTIONAL_EXTENSIONS.items()):
        if name in installed:  # what it does, not what happens without it
            yield Finding(f"extension {name}", f"installed {installed[name]} ({why.split(' (without')[0]})")
        elif name == "pg_textsearch" and no_bm25 and name in avail:
            yield Finding(f"extension {name}", f"available {avail[name]}, not installed: this install goes without it "
                                               "(pyhybrid migrate --no-pg-textsearch; --pg-textsearch installs it)")
        elif name in avail:
            yield Finding(f"extension {name}", f"available {avail[name]}, not installed ({why})", True,
                          "pyhybrid migrate")
        else:
            yield Finding(f"extension {name}", f"MISSING ({why})", True)
    if _one(conn, "SELECT to_regnamespace('hybrid')") is None:
        yield Finding("schema hybrid", "MISSING", True, "pyhybrid migrate")
        return
    revision = (_one(conn, "SELECT version_num FROM alembic_version")
                if _one(conn, "SELECT to_regclass('alembic_version')") is not None else None)
    version = _one(conn, "SELECT value FROM hybrid.setting WHERE key = 'version'")
    yield Finding("schema hybrid", f"installed, version {version or 'unknown'}, alembic revision "
                                   f"{revision or 'unknown'}, embedding dim {_one(conn, 'SELECT hybrid.embedding_dim()')}")
    for idx in ("chunk_embedding_hnsw", "chunk_tsv_gin", "chunk_content_bm25", "chunk_document_idx", "chunk_audit_sample_idx"):
        present = _one(conn, "SELECT to_regclass(%s)", (f"hybrid.{idx}",)) is not None
        needed = idx != "chunk_content_bm25" or ("pg_textsearch" in avail and not no_bm25)
        # (the setting a bulk load holds the index off by, the call that rebuilds it)
        hold = _BULK_LOAD_HOLDS.get(idx)
        suspended = hold is not None and _one(conn, "SELECT 1 FROM hybrid.setting WHERE key = %s", (hold[0],)) is not None
        state = "present" if present else "suspended for a bulk load" if suspended else "MISSING"
        yield Finding(f"index {idx}", state, needed and not present,
                      None if present or not needed else hold[1] if hold and suspended
                      else "pyhybrid migrate --reapply" if idx == "chunk_audit_sample_idx" else "pyhybrid migrate")
        if idx == "chunk_embedding_hnsw" and present:
            yield _dense_index_kind(conn)
    small = _one(conn, "SELECT coalesce(nullif(current_setting('hybrid.bm25_sql_max_chunks', true), ''), '0')")
    yield Finding("lexical scorer", "BM25 by pg_textsearch's index (the SQL scorer where it is stale"
                  + ("" if small == "0" else f" and for a tenant of at most {small} chunks") + "; ts_rank by name)"
                  if _one(conn, "SELECT hybrid.bm25_available()") else
                  "BM25 by the SQL scorer over each tenant's statistics ("
                  + ("the install goes without pg_textsearch: migrate --no-pg-textsearch" if no_bm25
                     else "pg_textsearch is not installed") + ")")
    audit = _audit_samples(conn)
    if audit is not None:
        yield audit
    lexical_audit = _lexical_audit(conn)
    if lexical_audit is not None:
        yield lexical_audit
    for rel, on in conn.execute("SELECT c.oid::regclass::text, c.relrowsecurity AND c.relforcerowsecurity "
                                "FROM pg_class c WHERE c.relnamespace = 'hybrid'::regnamespace AND c.relkind IN ('r', 'p') "
                                "AND c.relname IN ('chunk', 'corpus', 'graph_node') ORDER BY 1").fetchall():
        yield Finding(f"RLS {rel}", "enabled and forced" if on else "NOT FORCED", not on,
                      None if on else "pyhybrid migrate --reapply")
    if _one(conn, "SELECT relkind FROM pg_class WHERE oid = to_regclass('hybrid.chunk')") == "p":
        yield from _placement(conn)
    if _one(conn, "SELECT to_regnamespace('hybrid_graph')") is not None:
        weak = int(_one(conn, "SELECT count(*) FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g "
                              "ON g.graphid = l.graph JOIN pg_class c ON c.oid = l.relation WHERE g.name = "
                              "'hybrid_graph' AND NOT (c.relrowsecurity AND c.relforcerowsecurity)"))
        yield Finding("RLS on AGE label tables", f"{weak} NOT FORCED" if weak else "all enabled and forced", weak > 0,
                      "pyhybrid migrate --reapply" if weak else None)
    for fn, what in (("pg_catalog.ts_match_vq(tsvector, tsquery)", "ts_rank search uses the GIN index under RLS"),
                     ("ag_catalog.graphid_eq(ag_catalog.graphid, ag_catalog.graphid)",
                      "graph hops use the edge indexes under RLS")):
        row = conn.execute("SELECT proleakproof FROM pg_proc WHERE oid = to_regprocedure(%s)", (fn,)).fetchone()
        if row is not None:
            yield Finding(f"leakproof {fn.split('(')[0]}", f"{'yes' if row[0] else 'no'} ({what})", False,
                          None if row[0] else "pyhybrid migrate --reapply, as a superuser")
    # an extension update re-creates its functions with PUBLIC EXECUTE (the revokes of sql/idempotent/090)
    for ext in ("age", "pg_textsearch"):
        if ext in installed:
            open_fns = int(_one(conn, "SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid "
                                      "JOIN pg_proc p ON p.oid = d.objid WHERE d.classid = 'pg_proc'::regclass "
                                      "AND d.deptype = 'e' AND e.extname = %s "
                                      "AND has_function_privilege('public', p.oid, 'EXECUTE')", (ext,)))
            yield Finding(f"extension {ext} functions", f"{open_fns} executable by PUBLIC" if open_fns
                          else "none executable by PUBLIC", open_fns > 0,
                          "pyhybrid migrate --reapply  (an extension update re-granted them)" if open_fns else None)
    healthy: dict[str, list[int]] = {}  # state -> documents of each such index: one line a state, not an index
    for st in maintenance.bm25_status(conn):
        if st.state == "stale":
            yield Finding(f"BM25 index {st.index_name}", f"STALE: {st.reason}", True,
                          f"{maintenance.HEAL_COMMAND}  (or, as the schema owner: {maintenance.HEAL_SQL};)")
        else:
            healthy.setdefault(st.state, []).append(st.total_docs or 0)
    for state, docs in healthy.items():
        yield Finding("BM25 indexes", f"{len(docs)} {state} ({sum(docs)} documents in their statistics)")
    yield from _languages(conn)
    for d in maintenance.vector_index_density(conn):
        if d.due:  # recall, not correctness: a hint, not a failure
            yield Finding(f"HNSW density, tenant {d.tenant_id}",
                          f"m {d.m}, ef_construction {d.ef_construction} for ~{d.live_rows:,} chunks: a denser graph "
                          f"(m {d.due_m}, ef_construction {d.due_ef_construction}) is due for recall", False,
                          f"{maintenance.DENSIFY_COMMAND}  (REINDEX CONCURRENTLY: reads and writes go on; "
                          f"maintenance_work_mem {d.build_memory})")
    # chunks by the planner's estimate, from the catalogs: counting them would lock every tenant's partition at once
    tenants, chunks = conn.execute(
        "SELECT (SELECT count(*) FROM hybrid.tenant), (SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint "
        "FROM pg_class c WHERE c.oid = 'hybrid.chunk'::regclass OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i "
        "WHERE i.inhparent IN ('hybrid.chunk'::regclass, coalesce(to_regclass('hybrid.chunk_pool'), 0))))"
        ).fetchone() or (0, 0)
    yield Finding("data", f"{tenants} tenants (as seen by this role), about {chunks} chunks (the planner's estimate)")


_AUDIT_SQL = """SELECT count(*) FILTER (WHERE p.audited), count(*) FILTER (WHERE p.audited AND p.cached),
       (SELECT coalesce((SELECT value FROM hybrid.setting WHERE key = 'dense_audit_rows'), '1000'))
FROM (SELECT hybrid._dense_plan(t.tenant_key, NULL, NULL, NULL, 10) > 0 AS audited,
             EXISTS (SELECT 1 FROM hybrid.chunk_audit_sample_state s WHERE s.tenant_key = t.tenant_key
                       AND s.base::text = coalesce((SELECT value FROM hybrid.setting WHERE key = 'dense_audit_rows'), '1000')) AS cached
      FROM hybrid.tenant t WHERE t.tenant_key = ANY(%s)) p"""
_AUDIT_BATCH = 500  # tenants a transaction: each one's plan locks its partition to the end of the transaction


def _audit_samples(conn: psycopg.Connection[Any]) -> Finding | None:
    """How many partitions searched through HNSW have their dense audit's sample cached (hybrid.refresh_audit_samples);
    None where this role may not ask (the audit's tables and hybrid._dense_plan are the engine's)."""
    if not _one(conn, "SELECT to_regclass('hybrid.chunk_audit_sample_state') IS NOT NULL "
                      "AND has_table_privilege('hybrid.chunk_audit_sample_state', 'SELECT') "
                      "AND has_function_privilege('hybrid._dense_plan(integer, text[], jsonb, integer, integer)', 'EXECUTE')"):
        return None
    keys = [r[0] for r in conn.execute("SELECT tenant_key FROM hybrid.tenant ORDER BY 1").fetchall()]
    audited, cached, base = 0, 0, "1000"
    try:
        for i in range(0, max(len(keys), 1), _AUDIT_BATCH):
            with conn.transaction():
                a, c, base = conn.execute(_AUDIT_SQL, (keys[i:i + _AUDIT_BATCH],)).fetchone() or (0, 0, "1000")
            audited, cached = audited + a, cached + c
    except psycopg.errors.InvalidParameterValue as exc:  # a malformed dense_audit_rows, named by _dense_plan
        return Finding("dense audit samples", f"BROKEN: {exc.diag.message_primary}", True,
                       "fix or DELETE the setting in hybrid.setting")
    if base == "0":
        return Finding("dense audit samples", "off (setting dense_audit_rows 0)")
    return Finding("dense audit samples",
                   f"cached for {cached} of {audited} partitions searched through HNSW"
                   + ("" if cached == audited else "; the others read theirs from the partition (slower; a write "
                      "since the last cache)"), False,
                   None if cached == audited else "SELECT * FROM hybrid.refresh_audit_samples();")


def _lexical_audit(conn: psycopg.Connection[Any]) -> Finding | None:
    """The last lexical audit (hybrid.audit_bm25) of the BM25 indexes; None where there is none or this role may not
    read it."""
    if not _one(conn, "SELECT to_regclass('hybrid.bm25_audit') IS NOT NULL AND has_table_privilege('hybrid.bm25_audit', "
                      "'SELECT') AND EXISTS (SELECT 1 FROM hybrid.bm25_audit)"):
        return None
    audited, failed, worst, last = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE mismatches > 0), max(worst), max(audited_at)::timestamp(0)::text "
        "FROM hybrid.bm25_audit").fetchone() or (0, 0, 0.0, "")
    return Finding("BM25 audit", f"{audited} indexes audited (last {last}); " + (
        f"{failed} disagreed with the exact scores: the SQL scorer answers for them until rebuilt" if failed
        else f"all agree with the exact scores (largest relative difference {worst:.1e})"), failed > 0,
        "SELECT * FROM hybrid.audit_bm25(heal => true);" if failed else None)


_KIND_SQL = """SELECT k.kind, split_part(k.key, ' ', -1) AS due, o.opcname AS built
FROM (SELECT hybrid._dense_kind(hybrid.embedding_dim()) AS kind, hybrid._dense_index_key(hybrid.embedding_dim()) AS key) k
JOIN pg_index x ON x.indexrelid = 'hybrid.chunk_embedding_hnsw'::regclass
JOIN pg_opclass o ON o.oid = x.indclass[0]"""
_KINDS = {"vector": "the vectors", "halfvec": "halfvec copies, candidates ranked by exact cosine",
          "bit": "binary codes, a wider candidate list re-ranked by exact cosine"}


_IVFFLAT_SQL = """SELECT count(*) FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhrelid
JOIN pg_index x ON x.indrelid = p.oid JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
WHERE h.inhparent = 'hybrid.chunk'::regclass AND i.relname = p.relname || '_embedding_idx' AND a.amname = 'ivfflat'"""


# a partition per dedicated tenant, and the pool's leaves, each with RLS forced (the second wall); counted from the
# catalogs, so this check locks no partition
_PARTITIONS_SQL = """WITH RECURSIVE part AS (
    SELECT i.inhrelid, 0 AS level FROM pg_inherits i WHERE i.inhparent = 'hybrid.chunk'::regclass
    UNION ALL SELECT i.inhrelid, p.level + 1 FROM pg_inherits i JOIN part p ON i.inhparent = p.inhrelid)
SELECT (SELECT count(*) FROM hybrid.tenant WHERE tenant_key < 1073741824),
       (SELECT count(*) FROM hybrid.tenant WHERE tenant_key >= 1073741824),
       count(*) FILTER (WHERE p.level = 0 AND c.relkind = 'r'),
       count(*) FILTER (WHERE p.level = 1),
       count(*) FILTER (WHERE NOT (c.relrowsecurity AND c.relforcerowsecurity)),
       (SELECT count(*) FROM hybrid.tenant t WHERE t.tenant_key < 1073741824
          AND to_regclass(format('hybrid.%I', 'chunk_p' || t.tenant_key)) IS NULL)
FROM part p JOIN pg_class c ON c.oid = p.inhrelid"""


def _placement(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """Where the tenants are: partitions of their own or the pool (its leaves), RLS forced on each; pooled tenants
    due for a partition of their own (hybrid.pool_due)."""
    dedicated, pooled, parts, leaves, weak, missing = conn.execute(_PARTITIONS_SQL).fetchone() or (0, 0, 0, 0, 0, 0)
    bad = bool(weak or missing)
    yield Finding("tenant placement", f"{dedicated} dedicated ({parts} partitions), {pooled} pooled "
                  f"(hybrid.chunk_pool, {leaves} leaves)"
                  + (f", {missing} dedicated tenant(s) WITHOUT a partition" if missing else "")
                  + (f", {weak} NOT FORCED" if weak else ", RLS forced on each"), bad,
                  "pyhybrid migrate --reapply" if bad else None)
    if _one(conn, "SELECT coalesce(has_function_privilege(to_regprocedure('hybrid.pool_due()'), 'EXECUTE'), false)"):
        due = conn.execute("SELECT tenant_id, chunks FROM hybrid.pool_due()").fetchall()
        if due:  # speed, not correctness: a hint
            yield Finding("pooled tenants past pool_max_chunks", ", ".join(f"{t} ({n} chunks)" for t, n in due[:5])
                          + (f" and {len(due) - 5} more" if len(due) > 5 else ""), False,
                          f"{maintenance.PLACE_COMMAND}  (hybrid.move_tenant: online, each to a partition of its own)")


_LANGUAGES_SQL = """SELECT t.text_config, count(*),
       count(*) FILTER (WHERE c.oid IS NOT NULL AND NOT coalesce(c.reloptions, '{}') @> ARRAY['text_config=' || t.text_config])
FROM hybrid.tenant t
LEFT JOIN pg_index x ON x.indrelid = to_regclass(format('hybrid.%I', 'chunk_p' || t.tenant_key))
     AND EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = x.indexrelid
                 AND i.inhparent = to_regclass('hybrid.chunk_content_bm25'))
LEFT JOIN pg_class c ON c.oid = x.indexrelid
GROUP BY 1 ORDER BY 2 DESC, 1"""


def _languages(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """The tenants' text-search languages, and any whose BM25 index reads another one (from the catalogs)."""
    if _one(conn, "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('hybrid.tenant') "
                  "AND attname = 'text_config'") is None:
        return
    rows = conn.execute(_LANGUAGES_SQL).fetchall()
    if not rows:
        return
    has_bm25 = _one(conn, "SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL")
    off = sum(r[2] for r in rows) if has_bm25 else 0
    yield Finding("tenant languages", ", ".join(f"{n} {lang}" for lang, n, _ in rows)
                  + (f"; {off} tenant(s) whose BM25 index reads ANOTHER language" if off else ""), off > 0,
                  "as the schema owner: SELECT hybrid._bm25_text_configs();" if off else None)


def _dense_index_kind(conn: psycopg.Connection[Any]) -> Finding:
    """What the HNSW index holds for the install's dimension (hybrid._dense_kind), and whether it was built so;
    how many partitions have an IVFFlat index of their own instead (hybrid._ivfflat_lists)."""
    row = conn.execute(_KIND_SQL).fetchone()
    assert row is not None
    kind, due, built = (str(v) for v in row)
    ivfflat = _one(conn, _IVFFLAT_SQL)
    if built == due:
        return Finding("dense index kind", f"{kind} ({_KINDS.get(kind, kind)}; operator class {built})"
                       + (f"; {ivfflat} large partition(s) IVFFlat (setting ivfflat_rows)" if ivfflat else ""))
    return Finding("dense index kind", f"built with {built}, the install calls for {due} ({kind})", True,
                   f"pyhybrid doctor --dense-kind {kind}  (built CONCURRENTLY, then swapped)")


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]
