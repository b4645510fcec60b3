"""The pyhybrid command line: server, migrate, doctor, tenant, ingest, ingest-edges, search, demo."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import psycopg
from psycopg import conninfo

from . import _sql, maintenance, migrate, server, transfer
from .errors import InvalidParameterError, PyhybridError
from .ingest import ingest_records
from .query import RetrieveQuery
from .types import ChunkRef, HybridWeights

APP_ROLE = "pyhybrid_app"


class Target:
    """Where a command works: the admin DSN, and the non-superuser app DSN tenant work runs as."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.embedded = not (args.dsn or os.environ.get(server.ENV_DSN))
        data_dir = Path(args.data_dir) if getattr(args, "data_dir", None) else None
        self.admin = server.resolve_dsn(args.dsn, data_dir)

    def ensure_ready(self) -> None:
        """On the embedded server: migrate to head and create the app role (both idempotent)."""
        if not self.embedded:
            return
        migrate.upgrade(self.admin)
        with psycopg.connect(self.admin, autocommit=True) as c:
            if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone() is None:
                c.execute("SELECT set_config('pyhybrid.role', %s, false)", (APP_ROLE,))
                c.execute("DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN', "
                          "current_setting('pyhybrid.role')); END $$")
            c.execute("SELECT hybrid.grant_app(%s)", (APP_ROLE,))

    def ensure_tenant(self, tenant: str) -> None:
        """On the embedded server, create the tenant if missing."""
        if self.embedded:
            with psycopg.connect(self.admin, autocommit=True) as c:
                c.execute(_sql.CREATE_TENANT_SQL, (tenant,))

    @property
    def app(self) -> str:
        """The DSN tenant work runs as: the app role on the embedded server (RLS applies), else the DSN given."""
        return conninfo.make_conninfo(self.admin, user=APP_ROLE) if self.embedded else self.admin


