"""Folder sync: the corpus follows the folder (prune), ids stay stable (the corpus remembers its folder), a
re-ingest never silently moves documents between corpora, and what a tenant holds can be listed and deleted.
Deleted and pruned chunks never come back from any branch; a reader meets hidden and unknown documents alike."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, InvalidParameterError
from pyhybrid.cli import main
from tests.conftest import Db
from tests.helpers import near, unit
from tests.test_chunking_structure import CONNECT_CODE, DIRECTIVE, MARKDOWN, RETRIEVE_CODE, RST, _lines_intact

NEWS = "# Release news\n\nThe zircon turbine release retires the old quokka scheduler.\n"


def _cli(db: Db, *args: str, role: str | None = None) -> int:
    return main(["--dsn", db.dsn(role), *args])


def _ingest(db: Db, path: Path, *args: str, corpus: str | None = "docs", role: str | None = None) -> int:
    extra = ["--corpus", corpus] if corpus else []
    return _cli(db, "ingest", str(path), "--tenant", "acme", *extra, "--quiet", *args, role=role)


def _last_json(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def _live(db: Db, where: str = "TRUE") -> dict[str, list[dict[str, Any]]]:
    """acme's live chunks by document (as the superuser: every row)."""
    with psycopg.connect(db.dsn()) as c, c.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute(f"SELECT document_id, corpus_id, content, metadata FROM hybrid.chunk "
                           f"WHERE tenant_id = 'acme' AND NOT superseded AND {where} ORDER BY chunk_id").fetchall()
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["document_id"], []).append(r)
    return out


def _folder(root: Path) -> Path:
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "tenancy.rst").write_text(RST)
    (root / "retrieval.md").write_text(MARKDOWN)
    (root / "news.md").write_text(NEWS)
    return root


# --- the fixture: titles, sections, code, directives, and a file deleted between two ingests ------------

def test_a_synced_folder_has_real_titles_sections_intact_code_no_directive_and_loses_a_deleted_file(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, docs, "--chunk-size", "60", "--overlap", "8") == 0
    capsys.readouterr()
    live = _live(db)
    assert {d: {r["metadata"]["title"] for r in rs} for d, rs in live.items()} == {
        "guide/tenancy.rst": {"Tenancy"}, "retrieval.md": {"Hybrid retrieval"}, "news.md": {"Release news"}}
    headings = {d: [r["metadata"].get("headings") for r in rs] for d, rs in live.items()}
    assert ["Tenancy", "Roles", "Threat model"] in headings["guide/tenancy.rst"]
    assert ["Hybrid retrieval", "Python", "Fusion"] in headings["retrieval.md"]
    for rs in live.values():
        for r in rs:
            assert r["metadata"].get("section") == (r["metadata"]["headings"][-1] if r["metadata"]["headings"] else None)
    texts = {d: [r["content"] for r in rs] for d, rs in live.items()}
    assert _lines_intact(CONNECT_CODE, texts["guide/tenancy.rst"])
    assert _lines_intact(RETRIEVE_CODE, texts["retrieval.md"]) and _lines_intact(CONNECT_CODE, texts["retrieval.md"])
    for d, chunks in texts.items():
        assert not any(DIRECTIVE.search(c) for c in chunks), d

    (docs / "news.md").unlink()
    assert _ingest(db, docs, "--chunk-size", "60", "--overlap", "8", "--prune") == 0
    out, err = capsys.readouterr()
    totals = _last_json(out)
    assert totals["pruned_documents"] == 1 and totals["pruned_chunks"] == len(texts["news.md"])
    assert totals["unchanged"] == sum(len(v) for d, v in texts.items() if d != "news.md")
    assert "pruned 1 document(s) gone from the folder: news.md" in err
    assert set(_live(db)) == {"guide/tenancy.rst", "retrieval.md"}
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        for lexical in ("bm25", "ts_rank"):
            hits = t.retrieve(query_text="zircon turbine quokka scheduler", lexical=lexical, top_k=50)
            assert [h.document_id for h in hits if h.document_id == "news.md"] == []
        assert [d.document_id for d in t.documents()] == ["guide/tenancy.rst", "retrieval.md"]
    # the file comes back: so does its document, from its superseded rows
    (docs / "news.md").write_text(NEWS)
    assert _ingest(db, docs, "--chunk-size", "60", "--overlap", "8", "--prune") == 0
    assert _last_json(capsys.readouterr().out)["pruned_documents"] == 0
    assert "news.md" in _live(db)


