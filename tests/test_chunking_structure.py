"""Chunks that follow the document: headings as sections, code and tables line for line, no markup directives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyhybrid.chunking import DEFAULT_CHUNK_TOKENS, chunk_document, count_tokens, guess_title, parse_document, scan_source

ROOT = Path(__file__).resolve().parent.parent

CONNECT_CODE = """\
# This will not work: the tenant is missing
with HybridClient(dsn) as client:
    client.retrieve(query_text="occlusion alarm")"""

RETRIEVE_CODE = """\
# One call, three branches
with HybridClient(dsn) as client, client.tenant("acme") as t:
    hits = t.retrieve(query_text="occlusion alarm", top_k=5)
    for hit in hits:
        print(hit.chunk_id, hit.score)"""

RST = f"""\
:orphan:

.. currentmodule:: pyhybrid

.. index::
    single: tenant; scope

Tenancy
=======

Every row with tenant data carries ``tenant_id``; row-level security is enabled and forced on every
such table. :class:`~pyhybrid.HybridClient` sets the tenant per transaction.

.. code-block:: python

{chr(10).join('    ' + ln for ln in CONNECT_CODE.splitlines())}

Roles
-----

A tenant login role is bound to its tenants by a grant table; see :ref:`the threat model <threats>`.

+----------------+------------------------------+
| role           | may                          |
+================+==============================+
| ``hybrid_app`` | act for any tenant           |
+----------------+------------------------------+
| tenant login   | act for the granted tenants  |
+----------------+------------------------------+

.. versionadded:: 0.2
   Tenant login roles.

.. _threats:

Threat model
~~~~~~~~~~~~

.. note::

   The strongest one: a tenant with a login role and a SQL prompt.

.. autofunction:: pyhybrid.connect

   Returns a client on the DSN given, else $PYHYBRID_DSN, else the embedded server.

.. toctree::
   :maxdepth: 2

   usage
"""

MARKDOWN = f"""\
---
tags: [retrieval]
---
```python
{CONNECT_CODE}
```

# Hybrid retrieval

One SQL call fuses the dense, lexical and graph branches.

## Python

```python
{RETRIEVE_CODE}
```

| branch  | index          |
|---------|----------------|
| dense   | pgvector HNSW  |
| lexical | BM25           |

(fusion)=
### Fusion

