"""The docs say what is true: every Python, SQL and CLI snippet of README.md and docs/*.md runs as written
after `pyhybrid demo`, and the check its `<!-- check: NAME -->` tag names asserts what the text beside it
claims. One version and the documented defaults are checked against the package and the catalog."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg
import pytest

from tests.docs_blocks import ROOT, Block, block, blocks

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only

APP = "pyhybrid_app"


class Demo:
    """README's starting state: `pyhybrid demo` run on the embedded default server (its own data dir)."""

    def __init__(self, data_dir: Path, output: str) -> None:
        self.data_dir, self.output = data_dir, output

    def dsn(self, role: str | None = None) -> str:
        from pyhybrid.server import embedded_dsn

        return embedded_dsn(role, data_dir=self.data_dir)

    def env(self) -> dict[str, str]:
        import pgserver

        env = {k: v for k, v in os.environ.items() if k != "PYHYBRID_DSN"}
        env["PYHYBRID_DATA_DIR"] = str(self.data_dir)
        bundled = Path(pgserver.__file__).parent / "pginstall" / "bin"  # the bundled psql, as the docs say
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(bundled), env.get("PATH", "")])
        return env

    def retrieve(self, **kw: Any) -> list[tuple[Any, ...]]:
        """(chunk_id, score, vector_rank, keyword_rank, graph_rank) of acme's hybrid_retrieve, by psycopg."""
        args = ", ".join(f"{k} => %({k})s" for k in kw)
        with psycopg.connect(self.dsn(APP)) as c:
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
            return c.execute(f"SELECT chunk_id, score, vector_rank, keyword_rank, graph_rank "
                             f"FROM hybrid_retrieve({args})", kw).fetchall()


@contextlib.contextmanager
def _demo_server() -> Iterator[Demo]:
    from pyhybrid.cli import main
    from pyhybrid.server import stop_embedded

    # a directory of its own under the system temp dir: the server runs as another user (pgserver when run
    # as root), which may not traverse pytest's private tmp_path_factory tree
    data_dir = Path(tempfile.mkdtemp(prefix="pyhybrid-docs-")) / "pgdata"
    mp = pytest.MonkeyPatch()
    mp.setenv("PYHYBRID_DATA_DIR", str(data_dir))
    mp.delenv("PYHYBRID_DSN", raising=False)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert main(["demo"]) == 0
        yield Demo(data_dir, out.getvalue())
    finally:
        stop_embedded(data_dir)
        shutil.rmtree(data_dir.parent, ignore_errors=True)
        mp.undo()


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    """The demo as `pyhybrid demo` left it: blocks that only read run here, in any order."""
    with _demo_server() as d:
        yield d


@pytest.fixture(scope="module")
def writable_demo() -> Iterator[Demo]:
    """A second demo for the blocks that write (WRITES): the others never see their writes, whatever the order."""
    with _demo_server() as d:
        yield d


# ---- the checks: what the sentence after each block says ---------------------------------------------

Result = Any  # Python: (namespace, stdout, warning names); SQL: the rows of each statement; bash: the stdout of each line
CHECKS: dict[str, Callable[[Result, Demo], None]] = {}


def check(name: str) -> Callable[[Callable[[Result, Demo], None]], Callable[[Result, Demo], None]]:
    def register(fn: Callable[[Result, Demo], None]) -> Callable[[Result, Demo], None]:
        CHECKS[name] = fn
        return fn
    return register


SEEDED = dict(query_text="downstream occlusion alarm", graph_seeds=["acme:REQ-012#0"], top_k=5)


@check("demo-output")
def _demo_output(_: Result, demo: Demo) -> None:
    """README's excerpt of the demo's first query: every line shown is a line the demo prints."""
    excerpt = [line for line in block("demo-output").code.splitlines() if line.strip() != "..."]
    printed = {line.rstrip() for line in demo.output.splitlines()}
    assert [line for line in excerpt if line.rstrip() not in printed] == []


@check("sql-retrieve")
def _sql_retrieve(results: Result, demo: Demo) -> None:
    rows = results[3]
    assert len(rows) == 5 and all(r[0].startswith("acme:") for r in rows)
    ranks = {r[0]: (r[2], r[3]) for r in rows}  # keyword_rank, graph_rank
    assert ranks["acme:REQ-012#0"][0] == 1
    # the graph lifts no row above the seed that reached it (graph_decay)
    assert rows[0][0] == "acme:REQ-012#0" and ranks["acme:REQ-010#1"] == (3, 1)


