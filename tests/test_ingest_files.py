"""Ingesting a real folder from the CLI: odd files, encodings, front matter, stable ids, re-ingest, dry run."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from pyhybrid import cli
from pyhybrid.chunking import guess_title, scan_source
from pyhybrid.cli import main
from tests.conftest import Db


def _ingest(db: Db, *args: str) -> int:
    return main(["--dsn", db.dsn(), "ingest", *args, "--tenant", "acme", "--corpus", "docs", "--quiet"])


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def _folder(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "README").write_text("The pump manual.\n\nIt explains the occlusion alarm.")
    (root / "README.Debian").write_text("Packaging notes for Debian: build with dpkg.")
    (root / "guide.md").write_text("---\ntitle: Alarm guide\nversion: 3\ntags: [alarm, pump]\n---\n(repeatability)=\n\n"
                                   "Press the silence key to mute the alarm for two minutes.")
    (root / "latin.txt").write_bytes("Le capteur de pression déclenche l'alarme.".encode("latin-1"))
    (root / "page.html").write_text("<html><head><title>Service page</title><script>var x = 'hidden';</script>"
                                    "</head><body><h1>Service</h1><p>Replace the battery every two years.</p></body></html>")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "data.bin").write_bytes(b"abc\x00def")
    (root / "broken.txt").write_bytes(b"starts as text\x00\x01\x02 then binary")
    (root / "sub" / "bugs.md").write_text("# Known bugs\n\nThe alarm LED flickers at low battery.")
    (root / ".hidden.md").write_text("secret")
    return root


def test_a_folder_with_odd_files_is_read_file_by_file_with_every_skip_named(tmp_path: Path) -> None:
    scan = scan_source(_folder(tmp_path / "docs"))
    read = {Path(f).name for f in scan.files_read}
    assert read == {"README", "README.Debian", "guide.md", "latin.txt", "page.html", "bugs.md"}
    skipped = {Path(f).name: why for f, why in scan.skipped}
    assert skipped["broken.txt"].startswith("binary file")
    assert skipped["data.bin"].startswith("unsupported file type .bin")
    assert skipped["logo.png"].startswith("unsupported file type .png")
    assert skipped[".hidden.md"] == "hidden"
    assert [(Path(f).name, n) for f, n in scan.notes] == [("latin.txt", "not valid UTF-8 (byte 24): decoded as cp1252")]
    by_doc = {r["document_id"]: r for r in scan.records}
    assert "déclenche" in by_doc["latin.txt"]["content"] and "\ufffd" not in by_doc["latin.txt"]["content"]
    guide = by_doc["guide.md"]
    assert guide["metadata"]["title"] == "Alarm guide" and guide["metadata"]["version"] == 3
    assert guide["metadata"]["tags"] == ["alarm", "pump"] and "title:" not in guide["content"]
    page = by_doc["page.html"]
    assert page["metadata"]["title"] == "Service page" and "battery every two years" in page["content"]
    assert "hidden" not in page["content"]
    assert by_doc["sub/bugs.md"]["metadata"]["title"] == "Known bugs"
    assert guess_title("---\n(repeatability)=\n\nMeasure twice.") == "Measure twice."


def test_cli_ingest_reports_skips_and_a_binary_file_aborts_nothing(db: Db, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, str(docs)) == 0
    out, err = capsys.readouterr()
    totals = _last_json(out)
    assert totals["files_read"] == 6 and totals["files_skipped"] == 4 and totals["inserted"] == 6
    assert "skipped " + (docs / "broken.txt").as_posix() + ": binary file" in err
    assert "note: " + (docs / "latin.txt").as_posix() + ": not valid UTF-8" in err
    # re-ingesting one file of the folder with --root keeps its id: no second copy
    assert _ingest(db, str(docs / "sub" / "bugs.md"), "--root", str(docs)) == 0
    again = _last_json(capsys.readouterr().out)
    assert again["unchanged"] == 1 and again["inserted"] == 0 and again["embedded"] == 0
    with psycopg.connect(db.dsn()) as c:
        ids = [r[0] for r in c.execute("SELECT document_id FROM hybrid.chunk WHERE tenant_id = 'acme' "
                                       "AND document_id LIKE '%%bugs.md' AND NOT superseded")]
    assert ids == ["sub/bugs.md"]


def test_dry_run_writes_nothing_and_says_what_would_change(db: Db, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, str(docs), "--dry-run") == 0
    assert _last_json(capsys.readouterr().out) == {"files_read": 6, "files_skipped": 4, "would_write": 6,
                                                   "unchanged": 0}
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE tenant_id = 'acme'").fetchone() == (0,)
    assert _ingest(db, str(docs)) == 0
    capsys.readouterr()
    (docs / "README").write_text("The pump manual, second edition.")
    assert _ingest(db, str(docs), "--dry-run") == 0
    assert _last_json(capsys.readouterr().out)["would_write"] == 1


def test_an_empty_folder_or_a_missing_path_fails_before_anything_is_created(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[str] = []
    monkeypatch.setattr(cli.Target, "ensure_tenant", lambda self, tenant: created.append(tenant))
    (tmp_path / "empty").mkdir()
    assert _ingest(db, str(tmp_path / "empty")) == 1
    assert "nothing to ingest under" in capsys.readouterr().err
    assert _ingest(db, str(tmp_path / "missing")) == 2
    assert "does not exist" in capsys.readouterr().err
    assert created == []


def test_jsonl_records_with_other_keys_name_the_file_line_and_the_record_format(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "chunks.jsonl"
    f.write_text('{"chunk_id": "a", "document_id": "d", "content": "x"}\n{"id": "b", "text": "y"}\n')
    assert _ingest(db, str(f)) == 2
    err = capsys.readouterr().err
    assert f"{f.as_posix()}:2: unknown key(s) ['id', 'text']; a chunk record has chunk_id, document_id and content" in err
    assert "Traceback" not in err
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE tenant_id = 'acme'").fetchone() == (0,)


# ---------------------------------------------------------------- errors without tracebacks, hints, the graph

def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_ingest_edges_errors_name_the_file_the_line_and_the_format(db: Db, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--dsn", db.dsn(), "ingest-edges"]
    assert main([*base, str(tmp_path / "missing.jsonl"), "--tenant", "acme"]) == 2
    assert "does not exist" in _err(capsys)
    csv = tmp_path / "edges.csv"
    csv.write_text("src,dst,rel\na,b,CITES\n")
    assert main([*base, str(csv), "--tenant", "acme"]) == 2
    assert f"{csv}:1: not valid JSON" in (err := _err(capsys)) and '{"src": ID, "dst": ID' in err
    other = tmp_path / "other.jsonl"
    other.write_text('{"from": "a", "to": "b", "type": "CITES"}\n')
    assert main([*base, str(other), "--tenant", "acme"]) == 2
    assert f"{other}:1: unknown key(s) ['from', 'to', 'type']" in _err(capsys)
    good = tmp_path / "good.jsonl"
    good.write_text('{"src": "a", "dst": "b", "rel": "MENTIONS"}\n')
    assert main([*base, str(good), "--tenant", "no-such-tenant"]) == 2
    assert "tenant 'no-such-tenant' does not exist: create it with `pyhybrid --dsn ... tenant create no-such-tenant`" in _err(capsys)
    with pytest.raises(SystemExit):
        main([*base, "--help"])
    assert '"rel": "VERIFIES"' in capsys.readouterr().out


@pytest.mark.parametrize("flags, message", [
    (["--filter", "{lang: en}"], "--filter must be a JSON object such as"),
    (["--weights", "1,1"], "weights must be three numbers 'vector,keyword,graph' (or 'vector=1,graph=0'), got 2"),
    (["--weights", "-1,1,1"], "--weights: the vector weight must be a finite number between 0 and 1000000, got -1.0"),
    (["--weights", "1,x,1"], "weights must be numbers, got 'x' in '1,x,1'"),
    (["--weights", "dense=1"], "weights: unknown source 'dense'"),
])
def test_search_flag_errors_name_the_flag_and_the_rule(db: Db, capsys: pytest.CaptureFixture[str], flags: list[str],
                                                      message: str) -> None:
    assert main(["--dsn", db.dsn(), "search", "pump", "--tenant", "acme", *flags]) == 2
    assert message in _err(capsys)


def test_an_empty_query_is_refused_and_an_empty_result_says_why_in_the_same_words_for_every_tenant(
        db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dsn", db.dsn(), "search", "  ", "--tenant", "acme"]) == 2
    assert "the query text is empty" in _err(capsys)
    hints = []
    for tenant in ("acme", "no-such-tenant"):  # acme exists but holds nothing yet
        assert main(["--dsn", db.dsn("pyh_app"), "search", "pump", "--tenant", tenant]) == 1  # nothing matched
        hints.append(_err(capsys).replace(tenant, "T"))
    assert hints[0] == hints[1] and "no results for tenant 'T'" in hints[0]


@pytest.mark.usefixtures("require_age")
def test_search_seed_starts_the_graph_branch_and_long_ids_are_printed_whole(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "a-very-long-directory-name").mkdir(parents=True)
    (docs / "a-very-long-directory-name" / "requirements-for-the-pump.md").write_text("The pump shall alarm.")
    (docs / "a-very-long-directory-name" / "requirements-for-the-pumps.md").write_text("Protocol: clamp the line.")
    assert _ingest(db, str(docs)) == 0
    capsys.readouterr()
    a, b = "a-very-long-directory-name/requirements-for-the-pump.md#0", "a-very-long-directory-name/requirements-for-the-pumps.md#0"
    edges = tmp_path / "e.jsonl"
    edges.write_text(json.dumps({"src": a, "dst": b, "rel": "MENTIONS"}) + "\n")
    assert main(["--dsn", db.dsn("pyh_app"), "ingest-edges", str(edges), "--tenant", "acme"]) == 0
    capsys.readouterr()
    assert main(["--dsn", db.dsn("pyh_app"), "search", "", "--seed", a, "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert f"   1  {b} " in out  # reached through the graph, its id printed in full


def test_server_info_says_where_the_data_lives_and_how_to_remove_it(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path / "srv"), "server", "info"]) == 0
    out = capsys.readouterr().out
    assert f"data directory: {tmp_path / 'srv'}  (not created yet)" in out
    assert f"rm -rf {tmp_path / 'srv'}" in out and f"pyhybrid --data-dir {tmp_path / 'srv'} server stop" in out


def test_doctor_does_not_say_bm25_falls_back_where_pg_textsearch_is_installed(
        db: Db, capsys: pytest.CaptureFixture[str], require_bm25: None) -> None:
    main(["--dsn", db.dsn(), "doctor"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("extension pg_textsearch"))
    assert "installed" in line and "ts_rank" not in line


def _pdf(text: str, title: str) -> bytes:
    """A one-page PDF with text in Helvetica (written by hand: no PDF writer is a dependency)."""
    stream = f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
            b"/Contents 5 0 R >>", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            f"<< /Title ({title}) >>".encode()]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_a_pdf_is_read_with_its_title_and_a_broken_one_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "manual.pdf").write_bytes(_pdf("The occlusion alarm sounds within thirty seconds.", "Pump manual"))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    scan = scan_source(tmp_path)
    (rec,) = scan.records
    assert rec["document_id"] == "manual.pdf" and "occlusion alarm sounds" in rec["content"]
    assert rec["metadata"]["title"] == "Pump manual"
    assert [(Path(f).name, why.split(" (")[0]) for f, why in scan.skipped] == [("broken.pdf", "an unreadable PDF")]


@pytest.mark.usefixtures("require_age")
def test_ingest_edges_refuses_document_ids_and_reports_new_entities(db: Db, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "req.md").write_text("The pump shall alarm within thirty seconds.")
    (docs / "tp.md").write_text("Clamp the line and time the alarm.")
    assert _ingest(db, str(docs)) == 0
    capsys.readouterr()
    edges = tmp_path / "e.jsonl"
    edges.write_text('{"src": "tp.md#0", "dst": "req.md#0", "rel": "MENTIONS"}\n'
                     '{"src": "tp.md", "dst": "req.md#0", "rel": "MENTIONS"}\n')
    app = ["--dsn", db.dsn("pyh_app"), "ingest-edges", str(edges), "--tenant", "acme"]
    assert main(app) == 2
    assert f"{edges}:2: src 'tp.md' is a document id; an edge joins chunks or entities: use one of the " \
           "document's chunk ids (e.g. 'tp.md#0')" in _err(capsys)
    edges.write_text('{"src": "tp.md#0", "dst": "req.md#0", "rel": "MENTIONS"}\n'
                     '{"src": "req.md#0", "dst": "pump", "rel": "MENTIONS"}\n')
    assert main(app) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["edges_added"] == 2
    assert "1 id(s) name no chunk or entity of tenant 'acme' yet and became entity nodes: pump" in err
    # an id that is both a document and an entity is refused, naming both
    edges.write_text('{"src": "req.md#0", "dst": "tp.md", "rel": "MENTIONS"}\n')
    from pyhybrid import HybridClient

    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:  # an entity named like the document
        t.add_edges([{"src": "tp.md#0", "dst": "tp.md", "rel": "MENTIONS"}])  # a chunk names it: it is seen
    assert main(app) == 2
    assert "dst 'tp.md' names both a document and an entity node of tenant 'acme'" in _err(capsys)