def _print_table(refs: Sequence[ChunkRef], *, width: int = 72, skip: int = 0) -> None:
    idw = max([26, *(len(r.chunk_id) for r in refs)])  # whole ids: a cut id can look like another one
    print(f"{'rank':>4}  {'chunk':<{idw}} {'fused':>8}  {'dense':>5} {'lex':>5} {'graph':>5}  content")
    for i, r in enumerate(refs, start=skip + 1):
        def rk(v: int | None) -> str:
            return "-" if v is None else str(v)
        text = " ".join((r.content or "").split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        print(f"{i:>4}  {r.chunk_id:<{idw}} {r.score:8.5f}  {rk(r.vector_rank):>5} {rk(r.keyword_rank):>5} "
              f"{rk(r.graph_rank):>5}  {text}")


def _print_context(ref: ChunkRef) -> None:
    if not ref.graph_context:
        return
    print(f"      graph context of {ref.chunk_id}:")
    for c in ref.graph_context:
        arrow = "->" if c.get("direction") == "out" else "<-"
        title = f"  {c['title']}" if c.get("title") else ""
        print(f"        {arrow} {c.get('rel')} {arrow} {c.get('node_id')} ({c.get('kind')}){title}")


def search(dsn: str, args: argparse.Namespace) -> list[ChunkRef]:
    """Run one search as the CLI does; prints the table, JSON or explanation."""
    from .client import HybridClient
    from .embed import default_embedder

    if not args.text.strip() and not args.seed:
        raise InvalidParameterError("the query text is empty: give words to search for (or --seed ID)")
    try:
        flt = json.loads(args.filter) if args.filter else None
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"--filter must be a JSON object such as '{{\"lang\": \"en\"}}': {exc.msg} "
                                    f"at character {exc.pos + 1} of {args.filter!r}") from None
    # hybrid_retrieve's own defaults unless a flag says otherwise
    w = HybridWeights.parse(args.weights) if args.weights else None
    weights: dict[str, Any] = (
        {"vector_weight": w.vector, "keyword_weight": w.keyword, "graph_weight": w.graph} if w else {})
    for name in ("vector_weight", "keyword_weight", "graph_weight", "rrf_k", "fusion"):
        if getattr(args, name) is not None:
            weights[name] = getattr(args, name)
    base = RetrieveQuery(query_text=args.text if args.text.strip() else None, graph_seeds=args.seed or None,
                         **weights)
    query = RetrieveQuery(
        query_embedding=default_embedder().embed_query(args.text) if base.vector_weight > 0 and args.text.strip()
        else None,
        query_text=args.text if args.text.strip() else None, graph_seeds=args.seed or None,
        corpus_ids=args.corpus_ids or None, top_k=args.top_k, per_source_k=args.per_source_k,
        filter=flt, graph_hops=args.graph_hops,
        lexical=args.lexical, graph_expand=args.graph_expand if base.graph_weight > 0 else 0,
        with_graph_context=True, per_document=args.per_document, skip=args.skip, siblings=args.siblings,
        graph_edge_types=args.graph_edge_types, **weights,
    )
    acl = [a for a in (args.acl or "").split(",") if a]
    report: dict[str, Any] = {}
    with HybridClient(dsn) as client, client.tenant(args.tenant, acl) as t:
        refs = t.retrieve(query, rerank=args.rerank, rerank_depth=args.rerank_depth)
        if args.explain and not args.json:
            report = t.explain_retrieve(query)
    if args.json:
        out = [dataclasses.asdict(r) for r in refs]
        print(json.dumps(out, indent=2, default=list))
        return refs
    _print_table(refs, skip=query.skip)
    if not refs:
        # the same words whatever the cause: a tenant role cannot tell "no such tenant" from "not yours"
        print(f"no results for tenant {args.tenant!r}"
              + (f" in corpus {', '.join(args.corpus_ids)}" if args.corpus_ids else "")
              + ": the tenant or corpus may not exist, hold no chunks this role may see, or nothing matched",
              file=sys.stderr)
    if refs:
        _print_context(refs[0])
    for r in refs:
        if r.siblings:
            print(f"      siblings of {r.chunk_id}: "
                  + ", ".join(f"{s['chunk_id']} (position {s['position']})" for s in r.siblings))
    if args.explain:
        print(f"\nbranches (hybrid.explain_retrieve, {report.get('total_ms')} ms in all):")
        for b in report.get("branches", []):
            if "failed" in b:
                print(f"  {b['branch']:<8} failed: {b['failed']}")
                continue
            print(f"  {b['branch']:<8} {b['plan']}: {b['rows']} rows of at most {b['depth']}, {b['ms']} ms, "
                  f"weight {b['weight']:g}")
        print(f"\nfusion: {query.fusion}" + (f" (rrf_k {query.rrf_k:g})" if query.fusion == "rrf" else "")
              + "; each row's score, by branch:")
        for r in report.get("rows", []):
            found = [name for name in ("dense", "lexical", "graph") if r["ranks"].get(name) is not None]
            terms = " + ".join(f"{name} {v:.5f}" for name, v in (r.get("contributions") or {}).items() if v)
            print(f"  {r['chunk_id']}: found by {', '.join(found)}; {r['score']:.5f} = {terms or '0'}")
        print("\nThe SQL call (paste into psql as is):")
        print(query.to_sql())
    return refs


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _heal(dsn: str) -> None:
    """Rebuild the stale BM25 indexes of one database, saying what was done."""
    for a in maintenance.heal_bm25(dsn):
        print(f"BM25 index {a.index_name}: {a.action} ({a.reason})")


