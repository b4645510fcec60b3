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