Weighted RRF by default; convex and dbsf on request.
"""

HTML = """\
<html><head><title>Graph branch</title><style>h1 { color: red }</style></head><body>
<h1>Graph branch</h1><p>Hop by hop from the seeds, under RLS at every hop.</p>
<h2>Cypher</h2><pre># a comment, not a heading
SELECT * FROM cypher('g', $$
  MATCH (a)-[]->(b) RETURN b
$$) AS (b agtype);</pre>
<table><tr><th>hops</th><th>time</th></tr><tr><td>1</td><td>about 1 ms</td></tr></table>
</body></html>
"""

DIRECTIVE = re.compile(r"^\s*\.\. [\w:-]+::|:(class|func|ref|meth)?:`|^\s*:maxdepth:|^\(\w+\)=$", re.M)


def _folder(root: Path) -> Path:
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "tenancy.rst").write_text(RST)
    (root / "retrieval.md").write_text(MARKDOWN)
    (root / "graph.html").write_text(HTML)
    (root / "NOTES").write_text("Release notes.\n\nThe 0.2 release moved graph writes behind hybrid.finish_edges.\n")
    return root


def _lines_intact(code: str, chunks: list[str]) -> bool:
    """The code's lines survive chunking whole, in order and as many times as the code has them: reading the chunks
    in order, each takes the code on from where the last one left it (or from a line it repeats, an overlap) by a
    run of consecutive lines equal to the code's next lines, until every line is read. A line lost, doubled,
    split or moved breaks the runs."""
    code_lines = code.splitlines()
    pos = 0
    for chunk in chunks:
        lines = chunk.splitlines()
        best = pos
        for p in range(len(lines)):
            for s in range(pos + 1):  # a run may start at any line read so far (overlap) or at the next one
                e = s
                while e < len(code_lines) and p + e - s < len(lines) and lines[p + e - s] == code_lines[e]:
                    e += 1
                if e > pos and e - s > 0:
                    best = max(best, e)
        pos = best
        if pos == len(code_lines):
            return True
    return pos == len(code_lines)


def test_lines_intact_checks_order_and_multiplicity() -> None:
    code = "a = 1\nb = 2\na = 1"
    assert _lines_intact(code, ["a = 1\nb = 2", "b = 2\na = 1"])
    assert not _lines_intact(code, ["b = 2\na = 1"])  # the first "a = 1" lost
    assert not _lines_intact(code, ["b = 2\na = 1\na = 1"])  # a line twice where the code has it once in a row
    assert not _lines_intact("x\ny\nz", ["x\nz\ny"])  # out of order


def test_every_document_of_a_folder_gets_its_real_title_and_each_chunk_its_section(tmp_path: Path) -> None:
    scan = scan_source(_folder(tmp_path / "docs"), chunk_tokens=60, overlap_tokens=8)
    by_doc: dict[str, list[dict]] = {}
    for r in scan.records:
        by_doc.setdefault(r["document_id"], []).append(r)
    titles = {d: {r["metadata"]["title"] for r in rs} for d, rs in by_doc.items()}
    assert titles == {"guide/tenancy.rst": {"Tenancy"}, "retrieval.md": {"Hybrid retrieval"},
                      "graph.html": {"Graph branch"}, "NOTES": {"Release notes."}}
    sections = {d: [r["metadata"].get("headings") for r in rs] for d, rs in by_doc.items()}
    assert ["Tenancy", "Roles", "Threat model"] in sections["guide/tenancy.rst"]
    assert ["Tenancy", "Roles"] in sections["guide/tenancy.rst"]
    assert ["Hybrid retrieval", "Python", "Fusion"] in sections["retrieval.md"]
    assert ["Graph branch", "Cypher"] in sections["graph.html"]
    for rs in by_doc.values():
        for r in rs:
            heads = r["metadata"]["headings"]
            assert r["metadata"].get("section") == (heads[-1] if heads else None)
    fusion = next(r for r in by_doc["retrieval.md"] if r["metadata"].get("section") == "Fusion")
    assert "Weighted RRF by default" in fusion["content"]


def test_no_markup_directive_or_role_reaches_a_chunk_and_their_prose_stays(tmp_path: Path) -> None:
    scan = scan_source(_folder(tmp_path / "docs"))
    text = "\n\n".join(r["content"] for r in scan.records if r["document_id"] == "guide/tenancy.rst")
    assert not DIRECTIVE.search(text), DIRECTIVE.search(text)
    for kept in ("HybridClient sets the tenant per transaction", "see the threat model.",
                 "Added in version 0.2: Tenant login roles.", "a tenant with a login role and a SQL prompt",
                 "pyhybrid.connect", "Returns a client on the DSN given"):
        assert kept in text
    for dropped in ("currentmodule", "single: tenant", "usage", "orphan", "threats"):
        assert dropped not in text
    md = "\n\n".join(r["content"] for r in scan.records if r["document_id"] == "retrieval.md")
    assert "(fusion)=" not in md and "tags:" not in md


def test_code_blocks_and_tables_keep_every_line_as_in_the_source(tmp_path: Path) -> None:
    scan = scan_source(_folder(tmp_path / "docs"), chunk_tokens=40, overlap_tokens=0)
    chunks = {d: [r["content"] for r in scan.records if r["document_id"] == d]
              for d in ("guide/tenancy.rst", "retrieval.md", "graph.html")}
    assert _lines_intact(CONNECT_CODE, chunks["guide/tenancy.rst"])
    assert _lines_intact(CONNECT_CODE, chunks["retrieval.md"]) and _lines_intact(RETRIEVE_CODE, chunks["retrieval.md"])
    grid = [ln for ln in RST.splitlines() if ln.startswith(("+", "|"))]
    assert _lines_intact("\n".join(grid), chunks["guide/tenancy.rst"])
    pipe = [ln for ln in MARKDOWN.splitlines() if ln.startswith("|")]
    assert _lines_intact("\n".join(pipe), chunks["retrieval.md"])
    cypher = "# a comment, not a heading\nSELECT * FROM cypher('g', $$\n  MATCH (a)-[]->(b) RETURN b\n$$) AS (b agtype);"
    assert _lines_intact(cypher, chunks["graph.html"])
    assert _lines_intact("hops | time\n1 | about 1 ms", chunks["graph.html"])


def test_a_code_block_longer_than_a_chunk_is_split_only_between_lines() -> None:
    code = "\n".join(f"    total_{i} = hybrid_retrieve(query_text='alarm {i}', top_k={i})" for i in range(60))
    title, chunks = chunk_document(f"# Long listing\n\n```python\n{code}\n```\n", "markdown", chunk_tokens=64,
                                   overlap_tokens=10)
    assert title == "Long listing" and len(chunks) > 5
    source_lines = set(f"```python\n{code}\n```".splitlines()) | {"Long listing"}
    for c in chunks:
        assert all(ln in source_lines for ln in c.content.splitlines() if ln), c.content
    assert max(count_tokens([c.content for c in chunks])) <= 64
    assert _lines_intact(code, [c.content for c in chunks])


def test_a_hash_comment_in_a_code_block_is_never_the_title_and_rst_underlines_are_headings() -> None:
    assert guess_title(MARKDOWN.split("---\n", 2)[2]) == "Hybrid retrieval"
    assert guess_title("```\n# not this\n```\n\nPlain words first.\n") == "Plain words first."
    assert guess_title("Fusion\n======\n\nWeighted RRF.\n", "rst") == "Fusion"
    assert guess_title("---\n(repeatability)=\n\nMeasure twice.") == "Measure twice."
    assert parse_document(HTML, "html").title == "Graph branch"
    assert parse_document("# Pump manual\n\nA suffix-less README.\n", "text").title == "Pump manual"


def test_prose_chunks_fit_the_token_budget_and_overlap_within_a_section() -> None:
    sentences = [f"The tenant policy filters row {i} of the dense branch after the HNSW scan." for i in range(40)]
    _, chunks = chunk_document("# Dense\n\n" + " ".join(sentences), "markdown", chunk_tokens=80, overlap_tokens=20)
    sizes = count_tokens([c.content for c in chunks])
    assert len(chunks) >= 6 and max(sizes) <= 80
    for a, b in zip(chunks, chunks[1:]):
        assert b.content.split(". ")[0] in a.content  # b starts with the last sentence of a
    assert all(c.headings == ("Dense",) for c in chunks)


def test_chunking_the_same_document_twice_gives_the_same_records(tmp_path: Path) -> None:
    docs = _folder(tmp_path / "docs")
    assert scan_source(docs).records == scan_source(docs).records
    ids = [r["chunk_id"] for r in scan_source(docs).records if r["document_id"] == "retrieval.md"]
    assert ids == [f"retrieval.md#{i}" for i in range(len(ids))]


@pytest.mark.parametrize("name", ["README.md", "sql/README.md", "bench/README.md", "SECURITY.md"])
def test_the_projects_own_markdown_keeps_every_code_block_and_its_first_heading_as_title(name: str) -> None:
    from markdown_it import MarkdownIt

    path = ROOT / name
    if not path.is_file():
        pytest.skip(f"{name} is not in this checkout")
    text = path.read_text()
    title, chunks = chunk_document(text, "markdown")
    headings = [t for t in MarkdownIt("commonmark").parse(text) if t.type == "heading_open"]
    h1 = next((t for t in headings if t.tag == "h1"), headings[0] if headings else None)
    if h1 is not None:
        assert title and not title.startswith("#") and title in text
    contents = [c.content for c in chunks]
    for t in MarkdownIt("commonmark").enable("table").parse(text):
        if t.type == "fence" and not t.info.startswith("{"):
            assert _lines_intact(t.content.rstrip("\n"), contents), t.content[:80]
    assert max(count_tokens(contents)) <= DEFAULT_CHUNK_TOKENS


def test_suffix_less_files_are_read_only_when_they_read_as_prose(tmp_path: Path) -> None:
    make = "test:\n\tpytest -q\n\nlint:\n\tmypy\n\nDSN ?= postgresql://localhost/pyhybrid\n"
    (tmp_path / "Makefile").write_text(make)
    (tmp_path / "tasks").write_text(make)
    (tmp_path / "run").write_text("#!/bin/sh\nexec pyhybrid ingest docs --tenant acme\n")
    (tmp_path / "NOTES").write_text("Ingest embeds what arrives without an embedding.\n")
    (tmp_path / "about").write_text("Hybrid retrieval inside PostgreSQL: one SQL call, three branches, fused.\n")
    scan = scan_source(tmp_path)
    assert sorted(Path(f).name for f in scan.files_read) == ["NOTES", "about"]
    skipped = {Path(f).name: why for f, why in scan.skipped}
    assert skipped["Makefile"] == "a build or configuration file (Makefile), not a document"
    assert skipped["tasks"].startswith("no suffix and it does not read as prose")
    assert skipped["run"] == "a script (it starts with #!)"


CHANGELOG_RST = """\
Changelog
=========