def cmd_server(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir) if args.data_dir else None
    if args.action == "start":
        print(server.start_embedded(data_dir, report=_stderr))
    elif args.action == "stop":
        print("stopped" if server.stop_embedded(data_dir) else "not running")
    elif args.action == "status":
        print(json.dumps(server.embedded_status(data_dir), indent=2))
    elif args.action == "info":
        st = server.embedded_status(data_dir)
        where = Path(st["data_dir"])
        size = sum(f.stat().st_size for f in where.rglob("*") if f.is_file()) if where.is_dir() else 0
        print(f"data directory: {where}  ({size / 1e6:.1f} MB)" if where.is_dir()
              else f"data directory: {where}  (not created yet)")
        print(f"running: {'yes, pid ' + str(st.get('pid')) + ', ' + str(st.get('dsn')) if st['running'] else 'no'}")
        print("it keeps running after a pyhybrid command ends; stop it with: pyhybrid server stop")
        print(f"to remove it and every tenant's data: pyhybrid server stop && rm -rf {where}")
        print(f"elsewhere: pyhybrid --data-dir DIR ... or ${server.ENV_DATA_DIR}=DIR; an external server: "
              f"--dsn or ${server.ENV_DSN}")
    else:
        st = server.embedded_status(data_dir)
        if not st["running"]:
            print("the embedded server is not running: pyhybrid server start", file=sys.stderr)
            return 1
        print(st["dsn"])
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    target = Target(args)
    with psycopg.connect(target.admin) as c:
        report = migrate.check_extensions(c)
    for name, what in report.missing_optional.items():
        print(f"note: extension {name!r} is not available on this server: {what} is disabled", file=sys.stderr)
    if args.downgrade:
        migrate.downgrade(target.admin, revision=args.downgrade)
        print(f"downgraded to {args.downgrade}")
    else:
        migrate.upgrade(target.admin, dim=args.dim, reapply=args.reapply)
        if target.embedded:
            target.ensure_ready()
        _heal(target.admin)
        print("schema hybrid is at head")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import check

    target = Target(args)
    if args.heal:
        _heal(target.admin)
    if args.densify:
        if not maintenance.densify_vector_indexes(target.admin, report=print):
            print("no HNSW index is due for a denser graph")
    with psycopg.connect(target.admin) as c:
        findings = list(check(c))
    for f in findings:
        print(f)
    problems = sum(f.problem for f in findings)
    print("ok" if problems == 0 else f"{problems} problem(s) found")
    return 0 if problems == 0 else 1


def cmd_tenant(args: argparse.Namespace) -> int:
    from .client import HybridClient

    target = Target(args)
    target.ensure_ready()
    with HybridClient(target.admin) as c:
        if args.action == "create":
            print(c.create_tenant(args.name))
        elif args.action == "grant":
            c.grant_tenant(args.role, args.name, [a for a in (args.acl or "").split(",") if a])
            print(f"role {args.role} may act for tenant {args.name}")
        elif args.action == "grant-app":
            c.grant_app(args.name)
            print(f"role {args.name} is a trusted app role")
        elif args.action == "drop":
            if not args.yes:
                raise InvalidParameterError(f"tenant drop removes every chunk, corpus, graph node and grant of "
                                            f"{args.name!r}: confirm with --yes")
            removed = c.drop_tenant(args.name)
            print(f"dropped tenant {args.name}: " + ", ".join(f"{v} {k}" for k, v in removed.items()))
        elif args.action == "export":
            if not args.file:
                raise InvalidParameterError("tenant export needs FILE: pyhybrid tenant export TENANT FILE")
            n = transfer.export_tenant(c, args.name, args.file)
            print(f"exported tenant {args.name} to {args.file}: " + ", ".join(f"{v} {k}" for k, v in n.items()))
        else:  # import
            n = transfer.import_tenant(c, args.name, args.as_tenant)
            print(f"imported {args.name}: " + ", ".join(f"{v} {k}" for k, v in n.items()))
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from .chunking import scan_source

    # read everything first: a bad path or record fails here, before a tenant or a row is written
    scan = scan_source(Path(args.path), root=Path(args.root) if args.root else None, max_words=args.chunk_size,
                       overlap_words=args.overlap)
    for f, note in scan.notes:
        print(f"pyhybrid: note: {f}: {note}", file=sys.stderr)
    for f, reason in scan.skipped:
        print(f"pyhybrid: skipped {f}: {reason}", file=sys.stderr)
    docs = len({r.get("document_id") for r in scan.records})
    print(f"read {len(scan.files_read)} file(s): {len(scan.records)} chunk(s) of {docs} document(s); "
          f"skipped {len(scan.skipped)} file(s)", file=sys.stderr)
    if not scan.records:
        print(f"pyhybrid: error: nothing to ingest under {args.path}", file=sys.stderr)
        return 1
    target = Target(args)
    target.ensure_ready()
    if not args.dry_run:
        target.ensure_tenant(args.tenant)
    records = scan.records

    def load() -> dict[str, int]:
        return ingest_records(target.app, args.tenant, args.corpus, iter(records), batch_size=args.batch,
                              acl_labels=[a for a in (args.acl or "").split(",") if a], quiet=args.quiet,
                              total=len(records), dry_run=args.dry_run)

    if args.bulk and not args.dry_run:
        from .client import HybridClient

        with HybridClient(target.admin) as admin, admin.bulk_load():
            totals = load()
    else:
        totals = load()
    totals = {"files_read": len(scan.files_read), "files_skipped": len(scan.skipped), **totals}
    print(json.dumps(totals))
    return 0


