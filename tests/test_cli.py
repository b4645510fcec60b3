"""The command line: the demo end to end, ingest and search, doctor, migrate, the embedded server."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psycopg
import pytest

from pyhybrid.cli import main
from tests.conftest import Db


@pytest.mark.usefixtures("require_age", "require_bm25")
def test_demo_runs_end_to_end_and_shows_isolation(db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dsn", db.dsn(), "demo", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "TENANT LEAK" not in out
    # what each query's text says is what its table shows (pyhybrid/demo_data/queries.json "claims")
    assert "NARRATIVE MISMATCH" not in out and "every narrative agrees with its table" in out, out
    assert "(tenants in the result: ['acme'])" in out and "(tenants in the result: ['globex'])" in out
    import re

    match = re.search(r"^(\d+) of (\d+) expected chunks found", out, re.M)
    assert match, out
    found, total = int(match[1]), int(match[2])
    assert total >= 10 and found >= total - 2, out


@pytest.mark.usefixtures("require_age", "require_bm25")
def test_search_finds_the_requirement_and_through_the_graph_its_test_protocol(
        demo_db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["--dsn", demo_db.dsn(), "search", "How quickly must the pump alarm after a downstream occlusion?",
                 "--tenant", "acme", "--graph-expand", "1", "--graph-weight", "1", "--graph-decay", "0.4", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "acme:REQ-012#0: found by dense, lexical;" in out
    assert "acme:TP-031#2: found by graph;" in out
    # the default fusion ranks the chunk dense and lexical search both put first above any graph-only neighbour
    table = out.split("\n")
    assert table[1].split()[1] == "acme:REQ-012#0" and "fusion: convex" in out
    assert "SELECT * FROM hybrid_retrieve(" in out and "query_text => 'How quickly" in out
    assert "dense    exact scan:" in out and "lexical  BM25 index" in out and "graph    1 hop(s) from 1 seed(s)" in out
    # the printed call runs as it is and returns the rows printed
    call = out[out.index("SELECT * FROM hybrid_retrieve("):].split(";\n")[0] + ";"
    with psycopg.connect(demo_db.dsn("pyh_app")) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        ids = [r[0] for r in c.execute(call).fetchall()]
    assert ids and all(f"{i}" in out for i in ids)


@pytest.mark.usefixtures("require_age", "require_bm25")
def test_search_json_as_the_other_tenant_returns_only_its_chunks(demo_db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["--dsn", demo_db.dsn(), "search", "occlusion alarm", "--tenant", "globex", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["tenant_id"] for r in rows} == {"globex"}


def test_ingest_a_directory_is_idempotent(db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pump.md").write_text("# Pump\n\n" + "The pump shall raise an occlusion alarm. " * 60)
    (tmp_path / "notes.txt").write_text("Battery lasts six hours on a full charge.")
    args = ["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--corpus", "docs", "--quiet",
            "--chunk-size", "100", "--overlap", "20"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["inserted"] >= 4 and first["embedded"] == first["inserted"]
    # the second run embeds nothing: the server says every document is stored exactly so
    assert second == {"files_read": 2, "files_skipped": 0, "inserted": 0, "updated": 0, "unchanged": first["inserted"],
                      "superseded": 0, "embedded": 0}
    assert main(["--dsn", db.dsn(), "search", "how long does the battery last", "--tenant", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["chunk_id"] == "notes.txt#0"


def test_bad_input_exits_2_with_a_message_naming_the_rule(db: Db, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"chunk_id": "a", "document_id": "d", "content": "x", "embedding": [1, 2]}\n')
    assert main(["--dsn", db.dsn(), "ingest", str(f), "--tenant", "acme", "--quiet"]) == 2
    assert "chunk row 1 (chunk_id 'a'): embedding has 2 dimensions, expected 384" in capsys.readouterr().err
    assert main(["--dsn", db.dsn(), "search", "x", "--tenant", "acme", "--top-k", "0"]) == 2
    assert "--top-k must be between 1 and 1000" in capsys.readouterr().err


def test_a_pre_embedded_bulk_load_with_several_writers(db: Db, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "load.jsonl"
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((120, 384))
    f.write_text("".join(json.dumps({"chunk_id": f"k{i}", "document_id": f"doc{i // 4}", "position": i % 4,
                                     "content": f"pump manual part {i}",
                                     "embedding": (vecs[i] / np.linalg.norm(vecs[i])).tolist()}) + "\n"
                         for i in range(120)))
    assert main(["--dsn", db.dsn(), "ingest", str(f), "--tenant", "acme", "--quiet", "--bulk", "--writers", "3",
                 "--batch", "10", "--build-workers", "3"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["inserted"] == 120 and got["embedded"] == 0
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE tenant_id = 'acme'").fetchone() == (120,)
        assert c.execute("SELECT to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL").fetchone() == (True,)
    with pytest.raises(SystemExit) as exit_:
        main(["--dsn", db.dsn(), "ingest", str(f), "--tenant", "acme", "--writers", "0"])
    assert exit_.value.code == 2
    assert "--writers must be at least 1, got 0" in capsys.readouterr().err
    # more build workers than bulk_load takes: refused before any index is dropped
    assert main(["--dsn", db.dsn(), "ingest", str(f), "--tenant", "acme", "--quiet", "--bulk",
                 "--build-workers", "17"]) == 2
    assert "build_workers must be an integer from 1 to 16, got 17" in capsys.readouterr().err
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL").fetchone() == (True,)


def test_doctor_reports_extensions_indexes_and_rls(db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--dsn", db.dsn(), "doctor"])
    out = capsys.readouterr().out
    assert "extension vector" in out and "RLS hybrid.chunk" in out and "enabled and forced" in out
    assert code == 0, out


def test_doctor_checks_are_a_library_function_that_names_each_fix(db: Db) -> None:
    from pyhybrid.doctor import check

    with psycopg.connect(db.dsn()) as c:
        c.execute("ALTER TABLE hybrid.chunk NO FORCE ROW LEVEL SECURITY")
        findings = {f.subject: f for f in check(c)}
    assert findings["RLS hybrid.chunk"].problem and findings["RLS hybrid.chunk"].fix == "pyhybrid migrate --reapply"
    assert not findings["RLS hybrid.corpus"].problem
    assert findings["schema hybrid"].state.startswith("installed, version ")


def test_doctor_flags_extension_functions_an_update_reopened_and_reapply_closes_them(
        db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as c:  # what ALTER EXTENSION ... UPDATE does
        c.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ag_catalog TO PUBLIC")
    assert main(["--dsn", db.dsn(), "doctor"]) == 1
    out = capsys.readouterr().out
    assert "extension age functions" in out and "fix: pyhybrid migrate --reapply" in out
    assert main(["--dsn", db.dsn(), "migrate", "--reapply"]) == 0
    assert main(["--dsn", db.dsn(), "doctor"]) == 0, capsys.readouterr().out


def test_doctor_on_a_database_without_the_schema_says_how_to_fix_it(admin_dsn: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from psycopg import conninfo

    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS pyh_doctor_empty")
        c.execute("CREATE DATABASE pyh_doctor_empty")
    try:
        assert main(["--dsn", conninfo.make_conninfo(admin_dsn, dbname="pyh_doctor_empty"), "doctor"]) == 1
        out = capsys.readouterr().out
        assert "schema hybrid" in out and "MISSING\n    fix: pyhybrid migrate" in out
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute("DROP DATABASE IF EXISTS pyh_doctor_empty WITH (FORCE)")


def test_embedded_server_start_status_url_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(tmp_path / "pg")
    assert main(["--data-dir", data, "server", "start"]) == 0
    dsn = capsys.readouterr().out.strip()
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
    assert main(["--data-dir", data, "server", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["running"] is True
    assert main(["--data-dir", data, "server", "url"]) == 0
    assert capsys.readouterr().out.strip().startswith("postgresql://")
    assert main(["--data-dir", data, "server", "stop"]) == 0
    assert capsys.readouterr().out.strip() == "stopped"
    assert main(["--data-dir", data, "server", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["running"] is False


def test_tenant_export_import_and_drop_from_the_command_line(db: Db, db2: Db, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("Battery lasts six hours on a full charge.")
    assert main(["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--quiet"]) == 0
    out = tmp_path / "acme.jsonl.gz"
    assert main(["--dsn", db.dsn(), "tenant", "export", "acme", str(out)]) == 0
    assert "exported tenant acme" in capsys.readouterr().out
    assert main(["--dsn", db2.dsn(), "tenant", "import", str(out), "--as-tenant", "acme2"]) == 0
    assert "imported" in capsys.readouterr().out
    assert main(["--dsn", db2.dsn(), "search", "how long does the battery last", "--tenant", "acme2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["chunk_id"] == "notes.txt#0"
    assert main(["--dsn", db.dsn(), "tenant", "drop", "acme"]) == 2
    assert "confirm with --yes" in capsys.readouterr().err
    assert main(["--dsn", db.dsn(), "tenant", "drop", "acme", "--yes"]) == 0
    assert "dropped tenant acme: 1 chunks, 1 corpora" in capsys.readouterr().out
    assert main(["--dsn", db.dsn(), "tenant", "import", str(tmp_path / "missing.jsonl")]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_ingest_chunk_size_defaults_are_the_chunkers_in_tokens() -> None:
    from pyhybrid import chunking
    from pyhybrid.cli import build_parser

    args = build_parser().parse_args(["ingest", "x.md", "--tenant", "acme"])
    assert (args.chunk_size, args.overlap) == (chunking.DEFAULT_CHUNK_TOKENS, chunking.DEFAULT_OVERLAP_TOKENS)


def test_a_chunk_size_above_what_the_embedder_reads_gets_a_note(db: Db, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").write_text("The pump shall raise an occlusion alarm. " * 20)
    base = ["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--quiet", "--dry-run"]
    assert main([*base, "--chunk-size", "5000"]) == 0
    assert "pyhybrid: note: --chunk-size 5000 is above the 254 tokens the bundled embedder reads" in capsys.readouterr().err
    assert main([*base, "--chunk-size", "254"]) == 0
    assert "--chunk-size" not in capsys.readouterr().err


def test_a_large_file_is_announced_before_it_is_read(db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhybrid import chunking

    monkeypatch.setattr(chunking, "LARGE_FILE_BYTES", 2_000)  # 5 MB in use: the rule, not the size, is tested here
    (tmp_path / "big.md").write_text("# Pumps\n\n" + "The pump shall raise an occlusion alarm. " * 100)
    (tmp_path / "small.txt").write_text("Battery lasts six hours.")
    (tmp_path / "movie.mp4").write_bytes(b"\x00" * 5_000)  # not read: not announced
    assert main(["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--quiet", "--dry-run"]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if " MB: chunking it comes first" in line]
    assert len(notes) == 1 and notes[0].startswith(f"pyhybrid: note: {(tmp_path / 'big.md').as_posix()} is 0.0 MB")
    assert err.index(notes[0]) < err.index("read 2 file(s)")  # before the scan's summary
    assert "chunk big.md" not in err  # --quiet: no progress bar
    assert main(["--dsn", db.dsn(), "ingest", str(tmp_path), "--tenant", "acme", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "chunk big.md: 100%" in err and err.index("chunk big.md") < err.index("read 2 file(s)")  # its chunking's bar


def test_chunking_a_large_file_tells_its_progress_and_chunks_it_as_before(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhybrid import chunking

    (tmp_path / "big.md").write_text("# Pumps\n\n" + "".join(f"Alarm {i} sounds.\n\n" for i in range(4500)))
    plain = chunking.scan_source(tmp_path)
    monkeypatch.setattr(chunking, "LARGE_FILE_BYTES", 1_000)
    told: list[tuple[int, int]] = []
    seen = chunking.scan_source(tmp_path, before_large=lambda shown, size: lambda done, total: told.append((done, total)))
    assert seen.records == plain.records  # the same chunks, counted a few thousand pieces at a time
    assert len(told) == 3 and [d for d, _ in told] == sorted(d for d, _ in told) and told[-1][0] == told[-1][1] >= 4500