.. changelog::
    :version: 1.19.1
    :released: December 1, 2026

    .. change::
        :tags: bug, autogenerate
        :tickets: 1540

        Fixed issue where :ref:`autogenerate <alembic.autogenerate>` would render
        the ``server_default`` of a column incorrectly; see :class:`.Config` and
        :paramref:`.EnvironmentContext.configure.compare_type`.

.. changelog::
    :version: 1.19.0

    .. change::
        :tags: feature

        Added :meth:`.Operations.add_column` option ``if_not_exists``.
"""


def test_a_sphinx_changelogs_versions_are_sections_and_roles_leave_plain_names(tmp_path: Path) -> None:
    # issue 52: a new user's 191 changelog chunks all had section "Changelog", and no chunk held "1.19.1"
    (tmp_path / "changelog.rst").write_text(CHANGELOG_RST)
    records = scan_source(tmp_path / "changelog.rst", root=tmp_path).records
    assert [(r["metadata"]["section"], r["metadata"]["headings"]) for r in records] == [
        ("1.19.1", ["Changelog", "1.19.1"]), ("1.19.0", ["Changelog", "1.19.0"])]
    first, second = records[0]["content"], records[1]["content"]
    assert first.startswith("1.19.1\n\nReleased December 1, 2026.") and second.startswith("1.19.0\n\nAdded")
    assert "see Config and\nEnvironmentContext.configure.compare_type" in first  # no leading dot, no role
    assert ":ref:" not in first and "``" not in first and "autogenerate would render" in first
    assert "Operations.add_column option if_not_exists" in second
