"""The pyhybrid command line: server, migrate, doctor, tenant, ingest, documents, ingest-edges, search, embed, sql,
demo."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Sequence

import psycopg
import psycopg.sql
from psycopg import conninfo

from . import _base, _sql, maintenance, migrate, server, transfer
from ._base import AbstainedWarning
from ._jsonl import read_jsonl
from .errors import InvalidParameterError, PyhybridError, TenantError, from_psycopg
from .ingest import ingest_records
from .query import RetrieveQuery
from .fusion import FUSIONS
from .types import ChunkRef, HybridWeights, shown_branches

APP_ROLE = "pyhybrid_app"


FLAGS = {
    "tenant_id": "--tenant", "top_k": "--top-k", "per_source_k": "--per-source-k", "vector_weight": "--vector-weight",
    "keyword_weight": "--keyword-weight", "graph_weight": "--graph-weight", "rrf_k": "--rrf-k",
    "graph_hops": "--graph-hops", "graph_expand": "--graph-expand", "skip": "--skip", "siblings": "--siblings",
    "graph_edge_types": "--graph-edge-types", "graph_seeds": "--seed", "corpus_ids": "--corpus", "filter": "--filter",
    "fusion": "--fusion", "lexical": "--lexical", "graph_decay": "--graph-decay", "term_coverage": "--term-coverage",
    "acl_labels": "--acl",
    "query_text": "the query text", "chunk_size": "--chunk-size", "overlap": "--overlap", "dim": "--dim",
}
"""The parameter names errors use (hybrid_retrieve's, the Python API's) and the flag a CLI user typed."""
_FLAG_WORD = re.compile(r"(?<![\w./-])(" + "|".join(sorted(FLAGS, key=len, reverse=True)) + r")(?![\w/-])")
_MISSING_TENANT = re.compile(r"tenant_id '([^']*)' does not exist")
_READ_ONLY = re.compile(r"role (\S+) may read tenant '([^']+)' but not write it")


def in_flags(message: str) -> str:
    """An error message with parameter names replaced by the flags that set them."""
    return _FLAG_WORD.sub(lambda m: FLAGS[m[1]], message)


def _data_dir_flag(args: argparse.Namespace) -> str:
    """The global flag that names the server the user chose, to repeat in a hint ('' for the default one)."""
    if getattr(args, "dsn", None):
        return "--dsn ... "  # not the DSN itself: it may hold a password
    return f"--data-dir {shlex.quote(str(args.data_dir))} " if getattr(args, "data_dir", None) else ""


class Target:
    """Where a command works: the admin DSN, and the non-superuser app DSN tenant work runs as."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.embedded = not (args.dsn or os.environ.get(server.ENV_DSN))
        data_dir = Path(args.data_dir) if getattr(args, "data_dir", None) else None
        self.admin = server.resolve_dsn(args.dsn, data_dir)

    def ensure_ready(self, *, migrate_always: bool = False) -> None:
        """On the embedded server: migrate to head and create the app role (both idempotent) when the schema
        is not this package's or the role is missing (one query decides), or always with migrate_always."""
        if not self.embedded:
            return
        if not migrate_always:
            with psycopg.connect(self.admin, autocommit=True) as c:
                if migrate.is_current(c, APP_ROLE):
                    return
        migrate.upgrade(self.admin)
        with psycopg.connect(self.admin, autocommit=True) as c:
            if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone() is None:
                c.execute("SELECT set_config('pyhybrid.role', %s, false)", (APP_ROLE,))
                c.execute("DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN', "
                          "current_setting('pyhybrid.role')); END $$")
            c.execute("SELECT hybrid.grant_app(%s)", (APP_ROLE,))

    def ensure_tenant(self, tenant: str) -> None:
        """Create the tenant if missing (as the admin DSN)."""
        from ._base import translate_errors

        with translate_errors(), psycopg.connect(self.admin, autocommit=True) as c:
            c.execute(_sql.CREATE_TENANT_SQL, (tenant, None, None))

    @property
    def app(self) -> str:
        """The DSN tenant work runs as: the app role on the embedded server (RLS applies), else the DSN given."""
        return conninfo.make_conninfo(self.admin, user=APP_ROLE) if self.embedded else self.admin


def _create_tenant(target: Target, args: argparse.Namespace) -> bool:
    """Create --tenant when --create-tenant says so (default: on the embedded server only); True if it did."""
    create = target.embedded if args.create_tenant is None else args.create_tenant
    if create:
        target.ensure_tenant(args.tenant)
    return bool(create)


@contextlib.contextmanager
def _tenant_hint(args: argparse.Namespace) -> Iterator[None]:
    """A missing tenant's error, or a reading role's refused write, names the pyhybrid command that mends it (not
    the SQL)."""
    try:
        yield
    except PyhybridError as exc:
        reader = _READ_ONLY.search(str(exc))
        if reader:
            raise InvalidParameterError(
                f"role {reader[1]} may read tenant {reader[2]!r} but not write it: writing needs every ACL label; "
                f"an admin grants them with `pyhybrid {_data_dir_flag(args)}tenant grant {reader[2]} {reader[1]} "
                "--acl '*'`") from exc
        m = _MISSING_TENANT.search(str(exc))
        if not m:
            raise
        raise InvalidParameterError(
            f"tenant {m[1]!r} does not exist: create it with `pyhybrid {_data_dir_flag(args)}tenant create {m[1]}` "
            f"(admin), or pass --create-tenant") from exc