def test_prune_dry_run_reports_and_writes_nothing_and_an_emptied_folder_prunes_everything(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, docs) == 0
    capsys.readouterr()
    for f in (docs / "news.md", docs / "retrieval.md", docs / "guide" / "tenancy.rst"):
        f.unlink()
    assert _ingest(db, docs, "--prune", "--dry-run") == 0
    out, err = capsys.readouterr()
    assert _last_json(out)["would_prune_documents"] == 3 and "would prune 3 document(s)" in err
    assert len(_live(db)) == 3
    assert _ingest(db, docs, "--prune") == 0
    assert _last_json(capsys.readouterr().out)["pruned_documents"] == 3
    assert _live(db) == {}


def test_prune_of_a_subfolder_touches_only_the_documents_under_it_and_a_file_is_refused(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    (docs / "guide" / "roles.md").write_text("# Roles\n\nA reader reads; a writer writes.\n")
    assert _ingest(db, docs) == 0
    (docs / "guide" / "roles.md").unlink()
    (docs / "news.md").unlink()  # outside the subfolder: kept by a prune of guide/
    capsys.readouterr()
    assert _ingest(db, docs / "guide", "--prune") == 0
    assert _last_json(capsys.readouterr().out)["pruned_documents"] == 1
    assert set(_live(db)) == {"guide/tenancy.rst", "retrieval.md", "news.md"}
    assert _ingest(db, docs / "retrieval.md", "--prune") == 2
    assert "--prune needs a directory" in capsys.readouterr().err


# --- stable ids: the corpus remembers its folder --------------------------------------------------------------

def test_one_file_of_a_synced_folder_keeps_its_id_and_a_path_outside_the_folder_is_refused_with_the_flag(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, docs) == 0
    capsys.readouterr()
    # no --root: the corpus's folder decides the id (basic/usage.rst, not a second usage.rst)
    (docs / "guide" / "tenancy.rst").write_text(RST + "\nA closing line.\n")
    assert _ingest(db, docs / "guide" / "tenancy.rst") == 0
    again = _last_json(capsys.readouterr().out)
    assert again["inserted"] + again["updated"] >= 1 and again["embedded"] >= 1
    assert set(_live(db)) == {"guide/tenancy.rst", "retrieval.md", "news.md"}
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        assert [(k.corpus_id, k.source_root) for k in t.corpora()] == [("docs", str(docs.resolve()))]
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "extra.md").write_text("# Extra\n\nOutside the folder.\n")
    assert _ingest(db, other / "extra.md") == 2
    err = capsys.readouterr().err
    assert f"corpus 'docs' is synced with folder {docs.resolve()}" in err and "--root" in err and "--corpus" in err
    assert "extra.md" not in _live(db)
    # the folder moved: --root names the corpus's new folder, and the same relative ids follow it
    moved = tmp_path / "moved"
    docs.rename(moved)
    assert _ingest(db, moved, "--root", str(moved), "--prune") == 0
    out, err = capsys.readouterr()
    assert _last_json(out)["pruned_documents"] == 0 and _last_json(out)["unchanged"] > 0
    assert "its folder is now" in err
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        assert [k.source_root for k in t.corpora()] == [str(moved.resolve())]


def test_a_re_ingest_that_would_move_documents_to_another_corpus_is_refused_with_the_flags(
        db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, docs) == 0
    capsys.readouterr()
    assert _ingest(db, docs, corpus=None) == 2  # --corpus forgotten
    err = capsys.readouterr().err
    assert "would move documents into corpus 'default' (the default corpus: --corpus was not given)" in err
    assert "3 in corpus 'docs'" in err and "--corpus docs" in err and "--move-corpus" in err
    assert {r["corpus_id"] for rs in _live(db).values() for r in rs} == {"docs"}
    assert _ingest(db, docs, "--move-corpus", corpus="manual") == 0
    assert {r["corpus_id"] for rs in _live(db).values() for r in rs} == {"manual"}


# --- list, delete, tenant list ----------------------------------------------------------------------------