@check("psql")
def _psql(outputs: Result, demo: Demo) -> None:
    """The psql line with the SQL block on its input: the same rows as the SQL block run by psycopg."""
    table = [[c.strip() for c in line.split("|")] for line in outputs[0].splitlines() if line.count("|") == 3]
    assert table[0] == ["chunk_id", "score", "keyword_rank", "graph_rank"]
    expected = demo.retrieve(**SEEDED)
    assert [r[0] for r in table[1:]] == [r[0] for r in expected]
    assert table[1][0] == "acme:REQ-012#0"


@check("sync")
def _sync(res: Result, demo: Demo) -> None:
    lines = [line.split() for line in res[1].splitlines()]
    assert len(lines) == 5 and all(line[0].startswith("acme:") for line in lines)
    assert lines[0] == ["acme:REQ-012#0", "2.0", "1", "1", "None"]


@check("async")
def _async(res: Result, demo: Demo) -> None:
    printed = ast.literal_eval(res[1].strip())
    assert [cid for cid, _ in printed] == [r[0] for r in demo.retrieve(**SEEDED)]


@check("sqlalchemy")
def _sqlalchemy(res: Result, demo: Demo) -> None:
    lines = [line.split(maxsplit=2) for line in res[1].splitlines()]
    assert [line[0] for line in lines] == [r[0] for r in demo.retrieve(**SEEDED)]
    assert all(re.match(r"\d{4}-\d\d-\d\d ", line[2]) for line in lines)  # each chunk's updated_at


@check("one-line")
def _one_line(res: Result, demo: Demo) -> None:
    ids = re.findall(r"'id': '([^']+)'", res[1])
    assert len(ids) == 3 and all(i.startswith("acme:") for i in ids)
    assert res[1].count("'content': ") == res[1].count("'score': ") == res[1].count("'metadata': ") == 3


@check("langchain")
def _langchain(res: Result, demo: Demo) -> None:
    ids = ast.literal_eval(res[1].strip())
    assert len(ids) == 3 and ids[0] == "acme:REQ-012#0" and all(i.startswith("acme:") for i in ids)


@check("llamaindex")
def _llamaindex(res: Result, demo: Demo) -> None:
    lines = [line.split() for line in res[1].splitlines()]
    scores = [float(line[1]) for line in lines]
    assert len(lines) == 3 and all(line[0].startswith("acme:") for line in lines)
    assert scores == sorted(scores, reverse=True)


@check("cli")
def _cli(outputs: Result, demo: Demo) -> None:
    first, as_json, graph, dry_run, doctor = outputs
    assert first.splitlines()[1].split()[1] == "acme:REQ-012#0"
    rows = json.loads(as_json)
    assert rows and all(r["tenant_id"] == "globex" and r["chunk_id"].startswith("globex:") for r in rows)
    table = [line.split() for line in graph.splitlines() if re.match(r"\s+\d+\s", line)]
    assert [(r[1], r[3], r[4], r[5]) for r in table] == [("acme:TP-031#2", "-", "-", "1")]
    summary = json.loads(dry_run.strip().splitlines()[-1])
    assert summary["files_read"] == len(list((ROOT / "docs").glob("*.md"))) and summary["would_write"] > 0
    with psycopg.connect(demo.dsn(APP)) as c:  # without writing
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        assert c.execute("SELECT count(*) FROM hybrid.corpus WHERE corpus_id = 'handbook'").fetchone() == (0,)
    assert doctor.rstrip().endswith("ok")


@check("pages")
def _pages(res: Result, demo: Demo) -> None:
    ns = res[0]
    p1, p2, both = ([r.chunk_id for r in ns[k]] for k in ("page1", "page2", "both"))
    assert len(p1) == len(p2) == 5 and not set(p1) & set(p2)
    assert p1 + p2 == both
    reranked = [r.rerank_score for r in ns["best"]]
    assert reranked == sorted(reranked, reverse=True)
    assert [b["branch"] for b in ns["report"]["branches"]] == ["dense", "lexical"]  # the branches that ran
    row = ns["report"]["rows"][0]
    assert row["chunk_id"] == p1[0] and math.isclose(sum(row["contributions"].values()), row["score"])


