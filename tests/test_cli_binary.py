"""The real `pyhybrid` binary as a user runs it: one embedded server for the module, in a data dir of its own."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only

BIN = str(Path(sys.executable).parent / "pyhybrid")
QUESTION = "How quickly must the pump alarm after a downstream occlusion?"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYHYBRID_DSN", "PYHYBRID_DATA_DIR", "PYHYBRID_TENANT")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `pyhybrid embed` inside psql
    return env


def run(*args: str, data_dir: Path | None = None, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    """pyhybrid [--data-dir DATA_DIR] ARGS."""
    argv = [BIN, *(["--data-dir", str(data_dir)] if data_dir else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=600)
    if check is not None:
        assert done.returncode == check, (argv, done.stdout[-2000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """The embedded server after `pyhybrid demo`, stopped and removed at the end of the module."""
    parent = Path(tempfile.mkdtemp(prefix="pyhybrid-cli-test-"))
    path = parent / "pgdata"
    try:
        run("demo", "--quiet", data_dir=path)
        yield path
    finally:
        subprocess.run([BIN, "--data-dir", str(path), "server", "stop"], capture_output=True, env=_env())
        shutil.rmtree(parent, ignore_errors=True)


def _table_ids(out: str) -> list[str]:
    return [line.split()[1] for line in out.splitlines() if re.match(r"^\s+\d+\s+\S+:", line)]


def psql(data_dir: Path, sql: str, *args: str) -> list[str]:
    """sql run by `pyhybrid sql` (the bundled psql, as the app role): its output rows."""
    f = data_dir.parent / "block.sql"
    f.write_text(sql)
    out = run("sql", *args, "--", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(f),
              data_dir=data_dir).stdout
    return [line for line in out.splitlines() if line]


# finding 1
def test_search_dense_only_with_keyword_weight_0(data_dir: Path) -> None:
    out = run("search", "row factories", "--tenant", "acme", "--keyword-weight", "0", "--json",
              data_dir=data_dir).stdout
    rows = json.loads(out)
    assert len(rows) == 10 and all(r["keyword_rank"] is None and r["vector_rank"] is not None for r in rows)


# finding 2
@pytest.mark.parametrize("tenant", ["", "a b/c'd"])
def test_ingest_bad_tenant_is_a_message_naming_the_flag(data_dir: Path, tenant: str) -> None:
    f = data_dir.parent / "note.txt"
    f.write_text("Battery lasts six hours.")
    err = run("ingest", str(f), "--tenant", tenant, "--quiet", data_dir=data_dir, check=2).stderr
    assert err.strip().splitlines()[-1].startswith("pyhybrid: error: --tenant must "), err


@pytest.mark.parametrize("batch", ["0", "-3"])
def test_ingest_batch_below_1_is_refused(data_dir: Path, batch: str) -> None:
    f = data_dir.parent / "note.txt"
    f.write_text("Battery lasts six hours.")
    err = run("ingest", str(f), "--tenant", "acme", "--batch", batch, data_dir=data_dir, check=2).stderr
    assert f"--batch must be at least 1, got {batch}" in err


# finding 3
def test_explain_block_runs_as_is_in_pyhybrid_sql_and_returns_the_printed_rows(data_dir: Path) -> None:
    out = run("search", QUESTION, "--tenant", "acme", "--graph-expand", "1", "--acl", "quality", "--explain",
              data_dir=data_dir).stdout
    block = out[out.index("\nBEGIN;\n") + 1:out.index("\nCOMMIT;\n") + len("\nCOMMIT;\n")]
    assert "SET LOCAL ROLE \"pyhybrid_app\";" in block and "SET LOCAL hybrid.tenant_id = 'acme';" in block
    rows = psql(data_dir, block)
    assert [r.split("|")[0] for r in rows] == _table_ids(out) and len(rows) == 10


def test_explain_with_json_returns_rows_report_and_block(data_dir: Path) -> None:
    got = json.loads(run("search", "occlusion alarm", "--tenant", "acme", "--json", "--explain",
                         data_dir=data_dir).stdout)
    assert set(got) == {"rows", "explain", "psql"}
    assert {b["branch"] for b in got["explain"]["branches"]} >= {"dense", "lexical"}
    assert got["psql"].startswith("BEGIN;\n") and [r["chunk_id"] for r in got["rows"]]


# finding 4
def test_server_info_hints_name_the_data_dir(data_dir: Path) -> None:
    out = run("server", "info", data_dir=data_dir).stdout
    assert f"pyhybrid --data-dir {data_dir} server stop && rm -rf {data_dir}" in out
    assert f"stop it with: pyhybrid --data-dir {data_dir} server stop" in out


# finding 5
def test_graph_only_search_without_edges_says_why_and_prints_no_header(data_dir: Path) -> None:
    f = data_dir.parent / "lonely.txt"
    f.write_text("A tenant with one chunk and no edges.")
    run("ingest", str(f), "--tenant", "lonely", "--quiet", data_dir=data_dir)
    done = run("search", "", "--seed", "lonely.txt#0", "--tenant", "lonely", data_dir=data_dir, check=1)
    assert done.stdout == ""
    assert "the seeds have no neighbours within 1 hop(s)" in done.stderr and "ingest-edges" in done.stderr


def test_unknown_and_other_tenants_seeds_are_reported_in_the_same_words(data_dir: Path) -> None:
    def err(seed: str) -> str:
        done = run("search", "", "--seed", seed, "--tenant", "acme", data_dir=data_dir, check=1)
        assert done.stdout == ""
        return done.stderr.replace(seed, "ID")

    hidden, missing = err("globex:REQ-012#0"), err("acme:NO-SUCH#0")
    assert hidden == missing
    assert "no seed among the given ids is visible to tenant 'acme': ID" in hidden


# finding 6
def test_ingest_with_a_dsn_creates_no_tenant_and_names_the_pyhybrid_command(data_dir: Path) -> None:
    dsn = run("server", "url", data_dir=data_dir).stdout.strip()
    f = data_dir.parent / "note.txt"
    f.write_text("Battery lasts six hours.")
    err = run("ingest", str(f), "--tenant", "viadsn", "--quiet", "--dsn", dsn, check=2).stderr
    assert "tenant 'viadsn' does not exist: create it with `pyhybrid --dsn ... tenant create viadsn`" in err
    assert "SELECT" not in err
    run("ingest", str(f), "--tenant", "viadsn", "--quiet", "--dsn", dsn, "--create-tenant")


def test_ingest_edges_creates_the_tenant_on_the_embedded_server(data_dir: Path) -> None:
    f = data_dir.parent / "edges.jsonl"
    f.write_text('{"src": "a", "dst": "b", "rel": "MENTIONS"}\n')
    err = run("ingest-edges", str(f), "--tenant", "edgesonly", "--no-create-tenant", data_dir=data_dir,
              check=2).stderr
    assert "pyhybrid --data-dir" in err and "tenant create edgesonly" in err and "SELECT" not in err
    assert json.loads(run("ingest-edges", str(f), "--tenant", "edgesonly", data_dir=data_dir).stdout)


def test_ingest_edges_reports_the_bad_line(data_dir: Path) -> None:
    f = data_dir.parent / "edges.jsonl"
    f.write_text('{"src": "a", "dst": "b", "rel": "MENTIONS"}\n\n[1]\n')
    err = run("ingest-edges", str(f), "--tenant", "acme", data_dir=data_dir, check=2).stderr
    assert f"{f}:3: an edge must be a JSON object, got list; ingest-edges reads one JSON object" in err


# finding 7
def test_migrate_refuses_another_dimension_on_an_install(data_dir: Path) -> None:
    err = run("migrate", "--dim", "768", data_dir=data_dir, check=2).stderr
    assert "--dim 768: this install stores 384-dimension embeddings" in err


def test_global_flags_before_and_after_the_subcommand(data_dir: Path) -> None:
    after = run("server", "url", "--data-dir", str(data_dir)).stdout
    assert after.startswith("postgresql://") and after == run("server", "url", data_dir=data_dir).stdout
    assert run("tenant", "create", "flagsafter", "--data-dir", str(data_dir)).stdout.strip() == "flagsafter"


def test_search_offers_no_rerank_flag(data_dir: Path) -> None:
    # the built-in reranker lowered nDCG@10 on all four shared collections: it is no ranking option
    done = run("search", "occlusion alarm", "--tenant", "acme", "--rerank", "maxsim", data_dir=data_dir, check=2)
    assert "unrecognized arguments: --rerank maxsim" in done.stderr


def test_ingest_quiet_leaves_out_unsupported_types_which_are_one_line_otherwise(data_dir: Path) -> None:
    d = data_dir.parent / "mixed"
    d.mkdir(exist_ok=True)
    for name in ("a.xyz", "b.xyz", "c.bin2"):
        (d / name).write_text("x")
    (d / "keep.md").write_text("# Keep\n\nThe pump alarms within 30 seconds.")
    (d / "broken.txt").write_bytes(b"\x00\x01binary")
    # a tenant of its own: the module's server is shared, and the tests after this one rank acme's demo chunks
    quiet = run("ingest", str(d), "--tenant", "quietmix", "--quiet", data_dir=data_dir).stderr
    assert [line for line in quiet.splitlines() if "skipped" in line] == [
        f"pyhybrid: skipped {d / 'broken.txt'}: binary file (it holds NUL bytes)",
        "read 1 file(s): 1 chunk(s) of 1 document(s); skipped 4 file(s)"]
    loud = run("ingest", str(d), "--tenant", "quietmix", "--dry-run", data_dir=data_dir).stderr
    skip_lines = [line for line in loud.splitlines() if line.startswith("pyhybrid: skipped")]
    assert skip_lines == [f"pyhybrid: skipped {d / 'broken.txt'}: binary file (it holds NUL bytes)",
                          "pyhybrid: skipped 3 file(s) of unsupported type: 1 .bin2, 2 .xyz (read: .txt .md .markdown "
                          ".rst .html .pdf .jsonl, README-like names and suffix-less files that read as prose)"]
    assert "chunk/s" not in loud and "it/s" not in loud  # no progress bar for a dry run


# finding 9
def test_embed_gives_psql_the_query_embedding_search_uses(data_dir: Path) -> None:
    literal = run("embed", "occlusion alarm").stdout.strip()
    as_json = json.loads(run("embed", "occlusion alarm", "--json").stdout)
    assert as_json["dim"] == 384 and json.loads(literal) == as_json["embedding"]
    dense = json.loads(run("search", "occlusion alarm", "--tenant", "acme", "--keyword-weight", "0",
                           "--graph-weight", "0", "--top-k", "5", "--json", data_dir=data_dir).stdout)
    rows = psql(data_dir, "\\set qv `pyhybrid embed 'occlusion alarm'`\n"
                          "SELECT chunk_id FROM hybrid_retrieve(query_embedding => :'qv', top_k => 5, "
                          "keyword_weight => 0, graph_weight => 0);\n", "--tenant", "acme")
    assert rows == [r["chunk_id"] for r in dense]


def test_pyhybrid_sql_is_the_app_role_with_the_tenant_given(data_dir: Path) -> None:
    assert psql(data_dir, "SELECT current_user, current_setting('hybrid.tenant_id', true);",
                "--tenant", "acme") == ["pyhybrid_app|acme"]
    assert psql(data_dir, "SELECT count(*) FROM hybrid.chunk;") == ["0"]  # no tenant, no rows


def test_the_sql_recipe_of_docs_cli_md_returns_dense_lexical_and_graph_rows(data_dir: Path) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    recipe = re.search(r"```psql\n(-- pyhybrid sql --tenant acme\n.*?)```", doc, re.S)  # psql: it holds \\set
    assert recipe, "docs/cli.md has no psql recipe block"
    rows = [r.split("|") for r in psql(data_dir, recipe[1], "--tenant", "acme")]
    assert len(rows) == 10 and rows[0][0] == "acme:REQ-012#0"
    # columns: chunk_id, vector_rank, keyword_rank, graph_rank
    assert any(r[1] for r in rows) and any(r[2] for r in rows) and any(r[3] for r in rows), rows


# finding 11
def test_search_on_a_current_schema_does_not_load_alembic(data_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "pyhybrid.cli", "search", "occlusion alarm",
                           "--tenant", "acme", "--data-dir", str(data_dir)], capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "acme:REQ-012#0" in done.stdout
    assert not re.search(r"\|\s+alembic\b", done.stderr)  # the migration check is one query, not an upgrade


# finding 12
def test_help_shows_every_flag_with_help_and_ingest_lists_pdf() -> None:
    from pyhybrid.cli import build_parser

    assert ".pdf" in run("ingest", "--help").stdout
    grant = run("tenant", "grant", "--help").stdout
    assert "TENANT ROLE" in grant
    todo: list[tuple[list[str], argparse.ArgumentParser]] = [(["pyhybrid"], build_parser())]
    while todo:
        path, p = todo.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(([*path, name], sp) for name, sp in action.choices.items())
            elif action.option_strings and action.dest != "help":
                where = f"{' '.join(path)} {action.option_strings[0]}"
                assert action.help, f"{where} has no help"
                if action.default is not None and action.default is not False:
                    assert "default" in p._get_formatter()._get_help_string(action), f"{where}: no default shown"
    assert "(default: 0)" in run("search", "--help").stdout


def test_errors_name_the_flag_typed(data_dir: Path) -> None:
    err = run("search", "x", "--tenant", "acme", "--top-k", "0", data_dir=data_dir, check=2).stderr
    assert "--top-k must be between 1 and 1000, got 0" in err and "top_k" not in err
    err = run("search", "x", "--tenant", "acme", "--top-k", "20", "--per-source-k", "5", data_dir=data_dir,
              check=2).stderr
    assert "--per-source-k must be between --top-k (20)" in err, err


# finding 8
def test_embedded_dsn_of_the_app_role_on_a_fresh_data_dir_names_the_command_that_creates_it() -> None:
    from pyhybrid.errors import ServerError
    from pyhybrid.server import embedded_dsn, stop_embedded

    parent = Path(tempfile.mkdtemp(prefix="pyhybrid-cli-test-"))
    path = parent / "pgdata"
    try:
        with pytest.raises(ServerError, match=re.escape(f"role 'pyhybrid_app' does not exist on the embedded server "
                                                        f"at {path}: pyhybrid --data-dir {path} migrate")):
            embedded_dsn("pyhybrid_app", data_dir=path)
        run("tenant", "create", "acme", data_dir=path)  # first use: migrates and creates the app role
        with psycopg.connect(embedded_dsn("pyhybrid_app", data_dir=path)) as c:
            assert c.execute("SELECT current_user").fetchone() == ("pyhybrid_app",)
    finally:
        stop_embedded(path)
        shutil.rmtree(parent, ignore_errors=True)


# finding 13
def test_the_test_servers_temporary_directory_is_removed_with_the_server() -> None:
    from tests.conftest import embedded_server_in_temp_dir

    with embedded_server_in_temp_dir(prefix="pyhybrid-cli-test-") as dsn:
        with psycopg.connect(dsn) as c:
            parent = Path(c.execute("SHOW data_directory").fetchone()[0]).parent  # type: ignore[index]
        assert parent.name.startswith("pyhybrid-cli-test-") and parent.is_dir()
    assert not parent.exists()


def test_the_deprecation_test_leaks_no_warning_into_the_summary() -> None:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-W", "error::DeprecationWarning",
                           "tests/test_retrieve.py::test_the_0_1_keyword_names_still_work_with_a_deprecation_warning"],
                          capture_output=True, text=True, cwd=root, env=_env())
    assert done.returncode == 0 and "warning" not in done.stdout.splitlines()[-1], done.stdout[-3000:]


def test_a_reading_tenant_role_loading_edges_is_told_the_pyhybrid_command(data_dir: Path) -> None:
    psql(data_dir, "CREATE ROLE cli_tenant_role LOGIN;", "--admin")
    run("tenant", "grant", "acme", "cli_tenant_role", data_dir=data_dir)
    dsn = run("server", "url", data_dir=data_dir).stdout.strip().replace("postgres:@", "cli_tenant_role@")
    f = data_dir.parent / "new_type.jsonl"
    f.write_text('{"src": "acme:REQ-012#0", "dst": "acme:TP-031#2", "rel": "CLI_TEST_NEW_TYPE"}\n')
    err = run("ingest-edges", str(f), "--tenant", "acme", "--dsn", dsn, check=2).stderr
    assert "role cli_tenant_role may read tenant 'acme' but not write it" in err
    assert "tenant grant acme cli_tenant_role --acl '*'" in err and "SELECT" not in err


# issue 24: folder sync, with the real binary on the embedded server
def test_folder_sync_prune_documents_and_tenant_list_with_the_binary(data_dir: Path) -> None:
    docs = data_dir.parent / "sync-docs"
    (docs / "basic").mkdir(parents=True)
    (docs / "basic" / "usage.md").write_text("# Usage\n\nConnect, then retrieve with one call.\n")
    (docs / "news.md").write_text("# News\n\nThe zircon release retires the quokka scheduler.\n")
    first = run("ingest", str(docs), "--tenant", "sync", "--corpus", "manual", "--quiet", data_dir=data_dir)
    assert json.loads(first.stdout.splitlines()[-1])["inserted"] == 2
    # one file of the folder, no --root: the same id, no second copy
    again = run("ingest", str(docs / "basic" / "usage.md"), "--tenant", "sync", "--corpus", "manual", "--quiet",
                data_dir=data_dir)
    assert json.loads(again.stdout.splitlines()[-1])["unchanged"] == 1
    forgot = run("ingest", str(docs), "--tenant", "sync", "--quiet", data_dir=data_dir, check=2)
    assert "--corpus manual" in forgot.stderr and "--move-corpus" in forgot.stderr
    (docs / "news.md").unlink()
    pruned = run("ingest", str(docs), "--tenant", "sync", "--corpus", "manual", "--prune", "--quiet",
                 data_dir=data_dir)
    assert json.loads(pruned.stdout.splitlines()[-1])["pruned_documents"] == 1
    assert "pruned 1 document(s) gone from the folder: news.md (1 chunk)" in pruned.stderr
    listed = run("documents", "list", "--tenant", "sync", "--json", data_dir=data_dir).stdout
    assert [json.loads(line)["document_id"] for line in listed.splitlines()] == ["basic/usage.md"]
    hits = run("search", "zircon quokka scheduler", "--tenant", "sync", "--json", data_dir=data_dir).stdout
    assert all(r["document_id"] != "news.md" for r in json.loads(hits))
    tenants = run("tenant", "list", data_dir=data_dir).stdout.splitlines()
    assert tenants[0].split() == ["tenant", "corpora", "documents", "chunks", "superseded", "language", "placement",
                                  "roles"]
    assert ["sync", "1", "1", "1", "1", "english", "pool", "-"] in [line.split() for line in tenants]
    run("documents", "delete", "basic/usage.md", "--tenant", "sync", data_dir=data_dir)
    assert run("documents", "list", "--tenant", "sync", "--json", data_dir=data_dir).stdout == ""


def test_search_abstain_answers_on_topic_and_says_no_answer_off_topic(data_dir: Path) -> None:
    on = run("search", "How quickly must the pump alarm after a downstream occlusion?", "--tenant", "acme",
             "--abstain", data_dir=data_dir)
    assert _table_ids(on.stdout)[0] == "acme:REQ-012#0"
    off = run("search", "a recipe for chocolate cake with vanilla frosting", "--tenant", "acme", "--abstain",
              data_dir=data_dir, check=3)
    assert _table_ids(off.stdout) == []
    assert "no answer for tenant 'acme': nothing relevant (the dense branch's ten best hits (mean similarity" in off.stderr
    demo_floor = run("tenant", "calibrate", "globex", data_dir=data_dir).stdout  # as the demo left it: all sampled
    assert re.fullmatch(r"tenant globex: abstention floor 0\.\d{4} \(cosine similarity, 0\.60 x a chunk's median "
                        r"similarity to its 10th nearest chunk of another document\)\n", demo_floor)
    try:
        cal = run("tenant", "calibrate", "globex", "--quantile", "0.9", data_dir=data_dir)
        assert re.fullmatch(r"tenant globex: abstention floor 0\.\d{4} \(cosine similarity, 0\.82 x the quantile 0\.9 of "
                            r"random pairs\)\n", cal.stdout)
        higher = run("tenant", "calibrate", "globex", "--quantile", "0.96", data_dir=data_dir)
        assert cal.stdout.split()[4] < higher.stdout.split()[4]  # a lower quantile, a lower floor
    finally:  # the module's server is shared: globex keeps the demo's floor (its chunks all sampled: the same)
        assert run("tenant", "calibrate", "globex", data_dir=data_dir).stdout == demo_floor


# issue 52, what a new user met: flag type errors, an unknown tenant, an empty --json, Ctrl-C
@pytest.mark.parametrize("flags, said", [(["--top-k", "abc"], "argument --top-k: invalid int value: 'abc'"),
                                         (["--fusion", "foo"], "argument --fusion: invalid choice: 'foo'")])
def test_a_flag_of_the_wrong_type_is_one_line_without_the_usage(data_dir: Path, flags: list[str], said: str) -> None:
    err = run("search", "x", "--tenant", "acme", *flags, data_dir=data_dir, check=2).stderr
    assert err.startswith(f"pyhybrid: error: {said}") and "usage:" not in err and err.count("\n") == 1, err
    assert err.rstrip().endswith("(see: pyhybrid search --help)")


def test_a_tenant_that_does_not_exist_is_named_by_search_and_calibrate(data_dir: Path) -> None:
    said = "pyhybrid: error: tenant 'nosuch' does not exist (pyhybrid tenant list shows the tenants"
    for argv in (["search", "pump alarm", "--tenant", "nosuch"], ["search", "pump alarm", "--tenant", "nosuch", "--json"],
                 ["tenant", "calibrate", "nosuch"]):
        done = run(*argv, data_dir=data_dir, check=2)
        assert done.stderr.startswith(said) and "hybrid.tenant_id" not in done.stderr and done.stdout == "", argv


def test_search_json_says_by_its_exit_status_and_one_line_why_it_is_empty(data_dir: Path) -> None:
    found = run("search", "pump alarm", "--tenant", "acme", "--json", data_dir=data_dir, check=0)
    assert json.loads(found.stdout) and found.stderr == ""
    nothing = run("search", "zzzqqq", "--tenant", "acme", "--vector-weight", "0", "--json", data_dir=data_dir, check=1)
    assert json.loads(nothing.stdout) == [] and nothing.stderr.startswith("no results for tenant 'acme'")
    off = run("search", "a recipe for chocolate cake with vanilla frosting", "--tenant", "acme", "--abstain", "--json",
              data_dir=data_dir, check=3)
    assert json.loads(off.stdout) == [] and off.stderr.startswith("no answer for tenant 'acme': nothing relevant")


def test_ctrl_c_during_ingest_is_one_line_saying_what_stays_written(data_dir: Path) -> None:
    big = data_dir.parent / "big.txt"
    big.write_text("".join(f"Requirement {i}: the pump shall raise an occlusion alarm within {i} seconds. "
                           for i in range(6_000)))
    argv = [BIN, "--data-dir", str(data_dir), "ingest", str(big), "--tenant", "interrupted", "--batch", "50"]
    # SIGINT at its default in the child, as in a terminal: a shell runs a background job (`cmd &`, nohup) with
    # SIGINT ignored, the child inherits that, and Python then installs no KeyboardInterrupt handler
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    read = proc.stderr.readline()  # "read 1 file(s): N chunk(s) ...": embedding and writing from here on
    total = int(re.search(r"(\d+) chunk\(s\)", read)[1])  # type: ignore[index]
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, (out, err)
    assert err.strip().splitlines()[-1] == ("pyhybrid: interrupted: the batches sent before it are written, each whole "
                                            "(a transaction); the same command again writes only what is missing")

    def chunks() -> int:
        listed = [json.loads(line) for line in run("tenant", "list", "--json", data_dir=data_dir).stdout.splitlines()]
        return next((t["chunks"] for t in listed if t["tenant_id"] == "interrupted"), 0)

    assert chunks() < total
    run("ingest", str(big), "--tenant", "interrupted", "--quiet", data_dir=data_dir)
    assert chunks() == total


# issue 52: a warm search answers at once through the search daemon (pyhybrid._launch)
def _daemon_env(runtime: Path, idle: str = "60", **extra: str) -> dict[str, str]:
    return {**_env(), "PYHYBRID_DAEMON": "1", "XDG_RUNTIME_DIR": str(runtime), "PYHYBRID_DAEMON_IDLE": idle, **extra}


def _sockets(runtime: Path) -> list[Path]:
    return sorted((runtime / "pyhybrid").glob("*.sock")) if (runtime / "pyhybrid").is_dir() else []


def _started(runtime: Path) -> Path:
    for _ in range(600):
        if _sockets(runtime):
            return _sockets(runtime)[0]
        time.sleep(0.1)
    raise AssertionError("no search daemon started")


def _call(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[int, str, str]:
    done = subprocess.run([BIN, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture()
def runtime() -> Iterator[Path]:
    """A runtime directory short whatever pytest's directory (a worker's of pytest -n is longer): a socket's path holds
    at most 107 bytes, and a longer one gets no daemon."""
    where = Path(tempfile.mkdtemp(prefix="pyh-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_search_through_the_daemon_prints_and_exits_as_in_process(data_dir: Path, runtime: Path) -> None:
    env = _daemon_env(runtime)
    first = ["--data-dir", str(data_dir), "search", QUESTION, "--tenant", "acme"]
    assert _call(first, env)[0] == 0  # in-process; starts the daemon
    sock = _started(runtime)
    assert oct(sock.parent.stat().st_mode & 0o777) == "0o700" and oct(sock.stat().st_mode & 0o777) == "0o600"
    cases = [first, [*first, "--json", "--top-k", "3"], ["--data-dir", str(data_dir), "search", "zzzqqq", "--tenant",
                                                          "acme", "--vector-weight", "0"],
             ["--data-dir", str(data_dir), "search", "x", "--tenant", "acme", "--top-k", "abc"],
             ["--data-dir", str(data_dir), "search", "pump", "--tenant", "nosuch"],
             ["--data-dir", str(data_dir), "embed", "occlusion alarm"]]
    for argv in cases:
        assert _call(argv, {**env, "PYHYBRID_DAEMON": "only"}) == _call(argv, {**env, "PYHYBRID_DAEMON": "0"}), argv
    # the caller's environment and directory, not the daemon's: $PYHYBRID_TENANT, and a relative --data-dir
    for tenant in ("globex", "acme"):
        code, out, _ = _call(["--data-dir", data_dir.name, "search", "occlusion alarm", "--json"],
                             {**env, "PYHYBRID_TENANT": tenant, "PYHYBRID_DAEMON": "only"}, cwd=data_dir.parent)
        assert code == 0 and {r["tenant_id"] for r in json.loads(out)} == {tenant}
    assert _sockets(runtime) == [sock]  # all answered by the one daemon


def test_the_daemon_is_not_used_from_a_directory_others_may_enter_and_leaves_when_idle(
        data_dir: Path, tmp_path: Path, runtime: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "pyhybrid").mkdir(parents=True)
    (shared / "pyhybrid").chmod(0o755)
    argv = ["--data-dir", str(data_dir), "search", QUESTION, "--tenant", "acme", "--json"]
    code, out, _ = _call(argv, _daemon_env(shared))
    assert code == 0 and json.loads(out)
    time.sleep(1)
    assert _sockets(shared) == []  # in-process, and no daemon listening there
    _call(argv, _daemon_env(runtime, idle="2"))
    sock = _started(runtime)
    for _ in range(300):  # 2 s without a request: it leaves and removes its socket
        if not sock.exists():
            break
        time.sleep(0.1)
    assert not sock.exists()
    # a runtime directory too deep for a socket: no daemon is started, the command answers in-process
    deep = tmp_path / ("d" * 90)
    deep.mkdir(mode=0o700)
    code, out, _ = _call(argv, _daemon_env(deep))
    assert code == 0 and json.loads(out)
    assert not list((deep / "pyhybrid").glob("*.lock")) and _sockets(deep) == []


def test_an_ingest_past_the_pools_size_moves_the_tenant_to_a_partition_of_its_own(data_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "grow"
    docs.mkdir()
    for i in range(4):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nThe pump {i} raises an alarm when its line is blocked.\n")
    setting = "INSERT INTO hybrid.setting (key, value) VALUES ('pool_max_chunks', '2') ON CONFLICT (key) DO UPDATE SET value = '2'"
    run("sql", "--admin", "--", "-c", setting, data_dir=data_dir)
    try:
        done = run("ingest", str(docs), "--tenant", "grow", data_dir=data_dir)
        assert "tenant grow: 4 chunks, moved from the pool to a partition of its own" in done.stderr, done.stderr
        listed = [json.loads(line) for line in run("tenant", "list", "--json", data_dir=data_dir).stdout.splitlines()]
        assert next(t for t in listed if t["tenant_id"] == "grow")["placement"] == "dedicated"
        assert json.loads(run("search", "pump alarm", "--tenant", "grow", "--json", data_dir=data_dir).stdout)
    finally:
        run("sql", "--admin", "--", "-c", "DELETE FROM hybrid.setting WHERE key = 'pool_max_chunks'", data_dir=data_dir)