def test_documents_list_and_delete_all_or_none(db: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _folder(tmp_path / "docs")
    assert _ingest(db, docs) == 0
    capsys.readouterr()
    assert _cli(db, "documents", "list", "--tenant", "acme", "--json") == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["corpus_id"], d["document_id"], d["title"]) for d in listed] == [
        ("docs", "guide/tenancy.rst", "Tenancy"), ("docs", "news.md", "Release news"),
        ("docs", "retrieval.md", "Hybrid retrieval")]
    assert _cli(db, "documents", "list", "--tenant", "acme", "--prefix", "guide/") == 0
    table = capsys.readouterr().out
    assert "guide/tenancy.rst" in table and "news.md" not in table
    assert _cli(db, "documents", "delete", "news.md", "no-such.md", "--tenant", "acme") == 2
    assert "no document 'no-such.md'" in capsys.readouterr().err and "news.md" in _live(db)
    assert _cli(db, "documents", "delete", "news.md", "--tenant", "acme") == 0
    assert re.search(r"deleted news\.md: \d+ chunk", capsys.readouterr().out)
    assert "news.md" not in _live(db)
    assert _cli(db, "tenant", "list", "--json") == 0
    tenants = {t["tenant_id"]: t for t in map(json.loads, capsys.readouterr().out.splitlines())}
    assert tenants["acme"]["documents"] == 2 and tenants["acme"]["corpora"] == 1
    assert tenants["acme"]["roles"] == ["pyh_acme", "pyh_acme_writer"] and tenants["globex"]["chunks"] == 0


def test_tenant_list_is_for_admins_only(db: Db) -> None:
    for role in ("pyh_acme", "pyh_app", "pyh_nobody"):
        with psycopg.connect(db.dsn(role)) as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SELECT * FROM hybrid.tenants()")


def test_a_reader_lists_only_what_it_sees_and_meets_hidden_and_unknown_documents_alike(db: Db) -> None:
    q = unit(3)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        t.ingest([Chunk(chunk_id="open#0", document_id="open", content="an open note", embedding=q),
                  Chunk(chunk_id="mixed#0", document_id="mixed", content="quality part", embedding=q,
                        acl_labels=["quality"]),
                  Chunk(chunk_id="mixed#1", document_id="mixed", position=1, content="finance part", embedding=q,
                        acl_labels=["finance"])], corpus_id="docs")
        t.ingest([Chunk(chunk_id="board#0", document_id="board", content="board minutes", embedding=q,
                        acl_labels=["board"])], corpus_id="boardroom")
        t.set_corpus_root("boardroom", "/srv/board")
    with HybridClient(db.dsn("pyh_acme")) as c:
        with c.tenant("acme") as t:
            assert [(d.document_id, d.chunks) for d in t.documents()] == [("mixed", 1), ("open", 1)]
            assert [(k.corpus_id, k.documents, k.chunks) for k in t.corpora()] == [("docs", 2, 2)]
            assert t.documents(prefix="board") == []
            # only the ids asked for; a hidden document and an unknown one alike absent
            assert [d.document_id for d in t.documents(document_ids=["open", "board", "nope"])] == ["open"]
            assert t.documents(document_ids=[]) == []
            with pytest.raises(InvalidParameterError, match="document_ids must be a list of document ids"):
                t.documents(document_ids="open")
        answers = set()
        for doc in ("board", "mixed", "open", "never-existed"):
            for call in (lambda s: s.delete_document(doc), lambda s: s.prune_documents("docs", []),
                         lambda s: s.prune_documents("boardroom", [], dry_run=True),
                         lambda s: s.set_corpus_root("boardroom", "/tmp")):
                with pytest.raises(Exception) as e, c.tenant("acme") as t:
                    call(t)
                answers.add((type(e.value).__name__, str(e.value).splitlines()[0]))
        assert len(answers) == 1, answers
        assert "may read tenant 'acme' but not write it" in answers.pop()[1]
    with HybridClient(db.dsn("pyh_acme_writer")) as c, c.tenant("acme") as t:
        assert [d.document_id for d in t.documents()] == ["board", "mixed", "open"]