def _print_table(refs: Sequence[ChunkRef], *, width: int = 72, skip: int = 0, rerank: bool = False) -> None:
    idw = max([26, *(len(r.chunk_id) for r in refs)])  # whole ids: a cut id can look like another one
    rr = f" {'rerank':>8}" if rerank else ""
    shown = shown_branches(refs)
    print(f"{'rank':>4}  {'chunk':<{idw}}{rr} {'fused':>8}  " + " ".join(f"{b.label or b.name:>5}" for b in shown)
          + "  content")
    for i, r in enumerate(refs, start=skip + 1):
        text = " ".join((r.content or "").split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        rs = "" if not rerank else f" {'-':>8}" if r.rerank_score is None else f" {r.rerank_score:8.5f}"
        ranks = " ".join(f"{r.ranks.get(b.name, '-'):>5}" for b in shown)
        print(f"{i:>4}  {r.chunk_id:<{idw}}{rs} {r.score:8.5f}  {ranks}  {text}")


def _print_context(ref: ChunkRef) -> None:
    if not ref.graph_context:
        return
    print(f"      graph context of {ref.chunk_id}:")
    for c in ref.graph_context:
        arrow = "->" if c.get("direction") == "out" else "<-"
        title = f"  {c['title']}" if c.get("title") else ""
        print(f"        {arrow} {c.get('rel')} {arrow} {c.get('node_id')} ({c.get('kind')}){title}")


def _literal(conn: psycopg.Connection[Any], value: str) -> str:
    return psycopg.sql.Literal(value).as_string(conn)


def psql_block(conn: psycopg.Connection[Any], query: RetrieveQuery, tenant: str, acl: Sequence[str]) -> str:
    """The call as a block that runs as is in psql (pyhybrid sql): the role the search ran as, a transaction,
    the tenant context, the call."""
    role = psycopg.sql.Identifier(str(conn.info.user)).as_string(conn)
    lines = ["BEGIN;", f"SET LOCAL ROLE {role};", f"SET LOCAL hybrid.tenant_id = {_literal(conn, tenant)};"]
    if acl:
        lines.append(f"SET LOCAL hybrid.acl_labels = {_literal(conn, ','.join(acl))};")
    return "\n".join([*lines, query.to_sql(), "COMMIT;"])


def _json_flag(flag: str) -> Callable[[str], Any]:
    """A parser of a flag's JSON value, naming the flag in its error."""
    def parse(text: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"{flag} must be JSON: {exc.msg} at character {exc.pos + 1}") from None
    return parse


def _extra(args: argparse.Namespace) -> dict[str, Any]:
    """The search flags RetrieveQuery's fields declare themselves (metadata "cli"), where given."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(RetrieveQuery)
            if "cli" in f.metadata and getattr(args, f.name, None) is not None}


def _query(args: argparse.Namespace, embed: Callable[[str], Any]) -> RetrieveQuery:
    """The RetrieveQuery of the search flags, the text embedded by embed when the dense branch has weight."""
    if not args.text.strip() and not args.seed:
        raise InvalidParameterError("the query text is empty: give words to search for (or --seed ID)")
    try:
        flt = json.loads(args.filter) if args.filter else None
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"--filter must be a JSON object such as '{{\"lang\": \"en\"}}': {exc.msg} "
                                    f"at character {exc.pos + 1} of {args.filter!r}") from None
    # hybrid_retrieve's own defaults unless a flag says otherwise
    try:
        w = HybridWeights.parse(args.weights) if args.weights else None
        if w:
            RetrieveQuery(query_text="x", vector_weight=w.vector, keyword_weight=w.keyword, graph_weight=w.graph)
    except InvalidParameterError as exc:  # a weight of --weights: not the flag --vector-weight
        m = re.match(r"^(vector|keyword|graph)_weight (.*)$", str(exc))
        if not m:
            raise
        raise InvalidParameterError(f"--weights: the {m[1]} weight {m[2]}") from None
    weights: dict[str, Any] = (
        {"vector_weight": w.vector, "keyword_weight": w.keyword, "graph_weight": w.graph} if w else {})
    for name in ("vector_weight", "keyword_weight", "graph_weight", "rrf_k", "fusion", "graph_decay", "term_coverage"):
        if getattr(args, name) is not None:
            weights[name] = getattr(args, name)
    defaults = {f.name: f.default for f in dataclasses.fields(RetrieveQuery)}
    text = args.text if args.text.strip() else None
    dense = text is not None and float(weights.get("vector_weight", defaults["vector_weight"])) > 0
    graph = float(weights.get("graph_weight", defaults["graph_weight"])) > 0
    return RetrieveQuery(
        query_embedding=embed(args.text) if dense else None, query_text=text, graph_seeds=args.seed or None,
        corpus_ids=args.corpus_ids or None, top_k=args.top_k, per_source_k=args.per_source_k,
        filter=flt, graph_hops=args.graph_hops,
        lexical=args.lexical, graph_expand=args.graph_expand if graph else 0,
        with_graph_context=True, per_document=args.per_document, skip=args.skip, siblings=args.siblings,
        graph_edge_types=args.graph_edge_types, abstain=args.abstain, **weights, **_extra(args),
    )


NO_SEED_VISIBLE = "no seed among the given ids is visible to tenant {tenant!r}"
"""The same words whether a seed is another tenant's or nobody's: a caller cannot tell them apart."""


def _calibrate(t: Any) -> None:
    """Refresh the tenant's abstention floor after a write (search --abstain reads it); a tenant with fewer than 20
    chunks with embeddings keeps none."""
    try:
        with t.conn.transaction():
            t.calibrate_abstention()
    except PyhybridError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != "55000":
            raise


SEARCH_NO_ROWS, SEARCH_ABSTAINED = 1, 3
"""search's exit status without rows (docs/cli.md): nothing matched, or --abstain found nothing relevant; 0 with
rows, 2 an error (an unknown tenant on the embedded server among them)."""


def search(dsn: str, args: argparse.Namespace, admin: str | None = None) -> int:
    """Run one search as the CLI does; prints the table, JSON or explanation; returns the exit status.

    admin: a DSN that may read every tenant (the embedded server's): a search without rows for a tenant that does
    not exist then says so (a tenant role cannot tell "no such tenant" from "not yours": with its DSN it cannot)."""
    from .client import HybridClient
    from .embedders import cli_spec

    _query(args, lambda text: [1.0])  # a bad flag is named before anything is loaded or connected
    acl = [a for a in (args.acl or "").split(",") if a]
    report: dict[str, Any] = {}
    block = ""
    unseen: list[str] = []
    with HybridClient(dsn) as client, client.tenant(args.tenant, acl) as t:
        # refused (naming both) when a corpus in scope records another embedder
        query = _query(args, lambda text: t.embed_query(text, args.corpus_ids, embedder=cli_spec(args.embedder)))
        if query.graph_seeds:
            kinds = t.classify_ids(query.graph_seeds)
            unseen = [s for s in query.graph_seeds if not {"chunk", "entity"} & set(kinds.get(s, []))]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AbstainedWarning)
            refs = t.retrieve(query)
        abstained = [str(w.message) for w in caught if issubclass(w.category, AbstainedWarning)]
        for w in caught:
            if not issubclass(w.category, AbstainedWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if args.explain:
            report = t.explain_retrieve(query)
            block = psql_block(t.conn, query, args.tenant, acl)
    if unseen and len(unseen) == len(query.graph_seeds or []):
        print(f"pyhybrid: note: {NO_SEED_VISIBLE.format(tenant=args.tenant)}: " + ", ".join(unseen), file=sys.stderr)
    elif unseen:
        print(f"pyhybrid: note: {len(unseen)} of the {len(query.graph_seeds or [])} seeds are not visible to tenant "
              f"{args.tenant!r}: " + ", ".join(unseen), file=sys.stderr)
    if not refs and admin is not None:
        _require_tenant(admin, args.tenant)
    if args.json:
        out = [dataclasses.asdict(r) for r in refs]
        if args.explain:
            print(json.dumps({"rows": out, "explain": report, "psql": block}, indent=2, default=list))
        else:
            print(json.dumps(out, indent=2, default=list))
    if not refs:
        print(_no_rows(args, query, abstained, unseen), file=sys.stderr)
    elif not args.json:
        _print_table(refs, skip=query.skip)
        _print_context(refs[0])
        for r in refs:
            if r.siblings:
                print(f"      siblings of {r.chunk_id}: "
                      + ", ".join(f"{s['chunk_id']} (position {s['position']})" for s in r.siblings))
    if args.explain and not args.json:
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
        print(f"\nThe SQL call, as the role this search ran as (run it as is in: pyhybrid {_data_dir_flag(args)}sql):")
        print(block)
    return 0 if refs else SEARCH_ABSTAINED if abstained else SEARCH_NO_ROWS


def _no_rows(args: argparse.Namespace, query: RetrieveQuery, abstained: list[str], unseen: list[str]) -> str:
    """The line that says why a search returned no rows."""
    if abstained:
        return f"no answer for tenant {args.tenant!r}: nothing relevant ({abstained[0].split(': ', 1)[-1]})"
    graph_only = query.query_text is None
    if graph_only and unseen and len(unseen) == len(query.graph_seeds or []):
        why = "nothing to start the graph branch from"
    elif graph_only:
        why = (f"the seeds have no neighbours within {query.graph_hops} hop(s) that this role may see "
               f"(edges are loaded with: pyhybrid {_data_dir_flag(args)}ingest-edges FILE --tenant {args.tenant})")
    else:
        # the same words whatever the cause: a tenant role cannot tell "no such tenant" from "not yours"
        why = "the tenant or corpus may not exist, hold no chunks this role may see, or nothing matched"
    return (f"no results for tenant {args.tenant!r}" + (f" in corpus {', '.join(args.corpus_ids)}" if args.corpus_ids
                                                        else "") + f": {why}")


def _require_tenant(admin: str, tenant: str) -> None:
    """As a role that reads every tenant: refuse, by name, a tenant that does not exist."""
    with psycopg.connect(admin, autocommit=True) as c:
        if c.execute("SELECT 1 FROM hybrid.tenant WHERE tenant_id = %s", (tenant,)).fetchone() is None:
            raise TenantError(f"tenant {tenant!r} does not exist (pyhybrid tenant list shows the tenants; pyhybrid "
                              f"tenant create {tenant} creates one)")


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
        # the hints name this data dir: copied, they act on this server and no other
        flag = f"--data-dir {shlex.quote(str(where))}"
        print(f"it keeps running after a pyhybrid command ends; stop it with: pyhybrid {flag} server stop")
        print(f"to remove it and every tenant's data: pyhybrid {flag} server stop && rm -rf {shlex.quote(str(where))}")
        print(f"elsewhere: pyhybrid --data-dir DIR ... or ${server.ENV_DATA_DIR}=DIR; an external server: "
              f"--dsn or ${server.ENV_DSN}")
    else:
        st = server.embedded_status(data_dir)
        if not st["running"]:
            print(f"the embedded server is not running: pyhybrid {_data_dir_flag(args)}server start", file=sys.stderr)
            return 1
        print(st["dsn"])
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    migrate.check_dim(args.dim, "--dim")
    target = Target(args)
    with psycopg.connect(target.admin) as c:
        report = migrate.check_extensions(c)
        if args.dim is not None and not args.downgrade:
            row = c.execute("SELECT to_regclass('hybrid.chunk') IS NOT NULL").fetchone()
            if row and row[0]:
                dim = c.execute(_sql.EMBEDDING_DIM_SQL).fetchone()
                if dim and dim[0] != args.dim:
                    raise InvalidParameterError(
                        f"--dim {args.dim}: this install stores {dim[0]}-dimension embeddings, and --dim applies "
                        f"to a fresh install only; to start over with {args.dim} (every tenant's data is removed): "
                        f"pyhybrid {_data_dir_flag(args)}migrate --downgrade base && "
                        f"pyhybrid {_data_dir_flag(args)}migrate --dim {args.dim}")
    for name, what in report.missing_optional.items():
        print(f"note: extension {name!r} is not available on this server: {what} is disabled", file=sys.stderr)
    if args.downgrade:
        migrate.downgrade(target.admin, revision=args.downgrade)
        print(f"downgraded to {args.downgrade}")
    else:
        migrate.upgrade(target.admin, dim=args.dim, reapply=args.reapply, pg_textsearch=args.pg_textsearch)
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
    if args.dense_kind:
        maintenance.set_dense_index_kind(target.admin, args.dense_kind, report=print)
    with psycopg.connect(target.admin, autocommit=True) as c:  # no transaction over every check: a lock a partition
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
        if args.action == "list":
            _print_tenants(c.tenants(), as_json=args.json)
        elif args.action == "create":
            print(c.create_tenant(args.tenant, language=args.language, placement=args.placement))
        elif args.action == "move":
            c.move_tenant(args.tenant, args.placement)
            print(f"tenant {args.tenant}: " + ("in a partition of its own" if args.placement == "dedicated"
                                               else "in the pool"))
        elif args.action == "place":
            moved = maintenance.place_tenants(target.admin, report=print)  # every due tenant
            print(f"{len(moved)} tenant(s) moved to partitions of their own")
        elif args.action == "language":
            if args.language is None:
                shown = c.tenant_language(args.tenant)
                if shown is None:
                    raise InvalidParameterError(f"tenant {args.tenant!r} does not exist")
                print(shown)
            else:
                print(f"tenant {args.tenant}: language {c.set_tenant_language(args.tenant, args.language)}")
        elif args.action == "calibrate":
            _require_tenant(target.admin, args.tenant)
            with c.tenant(args.tenant, ["*"]) as t:
                floor = t.calibrate_abstention(args.quantile)
            how = (f"0.82 x the quantile {args.quantile} of random pairs" if args.quantile is not None else
                   "0.60 x a chunk's median similarity to its 10th nearest chunk of another document")
            print(f"tenant {args.tenant}: abstention floor {floor:.4f} (cosine similarity, {how})")
        elif args.action == "grant":
            c.grant_tenant(args.role, args.tenant, [a for a in (args.acl or "").split(",") if a])
            print(f"role {args.role} may act for tenant {args.tenant}")
        elif args.action == "grant-app":
            c.grant_app(args.role)
            print(f"role {args.role} is a trusted app role")
        elif args.action == "drop":
            if not args.yes:
                raise InvalidParameterError(f"tenant drop removes every chunk, corpus, graph node and grant of "
                                            f"{args.tenant!r}: confirm with --yes")
            removed = c.drop_tenant(args.tenant)
            print(f"dropped tenant {args.tenant}: " + ", ".join(f"{v} {k}" for k, v in removed.items()))
        elif args.action == "export":
            n = transfer.export_tenant(c, args.tenant, args.file)
            print(f"exported tenant {args.tenant} to {args.file}: " + ", ".join(f"{v} {k}" for k, v in n.items()))
        else:  # import
            n = transfer.import_tenant(c, args.file, args.as_tenant)
            print(f"imported {args.file}: " + ", ".join(f"{v} {k}" for k, v in n.items()))
    return 0


def _print_tenants(rows: Sequence[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        for r in rows:
            print(json.dumps({**r, "created_at": r["created_at"].isoformat()}))
        return
    w = max([6, *(len(r["tenant_id"]) for r in rows)])
    print(f"{'tenant':<{w}} {'corpora':>7} {'documents':>9} {'chunks':>9} {'superseded':>10} {'language':<10} "
          f"{'placement':<9} roles")
    for r in rows:
        print(f"{r['tenant_id']:<{w}} {r['corpora']:>7} {r['documents']:>9} {r['chunks']:>9} {r['superseded']:>10} "
              f"{r['language']:<10} {r['placement']:<9} " + (",".join(r["roles"]) or "-"))
    print(f"{len(rows)} tenant(s)", file=sys.stderr)


def _session_acl(dsn: str, acl: str | None) -> list[str] | None:
    """The ACL labels a listing or a folder sync acts with: --acl when given; else every label for an app role
    (the CLI on the embedded server, or a --dsn of an app role or superuser), and a tenant login role's own
    grant (labels it lacks cannot be claimed)."""
    if acl:
        return [a for a in acl.split(",") if a]
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute("SELECT pg_has_role(current_user, 'hybrid_app', 'MEMBER')").fetchone()
    return ["*"] if row and row[0] else None


def cmd_documents(args: argparse.Namespace) -> int:
    from .client import HybridClient

    _base.tenant_params(args.tenant, None)
    target = Target(args)
    target.ensure_ready()
    with _tenant_hint(args), HybridClient(target.app) as c:
        if args.action == "list":
            with c.tenant(args.tenant, _session_acl(target.app, args.acl), read_only=True) as t:
                docs = t.documents(args.corpus, prefix=args.prefix)
            if args.json:
                for d in docs:
                    print(json.dumps({**dataclasses.asdict(d), "updated_at": d.updated_at.isoformat()}))
            else:
                w = max([8, *(len(d.document_id) for d in docs)])
                cw = max([6, *(len(d.corpus_id) for d in docs)])
                print(f"{'corpus':<{cw}} {'document':<{w}} {'chunks':>6}  {'updated':<19}  title")
                for d in docs:
                    print(f"{d.corpus_id:<{cw}} {d.document_id:<{w}} {d.chunks:>6}  "
                          f"{d.updated_at.strftime('%Y-%m-%d %H:%M:%S')}  {(d.title or '')[:60]}")
            print(f"{len(docs)} document(s), {sum(d.chunks for d in docs)} chunk(s)", file=sys.stderr)
            return 0
        # delete: all named documents or none
        with c.tenant(args.tenant) as t:
            deleted = {d: t.delete_document(d, args.corpus) for d in args.documents}
            missing = [d for d, n in deleted.items() if n == 0]
            if missing:
                where = f" in corpus {args.corpus!r}" if args.corpus else ""
                raise InvalidParameterError(
                    f"no document {', '.join(repr(m) for m in missing)}{where} in tenant {args.tenant!r}: nothing "
                    "deleted (`pyhybrid documents list` shows what it holds)")
    for d, n in deleted.items():
        print(f"deleted {d}: {n} chunk(s)")
    return 0


_UNSUPPORTED = re.compile(r"^unsupported file type (\S*) \((.*)\)$")


def _report_skipped(skipped: Sequence[tuple[str, str]], quiet: bool) -> None:
    """A line per file that looked readable and was not (a binary .txt, a broken PDF); the files of unsupported
    types in one line, with the types read (none with quiet)."""
    by_type: dict[str, int] = {}
    reads = ""
    for f, reason in skipped:
        m = _UNSUPPORTED.match(reason)
        if m:
            by_type[m[1]] = by_type.get(m[1], 0) + 1
            reads = m[2]
        else:
            print(f"pyhybrid: skipped {f}: {reason}", file=sys.stderr)
    if by_type and not quiet:
        kinds = ", ".join(f"{n} {t or '(no suffix)'}" for t, n in sorted(by_type.items()))
        print(f"pyhybrid: skipped {sum(by_type.values())} file(s) of unsupported type: {kinds} ({reads})",
              file=sys.stderr)


def cmd_ingest(args: argparse.Namespace) -> int:
    from . import folder
    from .chunking import DEFAULT_CHUNK_TOKENS, scan_source
    from .client import HybridClient

    _base.tenant_params(args.tenant, None)
    path = Path(args.path)
    if not path.exists():
        raise InvalidParameterError(f"path {str(path)!r} does not exist")
    if args.prune and not path.is_dir():
        raise InvalidParameterError(f"--prune needs a directory (it supersedes the documents gone from it); "
                                    f"{str(path)!r} is a file")
    target = Target(args)
    target.ensure_ready()
    corpus = args.corpus or "default"
    # the folder the corpus is synced with decides what the ids are relative to (read only: nothing written yet)
    acl = _session_acl(target.app, None)
    with HybridClient(target.app) as c, c.tenant(args.tenant, acl) as t:
        corpora = t.corpora()
    plan = folder.plan_root(path, corpus, Path(args.root) if args.root else None,
                            folder.remembered_root(corpora, corpus))
    if plan.note:
        print(f"pyhybrid: note: {plan.note}", file=sys.stderr)
    from .embedders import cli_spec

    if args.chunk_size > DEFAULT_CHUNK_TOKENS:  # the embedder reads no more: the rest is lexical only
        print(f"pyhybrid: note: --chunk-size {args.chunk_size} is above the {DEFAULT_CHUNK_TOKENS} tokens the bundled "
              "embedder reads (all-MiniLM-L6-v2 truncates at 256 with its 2 special tokens): the dense branch sees "
              "only the start of each chunk, the lexical branch all of it", file=sys.stderr)
    # read everything first: a bad path or record fails here, before a tenant or a row is written
    args.on_interrupt = "no chunk was written"
    scan = scan_source(path, root=plan.root, chunk_tokens=args.chunk_size, overlap_tokens=args.overlap,
                       before_large=lambda shown, size: _large_file_note(shown, size, args.quiet))
    for f, note in scan.notes:
        print(f"pyhybrid: note: {f}: {note}", file=sys.stderr)
    _report_skipped(scan.skipped, args.quiet)
    doc_ids = {str(r.get("document_id")) for r in scan.records}
    with HybridClient(target.app) as c, c.tenant(args.tenant, acl) as t:  # only these ids: not the whole tenant
        stored = t.documents(document_ids=sorted(doc_ids)) if doc_ids else []
    print(f"read {len(scan.files_read)} file(s): {len(scan.records)} chunk(s) of {len(doc_ids)} document(s); "
          f"skipped {len(scan.skipped)} file(s)", file=sys.stderr)
    if not scan.records and not args.prune:
        print(f"pyhybrid: error: nothing to ingest under {args.path}", file=sys.stderr)
        return 1
    moved = folder.elsewhere(stored, doc_ids, corpus)
    if moved and not args.move_corpus:
        raise InvalidParameterError(folder.moved_message(moved, corpus, args.corpus is not None))
    if not args.dry_run:
        _create_tenant(target, args)
    records = scan.records

    def load() -> dict[str, int]:
        # no progress bar for a dry run: it embeds and writes nothing, so its rate would say nothing
        return ingest_records(target.app, args.tenant, corpus, iter(records), batch_size=args.batch,
                              acl_labels=[a for a in (args.acl or "").split(",") if a],
                              quiet=args.quiet or args.dry_run, total=len(records), dry_run=args.dry_run,
                              writers=args.writers, embedder=cli_spec(args.embedder))

    totals: dict[str, int] = {}
    if not args.dry_run:
        args.on_interrupt = ("the batches sent before it are written, each whole (a transaction); the same command "
                             "again writes only what is missing")
    with _tenant_hint(args):
        if records and args.bulk and not args.dry_run:
            with HybridClient(target.admin) as admin, admin.bulk_load(build_workers=args.build_workers):
                totals = load()
        elif records:
            totals = load()
        with HybridClient(target.app) as c, c.tenant(args.tenant, acl) as t:
            pruned: dict[str, int] = {}
            if args.prune:
                keep = doc_ids | folder.folder_ids(path, plan.root)
                pruned = t.prune_documents(corpus, keep, prefix=plan.prefix, dry_run=args.dry_run)
            if plan.remember and not args.dry_run:
                t.set_corpus_root(corpus, str(plan.root))
            if not args.dry_run and (pruned or any(totals.get(k) for k in ("inserted", "updated", "superseded"))):
                _calibrate(t)
        if target.embedded and not args.dry_run:  # past the pool's size: a partition of its own, online
            maintenance.place_tenants(target.admin, [args.tenant],
                                      report=None if args.quiet else lambda line: print(f"pyhybrid: {line}", file=sys.stderr))
    for line in folder.summary(pruned, dry_run=args.dry_run):
        print(f"pyhybrid: {line}", file=sys.stderr)
    totals = {"files_read": len(scan.files_read), "files_skipped": len(scan.skipped), **totals}
    if args.prune:
        totals["pruned_documents" if not args.dry_run else "would_prune_documents"] = len(pruned)
        totals["pruned_chunks" if not args.dry_run else "would_prune_chunks"] = sum(pruned.values())
    print(json.dumps(totals))
    return 0


def _large_file_note(shown: str, size: int, quiet: bool) -> Callable[[int, int], None]:
    """The note before a large file is read, and the progress bar of its chunking (none with --quiet)."""
    from .ingest import _progress

    print(f"pyhybrid: note: {shown} is {size / 1e6:.1f} MB: chunking it comes first, then embedding, each with a "
          "progress bar; both take a while", file=sys.stderr, flush=True)
    bars: list[Any] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(_progress(total, f"chunk {Path(shown).name}", quiet))
            bars[0].unit = "piece"
        bars[0].update(done - bars[0].n)
        if done >= total:
            bars[0].close()

    return progress


EDGE_FORMAT = ('one JSON object per line: {"src": ID, "dst": ID, "rel": "UPPER_SNAKE_CASE", "properties": {...}} '
               '(properties optional); an ID is a chunk id (e.g. "manual.md#0") or any other string, which '
               'becomes an entity node')


def read_edges(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The edge records of a JSONL file with their line numbers; a bad line fails with the file, the line
    and the format."""
    if not path.is_file():
        raise InvalidParameterError(f"path {str(path)!r} does not exist or is not a file")
    return list(read_jsonl(path, what="an edge", keys=("src", "dst", "rel", "properties"),
                           required=("src", "dst", "rel"), format_hint=f"ingest-edges reads {EDGE_FORMAT}"))


def cmd_ingest_edges(args: argparse.Namespace) -> int:
    from .client import HybridClient

    _base.tenant_params(args.tenant, None)
    edges = read_edges(Path(args.path))
    if not edges:
        print(f"pyhybrid: error: no edges in {args.path}", file=sys.stderr)
        return 1
    target = Target(args)
    target.ensure_ready()
    _create_tenant(target, args)
    path = Path(args.path)
    with _tenant_hint(args), HybridClient(target.app) as c, c.tenant(args.tenant) as t:
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
    return search(target.app, args, target.admin if target.embedded else None)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    target = Target(args)
    target.ensure_ready(migrate_always=True)
    return run_demo(target.admin, target.app, quiet=args.quiet, flags=_data_dir_flag(args))


def cmd_reembed(args: argparse.Namespace) -> int:
    from .client import HybridClient
    from .embedders import ENV_EMBEDDER, cli_spec
    from .ingest import _progress
    from .reembed import reembed

    if not args.embedder and not os.environ.get(ENV_EMBEDDER):
        raise InvalidParameterError("reembed needs --embedder SPEC: the embedder the corpus moves to")
    target = Target(args)
    target.ensure_ready()
    args.on_interrupt = ("the batches written so far are kept; the same command again resumes after them (until it "
                         "ends, the corpus answers queries of either embedder)")
    with HybridClient(target.app) as c, c.tenant(args.tenant) as t:
        known = {k.corpus_id: k for k in t.corpora()}
    if args.corpus not in known:
        raise InvalidParameterError(f"--corpus: tenant {args.tenant!r} has no corpus {args.corpus!r}"
                                    + (f" (it has {', '.join(sorted(known))})" if known else ""))
    with _tenant_hint(args), _progress(known[args.corpus].chunks, f"reembed {args.tenant}/{args.corpus}",
                                       args.quiet) as bar:
        res = reembed(target.app, args.tenant, args.corpus, cli_spec(args.embedder), batch_size=args.batch,
                      progress=bar.update)
    print(json.dumps(res))
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from .embed import vector_literal
    from .embedders import cli_spec, load_embedder

    if not args.text.strip():
        raise InvalidParameterError("the text to embed is empty")
    literal = vector_literal(load_embedder(cli_spec(args.embedder)).embed_query(args.text))
    if args.json:
        print(json.dumps({"text": args.text, "dim": literal.count(",") + 1, "embedding": json.loads(literal)}))
    else:
        print(literal)
    return 0


def bundled_psql() -> Path:
    """The psql that ships with the embedded server (pgserver's bin/)."""
    return Path(server.bin_dir()) / "psql"


def cmd_sql(args: argparse.Namespace) -> int:
    target = Target(args)
    target.ensure_ready()
    dsn = target.app if target.embedded and not args.admin else target.admin
    env = dict(os.environ)
    if args.tenant:
        _base.tenant_params(args.tenant, None)
        # the session acts for the tenant; a transaction can still say otherwise with SET LOCAL
        value = args.tenant.replace("\\", "\\\\").replace(" ", "\\ ")  # libpq splits options at unescaped spaces
        env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + f" -c hybrid.tenant_id={value}").strip()
    psql = str(bundled_psql())
    argv = [psql, dsn, *[a for a in args.psql_args if a != "--"]]
    if os.name == "posix":
        sys.stdout.flush()
        os.execve(psql, argv, env)
    import subprocess

    return subprocess.run(argv, env=env).returncode


class _Parser(argparse.ArgumentParser):
    """argparse, reading "-1,1,1" as a value (then refused by the weight rule), not as an unknown option."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("formatter_class", _Help)
        super().__init__(*args, **kw)
        self._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$")

    def error(self, message: str) -> NoReturn:
        """One line naming the flag at fault (docs/cli.md), not the usage before it: --help shows that."""
        self.exit(2, f"pyhybrid: error: {message} (see: {self.prog} --help)\n")


class _Help(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already states one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default == argparse.SUPPRESS \
                or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _positive(flag: str) -> Any:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, got {value!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {n}")
        return n
    return parse


def _globals(*, suppress: bool) -> _Parser:
    """--dsn and --data-dir, accepted before the subcommand (the defaults) and after it (SUPPRESS: a value
    given there wins, none given keeps the one before)."""
    g = _Parser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    g.add_argument("--dsn", default=default,
                   help=f"an external PostgreSQL (default: ${server.ENV_DSN}, else the embedded server)")
    g.add_argument("--data-dir", default=default,
                   help=f"the embedded server's data dir (default: ${server.ENV_DATA_DIR}, else "
                        f"{server.default_data_dir()})")
    return g


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pyhybrid", description=__doc__, parents=[_globals(suppress=False)])
    common = _globals(suppress=True)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, **kw: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, parents=[common], **kw)
        return parser

    _admin_commands(add, common)
    _ingest_commands(add, common)
    _search_commands(add)
    return p


def _tenant_flags(s: argparse.ArgumentParser) -> None:
    """--create-tenant, for the commands that write a tenant."""
    s.add_argument("--create-tenant", action=argparse.BooleanOptionalAction, default=None,
                   help="create --tenant if it does not exist (default: yes on the embedded server, no with "
                        "--dsn, where an admin creates tenants: pyhybrid --dsn ... tenant create TENANT)")


def _admin_commands(add: Callable[..., argparse.ArgumentParser], common: _Parser) -> None:
    """server, migrate, doctor and tenant."""
    s = add("server", help="manage the embedded PostgreSQL",
            description="The embedded PostgreSQL (pgserver): start it (it keeps running after a command ends), stop "
                        "it, status (JSON: running, pid, DSN), url (its superuser DSN), info (where its data "
                        "lives, its size, how to stop and remove it).")
    s.add_argument("action", choices=["start", "stop", "status", "url", "info"],
                   help="start | stop | status | url | info (see above)")
    s.set_defaults(func=cmd_server)

    s = add("migrate", help="install or upgrade the hybrid schema (Alembic upgrade head)")
    s.add_argument("--dim", type=int, default=None,
                   help="embedding dimension of a fresh install (1 to 16000, default 384); refused on an install of another one")
    s.add_argument("--downgrade", metavar="REV", help="downgrade to REV instead (base removes everything)")
    s.add_argument("--reapply", action="store_true",
                   help="re-apply sql/idempotent/ even if unchanged (after an extension update, for example)")
    bm25 = s.add_mutually_exclusive_group()
    bm25.add_argument("--no-pg-textsearch", dest="pg_textsearch", action="store_false", default=None,
                      help="a fresh install without pg_textsearch's BM25 index even where the server offers it "
                           "(lexical ranking by ts_rank, as on most managed PostgreSQL); kept by later upgrades")
    bm25.add_argument("--pg-textsearch", dest="pg_textsearch", action="store_true",
                      help="install the BM25 index again after --no-pg-textsearch")
    s.set_defaults(func=cmd_migrate)

    s = add("doctor", help="check the server, extensions, schema, indexes and RLS")
    s.add_argument("--heal", action="store_true",
                   help="rebuild the BM25 indexes a server restart left stale before checking")
    s.add_argument("--densify", action="store_true",
                   help="rebuild, with a denser graph, the HNSW index of each tenant grown past hnsw_dense_rows "
                        "(REINDEX CONCURRENTLY: reads and writes go on) before checking")
    s.add_argument("--dense-kind", choices=maintenance.DENSE_KINDS, default=None,
                   help="make the HNSW index hold vector, halfvec copies or binary codes (auto: the dimension's "
                        "default), built CONCURRENTLY beside the old one, then swapped (docs/operations.md)")
    s.set_defaults(func=cmd_doctor)

    s = add("tenant", help="list, create, move, grant, drop, export and import tenants (admin)")
    ts = s.add_subparsers(dest="action", required=True, parser_class=_Parser, metavar="ACTION")
    t = ts.add_parser("list", parents=[common], help="every tenant: corpora, documents, chunks, placement, bound roles")
    t.add_argument("--json", action="store_true", help="a JSON object per tenant instead of the table")
    t = ts.add_parser("calibrate", parents=[common],
                      help="store the tenant's abstention floor for search --abstain (pyhybrid ingest refreshes it)")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    t.add_argument("--quantile", type=float, default=None,
                   help="a floor from random pairs instead: 0.82 x this quantile of the similarity between two of "
                        "the tenant's chunks (default: 0.60 x the median similarity of a chunk to its 10th nearest "
                        "chunk of another document)")
    t = ts.add_parser("create", parents=[common], help="create a tenant (idempotent)")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id (letters, digits and _ . : -)")
    t.add_argument("--language", default=None,
                   help="its text-search language: a PostgreSQL text search configuration (german, french, spanish, "
                        "..., or simple for a language without a stemmer; default english)")
    t.add_argument("--placement", choices=_base.PLACEMENTS, default=None,
                   help="pool (its chunks in the shared pool: no relation of its own) or dedicated (a partition of its "
                        "own); default: the install's setting tenant_placement (pool)")
    t = ts.add_parser("move", parents=[common],
                      help="move a tenant between the pool and a partition of its own, online (its searches go on, "
                           "its writes wait for the last step)")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--dedicated", dest="placement", action="store_const", const="dedicated",
                       help="to a partition of its own, with its own indexes")
    where.add_argument("--pool", dest="placement", action="store_const", const="pool", help="into the shared pool")
    ts.add_parser("place", parents=[common],
                  help="move every pooled tenant past setting pool_max_chunks to a partition of its own")
    t = ts.add_parser("language", parents=[common],
                      help="show or set a tenant's text-search language (setting it rebuilds the tenant's partition in "
                           "the new language: its writes wait, its searches go on)")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    t.add_argument("language", metavar="LANGUAGE", nargs="?", default=None,
                   help="a text search configuration (german, french, spanish, simple, ...); omitted: show it")
    t = ts.add_parser("grant", parents=[common], help="bind an existing login role to a tenant")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    t.add_argument("role", metavar="ROLE", help="the login role that may act for TENANT only")
    t.add_argument("--acl", help="comma-separated ACL labels the role may claim (default: none)")
    t = ts.add_parser("grant-app", parents=[common], help="make an existing role a trusted app role (acts for any "
                                                           "tenant it names per transaction)")
    t.add_argument("role", metavar="ROLE", help="the role to trust")
    t = ts.add_parser("drop", parents=[common], help="remove a tenant and everything it holds")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    t.add_argument("--yes", action="store_true", help="confirm")
    t = ts.add_parser("export", parents=[common], help="write a tenant to a file, to import elsewhere")
    t.add_argument("tenant", metavar="TENANT", help="the tenant id")
    t.add_argument("file", metavar="FILE", help="the file to write (JSONL; gzip when it ends in .gz)")
    t = ts.add_parser("import", parents=[common], help="load a tenant from an export file")
    t.add_argument("file", metavar="FILE", help="a file written by tenant export")
    t.add_argument("--as-tenant", help="the tenant id to import under (default: the exported one)")
    s.set_defaults(func=cmd_tenant)


def _embedder_flag(s: argparse.ArgumentParser, what: str) -> None:
    s.add_argument("--embedder", default=None, metavar="SPEC",
                   help=f"{what}: minilm (bundled, offline), st:PATH (a sentence-transformers model on disk), "
                        "openai:URL;model=NAME (an OpenAI-compatible /v1/embeddings endpoint), or MODULE:CALLABLE; "
                        "options ;query_prefix=, ;passage_prefix= and more (docs/ingesting.md#embedders; default: "
                        "$PYHYBRID_EMBEDDER, else minilm)")


def _ingest_commands(add: Callable[..., argparse.ArgumentParser], common: _Parser) -> None:
    """ingest, documents and ingest-edges."""
    s = add("ingest", help="chunk, embed and load text, markdown, HTML, PDF and JSONL files")
    s.add_argument("path", help="a file or directory: .txt .md .markdown .rst .html .pdf, README-like and "
                                "suffix-less text files are chunked; .jsonl holds chunk records (chunk_id, "
                                "document_id, content; position, metadata, acl_labels, embedding optional)")
    s.add_argument("--root", help="document ids are file paths relative to this directory, which becomes the corpus's "
                                  "folder (default: the folder the corpus was ingested from, else the directory "
                                  "given, or the file's own directory)")
    s.add_argument("--dry-run", action="store_true",
                   help="read, chunk and compare with what is stored; embed and write nothing")
    s.add_argument("--tenant", required=True, help="the tenant the chunks belong to (required)")
    _tenant_flags(s)
    s.add_argument("--corpus", default=None, help="the corpus within the tenant (default: default)")
    s.add_argument("--prune", action="store_true",
                   help="folder sync: supersede the corpus's documents under PATH whose files are gone, and report "
                        "them (with --dry-run: only report them)")
    s.add_argument("--move-corpus", action="store_true",
                   help="move documents that another corpus of the tenant stores into --corpus (refused without it)")
    # the chunker's defaults (pyhybrid.chunking.DEFAULT_CHUNK_TOKENS / DEFAULT_OVERLAP_TOKENS; test_cli checks them)
    s.add_argument("--chunk-size", type=int, default=254,
                   help="embedder tokens per chunk (default 254: the model reads 256)")
    s.add_argument("--overlap", type=int, default=32, help="tokens shared by consecutive chunks (default 32)")
    s.add_argument("--batch", type=_positive("--batch"), default=1000,
                   help="chunks per transaction (documents are never split)")
    s.add_argument("--acl", help="comma-separated ACL labels for chunks that carry none (default: none)")
    s.add_argument("--bulk", action="store_true",
                   help="drop the HNSW, GIN and BM25 indexes during the load and rebuild them after (admin; for large loads: meanwhile every tenant's search is exact and ts_rank, slow on large tenants)")
    s.add_argument("--writers", type=_positive("--writers"), default=1,
                   help="batches written at once, each on a connection of its own (1 to 16; for pre-embedded loads "
                        "on a server with cores to spare: docs/ingesting.md#speed)")
    s.add_argument("--build-workers", type=_positive("--build-workers"), default=2,
                   help="with --bulk: partition indexes built at once after the load, each on a connection of its own "
                        "(1 to 16; default 2; each takes up to its own maintenance_work_mem)")
    s.add_argument("--quiet", action="store_true",
                   help="no progress bar, no line about files of unsupported types (files that could not be read are "
                        "still named)")
    _embedder_flag(s, "what embeds the chunks; the corpus records it at its first ingest and refuses another")
    s.set_defaults(func=cmd_ingest)

    s = add("reembed", help="re-embed a corpus in place with another embedder (resumable; readers keep querying)")
    s.add_argument("--tenant", required=True, help="the tenant (required)")
    s.add_argument("--corpus", required=True, help="the corpus to re-embed (required)")
    _embedder_flag(s, "the embedder the corpus moves to (required)")
    s.add_argument("--batch", type=_positive("--batch"), default=256, help="chunks a transaction (default 256)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_reembed)

    s = add("documents", help="list or delete a tenant's documents")
    ds = s.add_subparsers(dest="action", required=True, parser_class=_Parser, metavar="ACTION")
    d = ds.add_parser("list", parents=[common], help="the documents the tenant holds (that you can see)")
    d.add_argument("--tenant", required=True, help="the tenant (required)")
    d.add_argument("--corpus", help="only this corpus")
    d.add_argument("--prefix", help="only document ids starting with this (e.g. a folder: basic/)")
    d.add_argument("--acl", help="comma-separated ACL labels to act with (default: every label on the embedded "
                                 "server; with --dsn, the role's grant)")
    d.add_argument("--json", action="store_true", help="a JSON object per document instead of the table")
    d = ds.add_parser("delete", parents=[common], help="delete documents and every chunk of them (all or none)")
    d.add_argument("documents", metavar="DOCUMENT", nargs="+", help="document ids (as `documents list` shows)")
    d.add_argument("--tenant", required=True, help="the tenant (required)")
    d.add_argument("--corpus", help="only in this corpus")
    s.set_defaults(func=cmd_documents)

    s = add("ingest-edges", help='load graph edges from JSONL {"src", "dst", "rel"}',
            description="Load graph edges for a tenant. The file holds " + EDGE_FORMAT + ".",
            epilog='example line: {"src": "manual.md#0", "dst": "tests.md#3", "rel": "VERIFIES"}; '
                   "a new edge type is registered when an admin or app role loads it (a tenant login role "
                   "cannot); "
                   "search --seed ID starts the graph branch from a chunk or entity")
    s.add_argument("path", help="a JSONL file of edges")
    s.add_argument("--tenant", required=True, help="the tenant the edges belong to (required)")
    _tenant_flags(s)
    s.set_defaults(func=cmd_ingest_edges)


def _search_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """search, embed, sql and demo."""
    s = add("search", help="hybrid search as a tenant (flags named as hybrid_retrieve's parameters)")
    s.add_argument("text", help="the query: query_text, and embedded as query_embedding ('' with --seed: graph only)")
    env_tenant = os.environ.get("PYHYBRID_TENANT")
    s.add_argument("--tenant", default=env_tenant, required=env_tenant is None,
                   help="the tenant to search as (default: $PYHYBRID_TENANT, else required)")
    s.add_argument("--corpus-ids", "--corpus", dest="corpus_ids", action="append",
                   help="restrict to a corpus (repeatable; default: every corpus)")
    s.add_argument("--top-k", type=int, default=10, help="rows returned")
    s.add_argument("--per-source-k", type=int, default=None, help="each branch's cut (default: max(--top-k * 3, 30))")
    s.add_argument("--weights", default=None,
                   help="vector,keyword,graph weights in one flag (default: hybrid_retrieve's, 1,1,0.5)")
    s.add_argument("--vector-weight", type=float, default=None, help="dense branch weight; 0 turns it off (default 1)")
    s.add_argument("--keyword-weight", type=float, default=None,
                   help="lexical branch weight; 0 turns it off (default 1)")
    s.add_argument("--graph-weight", type=float, default=None,
                   help="graph branch weight; 0 turns it off (default 0.5)")
    s.add_argument("--graph-decay", type=float, default=None,
                   help="a graph hit scores at least graph weight x its seed's score x this ^ hops (default 0.4)")
    s.add_argument("--term-coverage", type=int, default=None,
                   help="the lexical list weighs in full once one of its 3 best hits holds this many of the query's terms, else that "
                        "share (1: always in full; default 2)")
    s.add_argument("--abstain", action="store_true",
                   help="no rows when nothing is relevant: the 10 best dense hits' mean similarity below the tenant's "
                        "calibrated floor, the best below 1.5 times it, and none of the 3 best lexical hits holding "
                        "every query term (pyhybrid tenant calibrate)")
    s.add_argument("--fusion", choices=list(FUSIONS), default=None,
                   help="how the branches' lists are fused (default: hybrid_retrieve's, convex)")
    s.add_argument("--rrf-k", type=float, default=None, help="the RRF constant (fusion rrf; default 60)")
    s.add_argument("--skip", type=int, default=0,
                   help="fused rows to skip before the --top-k returned (pages: give --per-source-k)")
    s.add_argument("--siblings", type=int, default=0,
                   help="show the N nearest chunks of the same document around each hit")
    s.add_argument("--graph-edge-types", action="append",
                   help="traverse only this edge type (repeatable; default: every type)")
    s.add_argument("--seed", action="append",
                   help="start the graph branch from this chunk or entity id (repeatable; default: none)")
    s.add_argument("--lexical", choices=["bm25", "ts_rank"],
                   help="the lexical ranking (default: bm25 where pg_textsearch is installed, else ts_rank)")
    s.add_argument("--graph-hops", "--hops", dest="graph_hops", type=int, default=1, help="graph hops from the seeds")
    s.add_argument("--graph-expand", type=int, default=0,
                   help="seed the graph branch with the N best dense/lexical hits (default 0: the graph only "
                        "from --seed; on CACM's citations no expansion helped beyond noise, bench/graph_quality.py)")
    s.add_argument("--filter", help='metadata filter as JSON, e.g. \'{"lang": "en"}\' (default: none)')
    s.add_argument("--acl", help="comma-separated ACL labels the caller holds (default: none)")
    s.add_argument("--per-document", action="store_true", help="best chunk per document only")
    for f in dataclasses.fields(RetrieveQuery):  # hybrid_retrieve's parameters that carry their own flag
        if "cli" in f.metadata:
            cli = f.metadata["cli"]
            s.add_argument(cli["flag"], dest=f.name, default=None, help=cli["help"],
                           type={"float": float, "json": _json_flag(cli["flag"])}[cli["parse"]])
    s.add_argument("--json", action="store_true",
                   help="print the rows as JSON (with --explain: an object of rows, explain and the psql block)")
    _embedder_flag(s, "what embeds the query: the corpora's own (refused, naming both, if a corpus records another)")
    s.add_argument("--explain", action="store_true",
                   help="which source found which row, and the SQL block that returns them in pyhybrid sql")
    s.set_defaults(func=cmd_search)

    s = add("embed", help="print a query's embedding as a vector literal, for SQL (psql: \\set v `pyhybrid embed "
                          "'text'`)")
    s.add_argument("text", help="the query text (embedded as search embeds it, with the query prefix)")
    s.add_argument("--json", action="store_true", help='print {"text", "dim", "embedding"} instead')
    _embedder_flag(s, "what embeds the text")
    s.set_defaults(func=cmd_embed)

    s = add("sql", help="open the bundled psql on the server, as the app role on the embedded server",
            description="Open psql (the one shipped with the embedded server: no system psql needed). On the "
                        f"embedded server it connects as the app role {APP_ROLE} (RLS applies: give the tenant "
                        "per transaction with BEGIN; SET LOCAL hybrid.tenant_id = 'acme'; ... COMMIT;, or for the "
                        "session with --tenant); with --dsn, as the DSN's role.",
            epilog="examples: pyhybrid sql --tenant acme | pyhybrid sql -- -c 'SELECT hybrid.version()' | "
                   "pyhybrid sql --tenant acme -- -f query.sql")
    s.add_argument("--tenant", help="act for this tenant for the whole session (default: none; no tenant, no rows)")
    s.add_argument("--admin", action="store_true", help="connect as the embedded server's superuser instead")
    s.add_argument("psql_args", nargs=argparse.REMAINDER, help="arguments for psql, after --")
    s.set_defaults(func=cmd_sql)

    s = add("demo", help="the guided tour: two tenants, a regulated-product corpus, hybrid queries")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_demo)


QUICK_EXIT = {"search", "embed"}
"""Commands that end the process at once when main parses the process's own arguments (the console script):
tearing down numpy, onnxruntime and psycopg's modules at exit took a tenth of a second or more."""


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code = _run(args)
    if argv is None and args.command in QUICK_EXIT:
        with contextlib.suppress(OSError):  # a reader that left (| head)
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    return code


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except (PyhybridError, json.JSONDecodeError) as exc:
        print(f"pyhybrid: error: {in_flags(str(exc)) if args.command != 'tenant' else exc}", file=sys.stderr)
        return 2
    except psycopg.Error as exc:
        print(f"pyhybrid: error: {from_psycopg(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, saying what stays written (docs/cli.md)
        note = getattr(args, "on_interrupt", None)
        print("pyhybrid: interrupted" + (f": {note}" if note else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (| head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