@check("fuse")
def _fuse(results: Result, demo: Demo) -> None:
    rows = results[0]
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert rows[0][1] == rows[1][1] and math.isclose(rows[0][1], 1 / 61 + 1 / 62)
    assert [list(r[2]) for r in rows[:2]] == [[1, 2], [2, 1]] and math.isclose(rows[2][1], 1 / 63)


@check("weak-list")
def _weak_list(results: Result, demo: Demo) -> None:
    assert results[1] == [(0.5, 1.0)]


@check("ingest")
def _ingest(res: Result, demo: Demo) -> None:
    ns = res[0]
    assert (ns["first"].inserted, ns["again"].unchanged, ns["again"].inserted + ns["again"].updated) == (2, 2, 0)
    assert ns["found"] == ["acme:DOCNOTE#0"] and ns["deleted"] == 2


@check("embedders")
def _embedders(res: Result, demo: Demo) -> None:
    ns = res[0]
    assert ns["hits"][0].chunk_id == "acme:EMB#0" and ns["recorded"]["name"] == "openai:nomic-embed-text"
    assert ns["recorded"]["passage_prefix"] == "search_document: "
    assert "'openai:nomic-embed-text'" in ns["refused"] and "'minilm'" in ns["refused"]


@check("language")
def _language(res: Result, demo: Demo) -> None:
    assert res[0]["found"] == ["acme-de:0"]


@check("sql-corpora")
def _sql_corpora(res: Result, demo: Demo) -> None:
    assert res[-1] == [("qms", "minilm", "384")]


@check("edges")
def _edges(res: Result, demo: Demo) -> None:
    ns = res[0]
    assert (ns["first"].edges_added, ns["first"].nodes_added) == (1, 1)
    assert (ns["again"].edges_added, ns["again"].edges_present) == (0, 1)
    assert [(r.chunk_id, r.graph_rank) for r in ns["hits"]] == [("acme:REQ-020#0", 1)]


def _parse_cli_lines(code: str) -> int:
    """Each `pyhybrid ...` command of a block parses with the CLI's own parser (its subcommand and flags exist);
    the number of commands parsed."""
    import shlex

    from pyhybrid.cli import build_parser

    parsed = 0
    for line in code.splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if not words or words[0] != "pyhybrid":
                continue
            try:
                build_parser().parse_args(words[1:])
            except SystemExit as exc:
                raise AssertionError(f"does not parse: {part.strip()}") from exc
            parsed += 1
    return parsed


def _parsed_only(name: str, commands: int) -> None:
    @check(name)
    def _parsed(_: Result, demo: Demo) -> None:
        assert _parse_cli_lines(block(name).code) == commands


for _name, _commands in (("readme-demo", 1), ("cli-demo", 2), ("cli-sql", 4), ("cli-ingest", 6), ("cli-documents", 3),
                         ("cli-ingest-edges", 1), ("cli-tenant", 11), ("cli-server", 5), ("cli-migrate", 8),
                         ("cli-move-tenant", 3), ("cli-language", 3)):
    _parsed_only(_name, _commands)


@check("readme-tests")
def _readme_tests(_: Result, demo: Demo) -> None:
    assert block("readme-tests").code.strip() in (ROOT / ".ci" / "run").read_text().splitlines()


@check("cli-search")
def _cli_search(outputs: Result, demo: Demo) -> None:
    first, dense, lexical, graph, as_json, explained, abstained = outputs
    assert first.splitlines()[1].split()[1] == "acme:REQ-012#0"
    ids = [line.split()[1] for line in graph.splitlines() if re.match(r"\s+\d+\s", line)]
    assert ids and "acme:REQ-012#0" not in ids  # graph only: the seed's neighbours
    assert all(r["tenant_id"] == "acme" for r in json.loads(as_json))
    assert "The SQL call" in explained
    assert not re.search(r"^\s+\d+\s", abstained, re.M) and abstained.endswith("exit 3\n")  # no rows: off topic


@check("cli-embed")
def _cli_embed(outputs: Result, demo: Demo) -> None:
    literal, as_json = outputs
    assert len(json.loads(literal)) == 384 and json.loads(as_json)["embedding"] == json.loads(literal)