def test_prune_arguments_are_checked_in_python_and_sql(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme", ["*"]) as t:
        with pytest.raises(InvalidParameterError, match="keep must be a collection of document ids"):
            t.prune_documents("docs", "news.md")
        with pytest.raises(InvalidParameterError, match="corpus_id must be a non-empty string"):
            t.prune_documents("", [])
    with psycopg.connect(db.dsn("pyh_app")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        for sql, message in (("SELECT * FROM hybrid.prune_documents('docs', NULL)", "keep must be an array"),
                             ("SELECT * FROM hybrid.prune_documents('docs', '{}', NULL)", "id_prefix must be a string"),
                             ("SELECT hybrid.set_corpus_root('docs', '')", "source_root must be a path or NULL")):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
                conn.execute(sql)
            conn.rollback()


# --- gone means gone, from every branch -------------------------------------------------------------------

@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("how", ["prune", "delete", "re-ingest without it"])
def test_deleted_pruned_and_superseded_chunks_never_come_back_from_any_branch(db: Db, how: str) -> None:
    keep, gone = unit(11), unit(12)
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme", ["*"]) as t:
            t.ingest([Chunk(chunk_id="keep#0", document_id="keep", content="the pump manual: alarms and valves",
                            embedding=keep),
                      Chunk(chunk_id="keep#1", document_id="keep", position=1, content="valves of the pump",
                            embedding=near(keep, 1, 0.2)),
                      Chunk(chunk_id="gone#0", document_id="gone", content="zircon quokka turbine", embedding=gone),
                      Chunk(chunk_id="gone#1", document_id="gone", position=1, content="zircon quokka rotor",
                            embedding=near(gone, 2, 0.1))], corpus_id="docs")
            t.add_edges([{"src": "keep#0", "dst": "gone#0", "rel": "CITES"},
                         {"src": "gone#1", "dst": "keep#1", "rel": "CITES"},
                         {"src": "gone#0", "dst": "acme:entity:zircon", "rel": "MENTIONS"}])
        queries = ({"query_embedding": gone}, {"query_text": "zircon quokka"},
                   {"query_text": "zircon quokka", "lexical": "ts_rank"},
                   {"graph_seeds": ["keep#0", "keep#1", "acme:entity:zircon"], "graph_hops": 2},
                   {"query_embedding": keep, "query_text": "pump valves", "graph_expand": 2, "graph_hops": 2,
                    "siblings": 3, "with_graph_context": True})

        def reached(t: Any, kw: dict[str, Any]) -> set[str]:
            seen: set[str] = set()
            for hit in t.retrieve(top_k=20, **kw):
                seen.add(hit.chunk_id)
                seen.update(s["chunk_id"] for s in hit.siblings or [])
                seen.update(re.findall(r"gone#\d", json.dumps(hit.graph_context or [], default=str)))
            return seen & {"gone#0", "gone#1"}

        with c.tenant("acme", ["*"]) as t:  # the control: before, each form of query reaches the document
            assert [bool(reached(t, kw)) for kw in queries] == [True] * len(queries)
            assert {h.chunk_id for h in t.retrieve_many(["zircon quokka"], [gone], top_k=20)} >= {"gone#0", "gone#1"}
            assert t.classify_ids(["gone#0", "gone#1"]) == {"gone#0": ["chunk"], "gone#1": ["chunk"]}
        with c.tenant("acme", ["*"]) as t:
            if how == "prune":
                assert t.prune_documents("docs", ["keep"]) == {"gone": 2}
            elif how == "delete":
                assert t.delete_document("gone") == 2
            else:  # the document re-ingested with another chunk: its old chunks are superseded
                t.ingest([Chunk(chunk_id="gone#9", document_id="gone", position=9, content="a new page",
                                embedding=unit(99))], corpus_id="docs")
        with c.tenant("acme", ["*"]) as t:
            seen = set().union(*(reached(t, kw) for kw in queries))
            seen.update(h.chunk_id for h in t.retrieve_many(["zircon quokka"], [gone], top_k=20))
            assert {s for s in seen if s in ("gone#0", "gone#1")} == set(), (how, seen)
            assert "gone" not in {d.document_id for d in t.documents()} or how == "re-ingest without it"
            classified = t.classify_ids(["gone#0", "gone#1"])
            assert classified == {"gone#0": [], "gone#1": []}