EDGE_FORMAT = ('one JSON object per line: {"src": ID, "dst": ID, "rel": "UPPER_SNAKE_CASE", "properties": {...}} '
               '(properties optional); an ID is a chunk id (e.g. "manual.md#0") or any other string, which '
               'becomes an entity node')


def read_edges(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The edge records of a JSONL file with their line numbers; a bad line fails with the file, the line
    and the format."""
    if not path.is_file():
        raise InvalidParameterError(f"path {str(path)!r} does not exist or is not a file")
    edges: list[tuple[int, dict[str, Any]]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidParameterError(f"{path}:{n}: not valid JSON ({exc.msg}); ingest-edges reads "
                                            f"{EDGE_FORMAT}") from None
            if not isinstance(rec, dict):
                raise InvalidParameterError(f"{path}:{n}: not a JSON object; ingest-edges reads {EDGE_FORMAT}")
            unknown = sorted(set(rec) - {"src", "dst", "rel", "properties"})
            missing = [k for k in ("src", "dst", "rel") if not rec.get(k)]
            if unknown or missing:
                what = f"unknown key(s) {unknown}" if unknown else f"missing {', '.join(missing)}"
                raise InvalidParameterError(f"{path}:{n}: {what}; ingest-edges reads {EDGE_FORMAT}")
            edges.append((n, rec))
    return edges


def cmd_ingest_edges(args: argparse.Namespace) -> int:
    from .client import HybridClient

    edges = read_edges(Path(args.path))
    if not edges:
        print(f"pyhybrid: error: no edges in {args.path}", file=sys.stderr)
        return 1
    target = Target(args)
    target.ensure_ready()
    path = Path(args.path)
    with HybridClient(target.app) as c, c.tenant(args.tenant) as t:
        kinds = t.classify_ids({rec[end] for _, rec in edges for end in ("src", "dst")})
        for n, rec in edges:
            for end in ("src", "dst"):
                k = kinds.get(rec[end], [])
                if "document" in k and "chunk" not in k:
                    if "entity" in k:
                        raise InvalidParameterError(
                            f"{path}:{n}: {end} {rec[end]!r} names both a document and an entity node of tenant "
                            f"{args.tenant!r}: use one of the document's chunk ids (e.g. '{rec[end]}#0') or rename "
                            "the entity")
                    raise InvalidParameterError(
                        f"{path}:{n}: {end} {rec[end]!r} is a document id; an edge joins chunks or entities: use one "
                        f"of the document's chunk ids (e.g. '{rec[end]}#0')")
        res = t.add_edges([rec for _, rec in edges])
    new = sorted(i for i, k in kinds.items() if not k)
    if new:
        print(f"pyhybrid: note: {len(new)} id(s) name no chunk or entity of tenant {args.tenant!r} yet and became "
              f"entity nodes: {', '.join(new[:5])}{', ...' if len(new) > 5 else ''}", file=sys.stderr)
    print(json.dumps(res.__dict__))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    target = Target(args)
    target.ensure_ready()
    search(target.app, args)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    target = Target(args)
    target.ensure_ready()
    return run_demo(target.admin, target.app, quiet=args.quiet)


class _Parser(argparse.ArgumentParser):
    """argparse, reading "-1,1,1" as a value (then refused by the weight rule), not as an unknown option."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pyhybrid", description=__doc__)
    p.add_argument("--dsn", help=f"an external PostgreSQL (default ${server.ENV_DSN}, else the embedded server)")
    p.add_argument("--data-dir", help=f"the embedded server's data dir (default ${server.ENV_DATA_DIR} or a per-user dir)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("server", help="manage the embedded PostgreSQL")
    s.add_argument("action", choices=["start", "stop", "status", "url", "info"],
                   help="info: where its data lives, whether it runs, how to stop and remove it")
    s.set_defaults(func=cmd_server)

    s = sub.add_parser("migrate", help="install or upgrade the hybrid schema (Alembic upgrade head)")
    s.add_argument("--dim", type=int, default=None, help="embedding dimension for a fresh install (default 384)")
    s.add_argument("--downgrade", metavar="REV", help="downgrade to REV instead (base removes everything)")
    s.add_argument("--reapply", action="store_true",
                   help="re-apply sql/idempotent/ even if unchanged (after an extension update, for example)")
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("doctor", help="check the server, extensions, schema, indexes and RLS")
    s.add_argument("--heal", action="store_true",
                   help="rebuild the BM25 indexes a server restart left stale before checking")
    s.add_argument("--densify", action="store_true",
                   help="rebuild, with a denser graph, the HNSW index of each tenant grown past hnsw_dense_rows "
                        "(REINDEX CONCURRENTLY: reads and writes go on) before checking")
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("tenant", help="create, grant, drop, export and import tenants (admin)",
                       epilog="examples: tenant create acme | tenant grant acme --role alice | tenant grant-app app_role | "
                              "tenant drop acme --yes | tenant export acme acme.jsonl.gz | "
                              "tenant import acme.jsonl.gz [--as-tenant acme2]")
    s.add_argument("action", choices=["create", "grant", "grant-app", "drop", "export", "import"])
    s.add_argument("name", help="tenant id (create, grant, drop, export), role name (grant-app) or export file (import)")
    s.add_argument("file", nargs="?", help="with export: the file to write (JSONL; gzip when it ends in .gz)")
    s.add_argument("--yes", action="store_true", help="with drop: confirm")
    s.add_argument("--as-tenant", help="with import: the tenant id to import under (default: the exported one)")
    s.add_argument("--role", help="with grant: the login role to bind to the tenant")
    s.add_argument("--acl", help="with grant: comma-separated ACL labels the role may claim")
    s.set_defaults(func=cmd_tenant)

    s = sub.add_parser("ingest", help="chunk, embed and load text/markdown/JSONL files")
    s.add_argument("path", help="a file or directory: .txt .md .markdown .rst .html, README-like and suffix-less "
                                "text files are chunked; .jsonl holds chunk records (chunk_id, document_id, content; "
                                "position, metadata, acl_labels, embedding optional)")
    s.add_argument("--root", help="document ids are file paths relative to this directory (default: the directory "
                                  "given, or the file's own directory); give it to re-ingest one file of a folder")
    s.add_argument("--dry-run", action="store_true",
                   help="read, chunk and compare with what is stored; embed and write nothing")
    s.add_argument("--tenant", required=True)
    s.add_argument("--corpus", default="default")
    s.add_argument("--chunk-size", type=int, default=180, help="words per chunk (default 180, ~240 tokens)")
    s.add_argument("--overlap", type=int, default=30, help="words shared by consecutive chunks (default 30)")
    s.add_argument("--batch", type=int, default=1000, help="chunks per transaction (documents are never split)")
    s.add_argument("--acl", help="comma-separated ACL labels for chunks that carry none")
    s.add_argument("--bulk", action="store_true",
                   help="drop the HNSW index during the load and rebuild it after (admin; for large loads)")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("ingest-edges", help='load graph edges from JSONL {"src", "dst", "rel"}',
                       description="Load graph edges for a tenant. The file holds " + EDGE_FORMAT + ".",
                       epilog='example line: {"src": "manual.md#0", "dst": "tests.md#3", "rel": "VERIFIES"}; '
                              "edge types are registered by an admin or app role (hybrid.register_edge_type); "
                              "search --seed ID starts the graph branch from a chunk or entity")
    s.add_argument("path", help="a JSONL file of edges")
    s.add_argument("--tenant", required=True)
    s.set_defaults(func=cmd_ingest_edges)

    s = sub.add_parser("search", help="hybrid search as a tenant (flags named as hybrid_retrieve's parameters)")
    s.add_argument("text", help="the query: query_text, and embedded as query_embedding ('' with --seed: graph only)")
    s.add_argument("--tenant", default=os.environ.get("PYHYBRID_TENANT"), required="PYHYBRID_TENANT" not in os.environ)
    s.add_argument("--corpus-ids", "--corpus", dest="corpus_ids", action="append",
                   help="restrict to a corpus (repeatable)")
    s.add_argument("--top-k", type=int, default=10)
    s.add_argument("--per-source-k", type=int, default=None, help="each branch's cut (default max(top_k*3, 30))")
    s.add_argument("--weights", default=None,
                   help="vector,keyword,graph weights in one flag (default: hybrid_retrieve's)")
    s.add_argument("--vector-weight", type=float, default=None)
    s.add_argument("--keyword-weight", type=float, default=None)
    s.add_argument("--graph-weight", type=float, default=None)
    s.add_argument("--fusion", choices=["rrf", "convex", "dbsf", "blend"], default=None,
                   help="how the branches' lists are fused (default: hybrid_retrieve's)")
    s.add_argument("--rrf-k", type=float, default=None, help="the RRF constant (fusion rrf; default 60)")
    s.add_argument("--skip", type=int, default=0, help="fused rows to skip before top_k (pages: give --per-source-k)")
    s.add_argument("--siblings", type=int, default=0,
                   help="show the N nearest chunks of the same document around each hit")
    s.add_argument("--graph-edge-types", action="append", help="traverse only this edge type (repeatable)")
    s.add_argument("--seed", action="append", help="start the graph branch from this chunk or entity id (repeatable)")
    s.add_argument("--rerank", choices=["maxsim"], default=None,
                   help="re-order the best --rerank-depth rows: maxsim = the query's best MiniLM cosine with any "
                        "passage of a chunk (offline)")
    s.add_argument("--rerank-depth", type=int, default=50, help="fused rows the reranker re-orders (default 50)")
    s.add_argument("--lexical", choices=["bm25", "ts_rank"])
    s.add_argument("--graph-hops", "--hops", dest="graph_hops", type=int, default=1)
    s.add_argument("--graph-expand", type=int, default=0,
                   help="seed the graph branch with the N best dense/lexical hits (default 0: the graph only "
                        "from --seed; on CACM's citations no expansion helped beyond noise, bench/graph_quality.py)")
    s.add_argument("--filter", help='metadata filter as JSON, e.g. \'{"lang": "en"}\'')
    s.add_argument("--acl", help="comma-separated ACL labels the caller holds")
    s.add_argument("--per-document", action="store_true", help="best chunk per document only")
    s.add_argument("--json", action="store_true")
    s.add_argument("--explain", action="store_true", help="which source found which row, and the SQL call")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("demo", help="the guided tour: two tenants, a regulated-product corpus, hybrid queries")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except PyhybridError as exc:
        print(f"pyhybrid: error: {exc}", file=sys.stderr)
        return 2
    except (psycopg.OperationalError, json.JSONDecodeError, InvalidParameterError) as exc:
        print(f"pyhybrid: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