@check("cli-explain-sql")
def _cli_explain_sql(_: Result, demo: Demo) -> None:
    """The transcript is what `search --explain` prints, line for line (the embedding elided)."""
    printed = _run_bash(Block(ROOT, 0, "bash", 'pyhybrid search "occlusion alarm" --tenant acme --explain\n', None),
                        demo)[0].splitlines()
    sql = printed[printed.index("BEGIN;"):]
    shown = block("cli-explain-sql").code.splitlines()
    assert len(sql) == len(shown)
    for doc, real in zip(shown, sql):
        head, _, tail = doc.partition("...")
        assert real.startswith(head) and real.endswith(tail), (doc, real[:80])


@check("cli-recipe")
def _cli_recipe(_: Result, demo: Demo) -> None:
    out = _run_bash(Block(ROOT, 0, "bash", "pyhybrid sql --tenant acme -- -X -A -t -q -v ON_ERROR_STOP=1\n", None),
                    demo, stdin=block("cli-recipe").code)[0]
    rows = [line.split("|") for line in out.splitlines() if line]
    assert len(rows) == 10 and rows[0][0] == "acme:REQ-012#0"
    assert any(r[1] for r in rows) and any(r[2] for r in rows) and any(r[3] for r in rows), rows


@check("folder-sync")
def _folder_sync(_: Result, demo: Demo) -> None:
    """The folder-sync walk of docs/ingesting.md, run as written in a folder holding docs/ with the files it names."""
    work = Path(tempfile.mkdtemp(prefix="pyhybrid-sync-"))
    try:
        (work / "docs" / "basic").mkdir(parents=True)
        (work / "docs" / "basic" / "usage.rst").write_text("Usage\n=====\n\nCall the zircon quokka scheduler daily.\n")
        (work / "docs" / "news.rst").write_text("News\n====\n\nThe quokka release shipped.\n")
        (work / "docs" / "index.rst").write_text("Index\n=====\n\nStart with basic/usage.\n")
        out = _run_bash(block("folder-sync"), demo, cwd=work, stderr=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first, update, removed, dry, prune, listed, deleted, tenants = out
    assert "would prune 1 document(s)" in dry and "news.rst" in dry
    listed_ids = [line.split()[1] for line in listed.splitlines() if line.split()[:1] == ["manual"]]
    assert sorted(listed_ids) == ["basic/usage.rst", "index.rst"]
    with psycopg.connect(demo.dsn(APP)) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        assert c.execute("SELECT document_id FROM hybrid.documents('manual')").fetchall() == [("index.rst",)]
    assert any(line.split()[0] == "acme" for line in tenants.splitlines()[1:])


# a stand-in for sentence-transformers (the real one needs torch), with the two calls pyhybrid makes
ST_STAND_IN = """import numpy as np
class SentenceTransformer:
    def __init__(self, path, device=None):
        self.path = path
    def get_sentence_embedding_dimension(self):
        return 384
    def encode(self, texts, batch_size, convert_to_numpy, normalize_embeddings, show_progress_bar):
        return np.stack([np.full(384, float(len(t))) for t in texts])
"""
OWN_ENCODER = """class Encoder:
    dim = 384
    def __call__(self, texts):
        return [[1.0 + len(t) % 7] + [0.5] * 383 for t in texts]
"""


@check("cli-embedders")
def _cli_embedders(_: Result, demo: Demo) -> None:
    """Run as written in a folder holding notes/, manuals/, the model directory and my_company/embeddings.py."""
    work = Path(tempfile.mkdtemp(prefix="pyhybrid-embedders-"))
    try:
        for rel, text in (("notes/pump.md", "# Pump\n\nThe infusion pump raises an occlusion alarm on a blocked line.\n"),
                          ("notes/battery.md", "# Battery\n\nReplace the battery within two hours of the warning.\n"),
                          ("manuals/valve.md", "# Valve\n\nClose the valve before you clean the filter.\n"),
                          ("models/e5-small-v2/config.json", "{}"), ("my_company/__init__.py", ""),
                          ("my_company/embeddings.py", OWN_ENCODER), ("site/sentence_transformers/__init__.py", ST_STAND_IN)):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        _, search, _, _ = _run_bash(block("cli-embedders"), demo, cwd=work, env={"PYTHONPATH": str(work / "site")})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert "pump.md" in search
    with psycopg.connect(demo.dsn(APP)) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        recorded = dict(c.execute("SELECT corpus_id, embedder FROM hybrid.corpora() "
                                  "WHERE corpus_id IN ('e5-notes', 'own')").fetchall())
    assert recorded["own"]["name"] == "my_company.embeddings:Encoder"
    assert recorded["e5-notes"]["name"] == "minilm"  # the st model's record, replaced by the re-embedding


@check("backup-restore")
def _backup_restore(_: Result, demo: Demo) -> None:
    """Run by tests/test_durability.py with SRC, DST and DBNAME filled in: it names no other placeholder."""
    code = re.sub(r"#[^\n]*", "", block("backup-restore").code)
    assert set(re.findall(r"\b[A-Z]{3,}\b", code)) == {"SRC", "DST", "DBNAME"}


@check("tenancy")
def _tenancy(results: Result, demo: Demo) -> None:
    assert results[2] == [(0,)]
    assert len(results[4]) == 5 and all(r[0].startswith("globex:") for r in results[4])


@check("bm25-status")
def _bm25_status(results: Result, demo: Demo) -> None:
    assert results[0] == [(0,)]


@check("bm25-any-postgres")
def _bm25_any_postgres(results: Result, demo: Demo) -> None:
    assert results[0] == [(0,)]
    sql_hits, index_hits = results[4], results[8]
    assert len(sql_hits) == 5 and sql_hits == index_hits
    assert results[5] == [("SQL scorer: SET hybrid.bm25_scorer = sql",)]


@check("replica")
def _replica(res: Result, demo: Demo) -> None:
    assert ast.literal_eval(res[1].strip())[0] == "acme:NOTE-1#0"
    assert "LexicalFallbackWarning" not in res[2]  # BM25 on a standby: the SQL scorer, exact, no warning


# blocks that write to the demo's data run on a demo of their own
WRITES = ("ingest", "edges", "replica", "folder-sync", "embedders", "language", "cli-embedders")
# blocks whose check runs what it needs itself (or parses the command lines, running nothing)
OWN_RUN = ("backup-restore", "readme-demo", "readme-tests", "cli-demo", "cli-sql", "cli-ingest", "cli-documents", "cli-ingest-edges",
           "cli-tenant", "cli-server", "cli-migrate", "cli-move-tenant", "cli-explain-sql", "cli-recipe", "folder-sync", "cli-embedders",
           "cli-language")
RUNNABLE = [b for b in blocks() if b.check in CHECKS or b.lang in ("python", "sql")]


def test_every_block_of_the_docs_names_a_check() -> None:
    # every block, shell and plain listings included: an untagged block was never run nor parsed
    untagged = [f"{b.where} ({b.lang or 'plain'})" for b in blocks() if b.check not in CHECKS]
    assert untagged == [], "tag each block with <!-- check: NAME --> and add the check to tests/test_docs.py"
    tags = [b.check for b in blocks() if b.check]
    assert sorted(set(tags)) == sorted(tags), "each check names one block"
    assert set(CHECKS) <= set(tags)


def _run_sql(sql: str, dsn: str) -> list[list[tuple[Any, ...]]]:
    """Each statement of a SQL block, in one autocommit session as psql runs them; the rows of each."""
    out: list[list[tuple[Any, ...]]] = []
    with psycopg.connect(dsn, autocommit=True) as c:
        for stmt in (s for s in re.sub(r"--[^\n]*", "", sql).split(";") if s.strip()):
            cur = c.execute(stmt)
            out.append(cur.fetchall() if cur.description else [])
    return out


def _run_bash(b: Block, demo: Demo, stdin: str | None = None, cwd: Path = ROOT, stderr: bool = False,
              env: dict[str, str] | None = None) -> list[str]:
    """Each line of a shell block, as written, in a shell whose PATH holds this venv and the bundled psql (and env):
    the stdout of each (with stderr: stdout then stderr)."""
    outs = []
    for line in (ln for ln in b.code.splitlines() if ln.strip() and not ln.startswith("#")):
        p = subprocess.run(["bash", "-c", line], cwd=cwd, env={**demo.env(), **(env or {})}, input=stdin, text=True,
                           capture_output=True, timeout=300)
        assert p.returncode == 0, f"{b.where}: {line}\n{p.stdout}\n{p.stderr}"
        outs.append(p.stdout + (p.stderr if stderr else ""))
    return outs


@pytest.mark.parametrize("b", RUNNABLE,
                         ids=lambda b: f"{b.check or b.lang}@{b.where}")
def test_docs_snippet_runs_as_written_and_does_what_the_text_says(
        b: Block, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    assert b.check in CHECKS, f"{b.where}: no check"
    demo: Demo = request.getfixturevalue("writable_demo" if b.check in WRITES else "demo")
    monkeypatch.setenv("PYHYBRID_DATA_DIR", str(demo.data_dir))
    monkeypatch.delenv("PYHYBRID_DSN", raising=False)
    if b.check == "embedders":  # the endpoint it names: a stub on localhost stands in for it
        from tests.embed_stub import EmbeddingStub

        stub = EmbeddingStub().__enter__()
        request.addfinalizer(stub.__exit__)
        monkeypatch.setenv("EMBEDDINGS_URL", stub.url)
    result: Result
    if b.check in OWN_RUN:
        result = None
    elif b.lang == "python":
        ns: dict[str, Any] = {"__name__": "__docs__"}
        out = io.StringIO()
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(b.code, b.where, "exec"), ns)
        assert not [w for w in caught if issubclass(w.category, DeprecationWarning)
                    and "pyhybrid" in str(w.filename) + str(w.message)], "the docs use a deprecated name"
        result = (ns, out.getvalue(), [w.category.__name__ for w in caught])
    elif b.lang == "sql":
        result = _run_sql(b.code, demo.dsn())
    elif b.check == "psql":  # the psql line, fed the SQL block after it
        result = _run_bash(b, demo, stdin=block("sql-retrieve").code)
    elif b.lang == "bash":
        result = _run_bash(b, demo)
    else:
        result = None
    CHECKS[b.check](result, demo)


# ---- one version, and the defaults the docs state ------------------------------------------------------

def test_the_package_hybrid_version_and_the_changelog_name_one_version(demo: Demo) -> None:
    from pyhybrid import __version__

    with psycopg.connect(demo.dsn()) as c:
        assert c.execute("SELECT hybrid.version()").fetchone() == (__version__,)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = [v for v in re.findall(r"^## (\S+)", changelog, re.M) if v != "Unreleased"]
    assert released[0] == __version__


def _catalog_defaults(dsn: str, function: str) -> dict[str, str]:
    with psycopg.connect(dsn) as c:
        args = c.execute("SELECT pg_get_function_arguments(%s::regprocedure)", (function,)).fetchone()[0]
    out = {}
    for arg in re.split(r",\s*(?=\w+ )", args):
        name, _, rest = arg.partition(" ")
        default = rest.partition(" DEFAULT ")[2]
        out[name] = re.sub(r"::[\w ]+(\[\])?$", "", default)
    return out


def test_the_parameter_defaults_docs_state_are_the_catalogs(demo: Demo) -> None:
    text = (ROOT / "docs" / "searching.md").read_text()
    table = text.split("<!-- defaults-of: public.hybrid_retrieve -->", 1)[1].split("\n\n", 1)[0]
    documented = {m[0]: m[1] for m in re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", table, re.M)}
    with psycopg.connect(demo.dsn()) as c:
        signature = c.execute("SELECT 'public.hybrid_retrieve'::regproc::regprocedure::text").fetchone()[0]
    assert documented == _catalog_defaults(demo.dsn(), signature)


def test_descriptions_name_the_catalogs_default_fusion_first(demo: Demo) -> None:
    import pyhybrid

    with psycopg.connect(demo.dsn()) as c:  # hybrid.retrieve has one signature: the catalog names it
        signature = c.execute("SELECT 'hybrid.retrieve'::regproc::regprocedure::text").fetchone()[0]
    default = _catalog_defaults(demo.dsn(), signature)["fusion"].strip("'")
    pyproject = re.search(r'^description = "(.*)"', (ROOT / "pyproject.toml").read_text(), re.M)
    with psycopg.connect(demo.dsn()) as c:
        schema_comment = c.execute("SELECT obj_description('hybrid'::regnamespace, 'pg_namespace')").fetchone()[0]
    for text in (pyproject and pyproject[1], pyhybrid.__doc__, schema_comment):
        assert text is not None
        named = re.findall(r"\b(convex|rrf|dbsf|blend)\b", text, re.I)
        assert named and named[0].lower() == default, text
