"""Split documents (Markdown, reStructuredText, HTML, plain text) into chunks that follow their structure."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .errors import InvalidParameterError

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst"}
MARKDOWN_SUFFIXES = {".md", ".markdown"}
RST_SUFFIXES = {".rst"}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

DEFAULT_CHUNK_TOKENS = 254
"""Chunk size in the bundled embedder's tokens: all the model reads (all-MiniLM-L6-v2 truncates at 256, [CLS] and
[SEP] included). Measured by per-document nDCG@10 on SciFact and CISI (documents longer than 128 tokens, scored by
their best chunk: `python tools/chunk_eval.py --collection scifact|cisi`): of 128, 192 and 254 tokens, 254 has the
best mean of the two and is the only size not below 0.2's 180-word chunks beyond noise on either (128 is best on
SciFact and worst on CISI). Re-measure when the embedder changes."""
DEFAULT_OVERLAP_TOKENS = 32
"""Tokens that a chunk may repeat from the end of the one before, in whole sentences or lines, within a section."""

TokenCounter = Callable[[Sequence[str]], Sequence[int]]
"""Texts -> the number of tokens of each (without special tokens)."""


@dataclass(frozen=True)
class TextChunk:
    """A piece of a document, before embedding."""

    chunk_id: str
    document_id: str
    position: int
    content: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Block:
    """One element of a parsed document, with the headings it stands under (outermost first).

    kind: "heading" (the text of a section's heading), "prose" (split between sentences when too long)
    or "lines" (code, tables, lists: split only between lines, and kept line for line).
    """

    kind: str
    text: str
    headings: tuple[str, ...]


@dataclass(frozen=True)
class ParsedDocument:
    """A document's title and its blocks in order."""

    title: str
    blocks: list[Block]


@dataclass(frozen=True)
class DocumentChunk:
    """A chunk's text and the headings of the section it comes from."""

    content: str
    headings: tuple[str, ...]


# ---------------------------------------------------------------------------------------------- the 0.2 chunker

def _units(text: str) -> list[str]:
    """Paragraphs, with over-long paragraphs split into sentences."""
    units: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if para:
            units.extend(s for s in _SENTENCE.split(para) if s)
    return units


def chunk_text(text: str, *, max_words: int = 180, overlap_words: int = 30) -> list[str]:
    """Greedy chunks of at most max_words words (a longer sentence is cut), each starting with
    the last overlap_words words of the previous one. Whitespace is flattened: for documents, use
    chunk_document, which keeps their structure."""
    if max_words < 10:
        raise InvalidParameterError(f"chunk_size must be at least 10 words, got {max_words}")
    if not 0 <= overlap_words < max_words:
        raise InvalidParameterError(f"overlap must be between 0 and chunk_size - 1, got {overlap_words}")
    words_per_unit = [u.split() for u in _units(text)]
    pieces: list[list[str]] = []
    for words in words_per_unit:
        for i in range(0, len(words), max_words):
            pieces.append(words[i:i + max_words])
    chunks: list[str] = []
    current: list[str] = []
    for piece in pieces:
        if current and len(current) + len(piece) > max_words:
            chunks.append(" ".join(current))
            current = current[len(current) - overlap_words:] if overlap_words else []
            if len(current) + len(piece) > max_words:
                current = []
        current = current + piece
    if current:
        chunks.append(" ".join(current))
    return chunks


# ---------------------------------------------------------------------------------------------- token counting

@functools.lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(__file__).resolve().parent / "models" / "all-MiniLM-L6-v2.tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def count_tokens(texts: Sequence[str]) -> list[int]:
    """The number of tokens of each text for the bundled embedder (all-MiniLM-L6-v2), special tokens excluded."""
    if not texts:
        return []
    return [len(e.ids) for e in _tokenizer().encode_batch(list(texts), add_special_tokens=False)]


def count_words(texts: Sequence[str]) -> list[int]:
    """The number of whitespace-separated words of each text (chunk sizes given in words)."""
    return [len(t.split()) for t in texts]


# ---------------------------------------------------------------------------------------------- packing

@dataclass
class _Unit:
    sep: str  # what joins it to the unit before it in the same chunk
    text: str
    heading: bool = False
    tokens: int = 0


def _block_units(block: Block) -> list[_Unit]:
    if block.kind == "heading":
        return [_Unit("\n\n", block.text, heading=True)]
    if block.kind == "lines":
        lines = block.text.split("\n")
        return [_Unit("\n\n" if i == 0 else "\n", ln) for i, ln in enumerate(lines)]
    parts = re.split(r"(?<=[.!?])(\s+)", block.text)
    units = [_Unit("\n\n", parts[0])]
    for i in range(1, len(parts) - 1, 2):
        if parts[i + 1]:
            units.append(_Unit("\n" if "\n" in parts[i] else " ", parts[i + 1]))
    return units


def _split_long(unit: _Unit, budget: int, count: TokenCounter) -> list[_Unit]:
    """A unit longer than budget, cut between words (a line or sentence that no chunk can hold)."""
    words = re.findall(r"\S+\s*", unit.text)
    sizes = count([w.strip() for w in words])
    out: list[_Unit] = []
    cur, cur_tok = "", 0
    for w, n in zip(words, sizes):
        if cur and cur_tok + n > budget:
            out.append(_Unit(unit.sep if not out else " ", cur.rstrip(), tokens=cur_tok))
            cur, cur_tok = "", 0
        cur += w
        cur_tok += n
    if cur.strip():
        out.append(_Unit(unit.sep if not out else " ", cur.rstrip(), tokens=cur_tok))
    return out


def _join(units: list[_Unit]) -> str:
    return "".join((u.sep if i else "") + u.text for i, u in enumerate(units)).strip("\n")


Progress = Callable[[int, int], None]
"""Told (done, total) as the pieces of a document are counted (the most of chunking it), when it was asked for."""

_COUNT_STEP = 2000


def _pack(blocks: list[Block], budget: int, overlap: int, count: TokenCounter,
          progress: Progress | None = None) -> list[DocumentChunk]:
    """Greedy chunks of at most budget tokens that never span two sections; a block that fits in a chunk
    is not split, a longer one is split between sentences (prose) or lines (code, tables, lists); each
    chunk after the first of a section starts with up to overlap tokens from the end of the one before.
    progress, if given, is told how many of the document's pieces are counted, a few thousand at a time."""
    per_block = [_block_units(b) for b in blocks]
    flat = [u for units in per_block for u in units]
    for start in range(0, len(flat), _COUNT_STEP):
        part = flat[start:start + _COUNT_STEP]
        for u, n in zip(part, count([u.text for u in part])):
            u.tokens = n
        if progress is not None:
            progress(start + len(part), len(flat))
    chunks: list[DocumentChunk] = []
    cur: list[_Unit] = []
    path: tuple[str, ...] | None = None

    def flush(carry: bool) -> None:
        nonlocal cur
        if any(not u.heading and u.text.strip() for u in cur):
            assert path is not None
            chunks.append(DocumentChunk(_join(cur), path))
        tail: list[_Unit] = []
        if carry and overlap:
            total = 0
            for u in reversed(cur[1:]):
                if u.heading or total + u.tokens > overlap:
                    break
                tail.insert(0, u)
                total += u.tokens
        cur = tail

    def size() -> int:
        return sum(u.tokens for u in cur)

    for block, units in zip(blocks, per_block):
        if block.headings != path:
            flush(carry=False)
            path = block.headings
        block_tokens = sum(u.tokens for u in units)
        has_body = any(not u.heading for u in cur)
        if has_body and size() + block_tokens > budget >= block_tokens:
            flush(carry=True)
            while cur and size() + block_tokens > budget:
                cur.pop(0)
        for unit in units:
            for piece in (_split_long(unit, budget, count) if unit.tokens > budget else [unit]):
                if cur and size() + piece.tokens > budget:
                    flush(carry=True)
                    while cur and size() + piece.tokens > budget:
                        cur.pop(0)
                cur.append(piece)
    flush(carry=False)
    return chunks


def check_sizes(chunk_tokens: int, overlap_tokens: int, unit: str = "tokens") -> None:
    """Raise InvalidParameterError unless chunk_tokens >= 10 and 0 <= overlap_tokens < chunk_tokens."""
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 10:
        raise InvalidParameterError(f"chunk_size must be at least 10 {unit}, got {chunk_tokens}")
    if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int) or not 0 <= overlap_tokens < chunk_tokens:
        raise InvalidParameterError(f"overlap must be between 0 and chunk_size - 1, got {overlap_tokens}")


def chunk_document(text: str, syntax: str = "text", *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
                   overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
                   count: TokenCounter = count_tokens) -> tuple[str, list[DocumentChunk]]:
    """(title, chunks) of a document parsed as syntax ("markdown", "rst", "html" or "text").

    Sizes are counted by count (default: the bundled embedder's tokenizer). Headings become each chunk's
    section path; code blocks, tables and lists keep their lines; markup directives are dropped.
    """
    check_sizes(chunk_tokens, overlap_tokens)
    doc = parse_document(text, syntax)
    return doc.title, _pack(doc.blocks, chunk_tokens, overlap_tokens, count)


# ---------------------------------------------------------------------------------------------- parsers

_NOT_A_TITLE = re.compile(r"^(\(.+\)=|[-=~^*#`_+|:.]{3,}.*|<!--.*|\.\. .*|:[a-z]+:.*)$")


def _first_text_line(blocks: Sequence[Block]) -> str:
    for b in blocks:
        if b.kind == "prose":
            for ln in b.text.splitlines():
                ln = ln.strip()
                if ln and not _NOT_A_TITLE.match(ln):
                    return ln.lstrip("# ").strip()[:200]
    return ""


def parse_document(text: str, syntax: str = "text") -> ParsedDocument:
    """The title and blocks of text read as "markdown", "rst", "html" or "text" (paragraphs)."""
    if syntax == "markdown":
        return _parse_markdown(text)
    if syntax == "rst":
        return _parse_rst(text)
    if syntax == "html":
        return _parse_html(text)
    if syntax == "text":
        return _parse_text(text)
    raise InvalidParameterError(f"syntax must be 'markdown', 'rst', 'html' or 'text', got {syntax!r}")


def _parse_text(text: str) -> ParsedDocument:
    blocks = []
    for para in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        if not para.strip():
            continue
        para = para.strip("\n").rstrip()
        lines = para.split("\n")
        indented = len(lines) > 1 and all(ln.startswith((" ", "\t")) for ln in lines)
        blocks.append(Block("lines" if indented else "prose", para if indented else para.strip(), ()))
    return ParsedDocument(_first_text_line(blocks), blocks)


class _Sections:
    """The heading path as headings of given levels arrive."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []
        self.title = ""
        self.first = ""

    def enter(self, level: int, text: str) -> tuple[str, ...]:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, text))
        if level == 1 and not self.title:
            self.title = text
        self.first = self.first or text
        return self.path

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.stack)


# Markdown (markdown-it-py, CommonMark with tables)

_MYST_CODE = {"code-block", "code", "sourcecode", "code-cell"}
_MYST_TARGET = re.compile(r"^\s*\([^()\s]+\)=\s*$")


def _md_inline(token: Any) -> str:
    if not token.children:
        return str(token.content)
    out: list[str] = []
    children = token.children
    for i, c in enumerate(children):
        if c.type == "text":
            txt = c.content
            if i + 1 < len(children) and children[i + 1].type == "code_inline":
                txt = re.sub(r"\{[\w:.-]+\}$", "", txt)  # a MyST role: {func}`name`
            out.append(txt)
        elif c.type == "code_inline":
            out.append(f"`{c.content}`")
        elif c.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif c.type == "image":
            out.append(c.content)
        elif c.type in ("html_inline",) or c.type.endswith(("_open", "_close")):
            continue
        else:
            out.append(c.content)
    return "".join(out)


def _source(lines: list[str], span: Any) -> str:
    if not span:
        return ""
    return "\n".join(lines[span[0]:span[1]]).strip("\n").rstrip()


@functools.lru_cache(maxsize=1)
def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def _md_blocks(text: str, sections: _Sections, blocks: list[Block]) -> None:
    tokens = _markdown_parser().parse(text)
    lines = text.split("\n")
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open":
            heading = " ".join(_md_inline(tokens[i + 1]).split())
            path = sections.enter(int(t.tag[1:]), heading)
            blocks.append(Block("heading", heading, path))
            i += 3
            continue
        if t.type == "paragraph_open":
            para = _md_inline(tokens[i + 1]).strip()
            if para and not _MYST_TARGET.match(para):
                blocks.append(Block("prose", para, sections.path))
            i += 3
            continue
        if t.type in ("fence", "code_block"):
            info = t.info.strip()
            if info.startswith("{") and "}" in info:
                name = info[1:info.index("}")].split(":")[-1].lower()
                body = re.sub(r"\A(?:[ \t]*:[\w-]+:.*\n)+", "", t.content)
                if name in _MYST_CODE:
                    if body.strip("\n"):
                        blocks.append(Block("lines", body.strip("\n").rstrip(), sections.path))
                elif name not in _DROPPED_DIRECTIVES:
                    _md_blocks(body, sections, blocks)
            else:
                code = _source(lines, t.map) if t.map else t.content.rstrip("\n")
                if code.strip():
                    blocks.append(Block("lines", code, sections.path))
            i += 1
            continue
        if t.type == "html_block":
            if not t.content.lstrip().startswith("<!--"):
                for b in _parse_html(t.content).blocks:
                    blocks.append(Block(b.kind if b.kind != "heading" else "prose", b.text, sections.path))
            i += 1
            continue
        if t.type.endswith("_open") and t.type in ("bullet_list_open", "ordered_list_open", "table_open",
                                                   "blockquote_open"):
            close = t.type.replace("_open", "_close")
            j = i + 1
            while not (tokens[j].type == close and tokens[j].level == t.level):
                j += 1
            body = _source(lines, t.map)
            if body.strip():
                blocks.append(Block("prose" if t.type == "blockquote_open" else "lines", body, sections.path))
            i = j + 1
            continue
        i += 1


def _parse_markdown(text: str) -> ParsedDocument:
    sections = _Sections()
    blocks: list[Block] = []
    _md_blocks(text.replace("\r\n", "\n"), sections, blocks)
    return ParsedDocument(sections.title or sections.first or _first_text_line(blocks), blocks)


# reStructuredText (docutils, with Sphinx's common directives and roles passed through)

_DROPPED_DIRECTIVES = {
    "currentmodule", "module", "index", "toctree", "highlight", "default-role", "default-domain",
    "tabularcolumns", "sectionauthor", "moduleauthor", "codeauthor", "contents", "sectnum", "include",
    "literalinclude", "raw", "meta", "title", "header", "footer", "target-notes", "testsetup", "testcleanup",
    "autosummary", "automodule", "py:currentmodule", "py:module", "c:namespace", "role", "class",
    "image", "only-html", "spelling:word-list", "eval-rst", "tab-set", "graphviz", "plot", "inheritance-diagram",
}
_CODE_DIRECTIVES = {"code-block", "sourcecode", "code", "doctest", "testcode", "testoutput", "ipython",
                    "jupyter-execute", "code-cell", "prompt", "parsed-literal"}
_VERSION_DIRECTIVES = {"versionadded": "Added in version", "versionchanged": "Changed in version",
                       "deprecated": "Deprecated since version", "versionremoved": "Removed in version"}
_SIGNATURE_DIRECTIVES = {"function", "method", "classmethod", "staticmethod", "attribute", "data", "exception",
                         "decorator", "property", "describe", "object", "option", "envvar", "cmdoption",
                         "program", "autoclass", "autofunction", "automethod", "autoattribute", "autodata",
                         "autoexception", "autoproperty", "type", "macro", "member", "var", "struct", "enum"}
_RST_LOCK = threading.Lock()


def _rst_machinery() -> tuple[tuple[Any, Any, Any], Any]:
    """The pass-through directive classes and role of the RST reader (built on first use: docutils is
    imported only for .rst files)."""
    from docutils import nodes, utils
    from docutils.parsers.rst import Directive, directives

    class AnyOptions(dict[str, Any]):
        def __missing__(self, key: str) -> Any:
            return directives.unchanged

    class Drop(Directive):  # type: ignore[misc]
        has_content = True
        optional_arguments = 99
        final_argument_whitespace = True
        option_spec = AnyOptions(name=directives.unchanged)

        def run(self) -> list[Any]:
            return []

    class Code(Drop):
        def run(self) -> list[Any]:
            code = "\n".join(self.content).strip("\n")
            return [nodes.literal_block(code, code)] if code.strip() else []

    class PassThrough(Drop):
        def run(self) -> list[Any]:
            name = self.name.lower().split(":")[-1]
            out: list[Any] = []
            arg = " ".join(self.arguments).strip()
            version = str(self.options.get("version") or "").strip()
            if name == "changelog" and version:  # the changelog extension's release: a section named by its version
                section = nodes.section()
                section += nodes.title(version, version)
                if self.options.get("released"):
                    said = f"Released {' '.join(str(self.options['released']).split())}."
                    section += nodes.paragraph(said, said)
                self.state.nested_parse(self.content, self.content_offset, section)
                return [section]
            if name in _VERSION_DIRECTIVES:
                version, _, said = arg.partition(" ")
                head = f"{_VERSION_DIRECTIVES[name]} {version}" + (f": {' '.join(said.split())}" if said else ".")
                out.append(nodes.paragraph(head, head))
            elif name in _SIGNATURE_DIRECTIVES and arg:
                out.append(nodes.literal_block(arg, arg))
            if self.content:
                box = nodes.container()
                self.state.nested_parse(self.content, self.content_offset, box)
                out.append(box)
            return out

    def role(name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None,
             content: Any = None) -> tuple[list[Any], list[Any]]:
        shown = utils.unescape(text)
        m = re.match(r"^(.*?)\s*<([^<>]+)>$", shown, re.S)
        if m:
            shown = m.group(1) or m.group(2)
        shown = shown.lstrip("!")
        if shown.startswith("~"):
            shown = shown[1:].rsplit(".", 1)[-1]
        shown = re.sub(r"^\.(?=\w)", "", shown)  # Sphinx's ".Config": a name looked up from the current module
        return [nodes.literal(rawtext, shown)], []

    return (Drop, Code, PassThrough), role


@contextmanager
def _sphinx_markup() -> Iterator[None]:
    """Inside: docutils knows every directive and role (unknown ones pass their content through)."""
    from docutils.parsers.rst import directives, roles

    (drop, code, passthrough), role = _rst_machinery_cached()
    find_directive, find_role = directives.directive, roles.role

    def directive(name: str, language: Any, document: Any) -> tuple[Any, list[Any]]:
        key = name.lower()
        short = key.split(":")[-1]
        if key in _DROPPED_DIRECTIVES or short in _DROPPED_DIRECTIVES:
            return drop, []
        if short in _CODE_DIRECTIVES:
            return code, []
        if short in _VERSION_DIRECTIVES or short in _SIGNATURE_DIRECTIVES:
            return passthrough, []
        found, messages = find_directive(name, language, document)
        return (found, messages) if found is not None else (passthrough, [])

    def lookup_role(name: str, language: Any, lineno: int, reporter: Any) -> tuple[Any, list[Any]]:
        found, messages = find_role(name, language, lineno, reporter)
        return (found, messages) if found is not None else (role, [])

    with _RST_LOCK:
        directives.directive, roles.role = directive, lookup_role
        try:
            yield
        finally:
            directives.directive, roles.role = find_directive, find_role


@functools.lru_cache(maxsize=1)
def _rst_machinery_cached() -> tuple[tuple[Any, Any, Any], Any]:
    return _rst_machinery()


_RST_SETTINGS = {"report_level": 5, "halt_level": 5, "warning_stream": io.StringIO(), "doctitle_xform": False,
                 "sectsubtitle_xform": False, "file_insertion_enabled": False, "raw_enabled": False,
                 "syntax_highlight": "none", "smart_quotes": False, "docinfo_xform": False}


def _parse_rst(text: str) -> ParsedDocument:
    import docutils.core

    text = text.replace("\r\n", "\n")
    with _sphinx_markup():
        tree = docutils.core.publish_doctree(text, settings_overrides={**_RST_SETTINGS,
                                                                       "warning_stream": io.StringIO()})
    sections = _Sections()
    blocks: list[Block] = []
    _rst_walk(tree, 0, sections, blocks, text.split("\n"))
    return ParsedDocument(sections.title or _first_text_line(blocks), blocks)


def _rst_list_lines(node: Any, indent: str) -> list[str]:
    from docutils import nodes

    out: list[str] = []
    enumerated = isinstance(node, nodes.enumerated_list)
    for n, item in enumerate(node.children, start=1):
        mark = f"{n}. " if enumerated else "- "
        first = True
        for child in item.children:
            if isinstance(child, (nodes.bullet_list, nodes.enumerated_list)):
                out.extend(_rst_list_lines(child, indent + "  "))
                continue
            for ln in child.astext().split("\n"):
                out.append((indent + mark if first else indent + " " * len(mark)) + ln)
                first = False
    return out


def _rst_table(node: Any, lines: list[str]) -> str:
    """A table's source lines (grid and simple tables), else its rows with cells joined by ' | '."""
    from docutils import nodes

    start = (node.line or 0) - 1
    if 0 <= start < len(lines) and lines[start].lstrip()[:1] in ("+", "="):
        grid = lines[start].lstrip().startswith("+")
        last = max((p.line or 0) for p in node.findall(nodes.paragraph)) - 1 if node.next_node(nodes.paragraph) else start
        end = max(last, start)
        if grid:
            while end + 1 < len(lines) and lines[end + 1].lstrip()[:1] in ("+", "|"):
                end += 1
        else:
            while end + 1 < len(lines) and not re.match(r"^\s*=[= ]*$", lines[end]):
                end += 1
        return "\n".join(lines[start:end + 1]).rstrip()
    rows = []
    for row in node.findall(nodes.row):
        rows.append(" | ".join(" ".join(e.astext().split()) for e in row.children))
    return "\n".join(rows)


def _rst_walk(node: Any, depth: int, sections: _Sections, blocks: list[Block], lines: list[str]) -> None:
    from docutils import nodes

    for child in node.children:
        if isinstance(child, nodes.section):
            title = child.next_node(nodes.title)
            heading = " ".join(title.astext().split()) if title is not None else ""
            path = sections.enter(depth + 1, heading)
            if heading:
                blocks.append(Block("heading", heading, path))
            _rst_walk(child, depth + 1, sections, blocks, lines)
            sections.stack = [s for s in sections.stack if s[0] <= depth]
        elif isinstance(child, nodes.title) and isinstance(node, nodes.section):
            continue
        elif isinstance(child, (nodes.comment, nodes.target, nodes.substitution_definition, nodes.pending,
                                nodes.raw, nodes.image, nodes.transition, nodes.docinfo, nodes.meta)):
            continue
        elif isinstance(child, nodes.system_message):
            for lit in child.findall(nodes.literal_block):
                blocks.append(Block("lines", lit.astext().rstrip(), sections.path))
        elif isinstance(child, (nodes.literal_block, nodes.doctest_block, nodes.line_block)):
            code = child.astext().strip("\n").rstrip()
            if code.strip():
                blocks.append(Block("lines", code, sections.path))
        elif isinstance(child, nodes.table):
            blocks.append(Block("lines", _rst_table(child, lines), sections.path))
        elif isinstance(child, (nodes.bullet_list, nodes.enumerated_list)):
            blocks.append(Block("lines", "\n".join(_rst_list_lines(child, "")), sections.path))
        elif isinstance(child, nodes.definition_list):
            out: list[str] = []
            for item in child.children:
                for part in item.children:
                    indent = "" if isinstance(part, (nodes.term, nodes.classifier)) else "    "
                    out.extend(indent + ln for ln in part.astext().split("\n"))
            blocks.append(Block("lines", "\n".join(out), sections.path))
        elif isinstance(child, nodes.field_list):
            out = []
            for f in child.children:
                name, body = f.children[0].astext(), f.children[1].astext() if len(f.children) > 1 else ""
                if body.strip():
                    out.append(f"{name}: {body}")
            if out:
                blocks.append(Block("lines", "\n".join(out), sections.path))
        elif isinstance(child, (nodes.paragraph, nodes.title, nodes.rubric, nodes.caption, nodes.attribution)):
            para = child.astext().strip()
            if para:
                blocks.append(Block("prose", para, sections.path))
        elif isinstance(child, (nodes.footnote, nodes.citation)):
            para = " ".join(child.astext().split("\n", 1)) if child.children else ""
            if para.strip():
                blocks.append(Block("prose", para.strip(), sections.path))
        elif isinstance(child, nodes.Element) and any(isinstance(c, nodes.Element) for c in child.children):
            _rst_walk(child, depth, sections, blocks, lines)
        elif isinstance(child, (nodes.Element, nodes.Text)):
            para = child.astext().strip()
            if para:
                blocks.append(Block("prose", para, sections.path))


# HTML (the standard library's parser)

class _HTMLBlocks(HTMLParser):
    """Blocks and <title> of an HTML page: headings, <pre> kept as is, tables row by row, list items;
    scripts and styles dropped."""

    SKIP = {"script", "style", "noscript", "template"}
    BREAKS = {"p", "div", "br", "section", "article", "blockquote", "dd", "dt", "header", "footer", "main", "nav",
              "aside", "figure", "figcaption", "details", "summary", "body", "html", "form", "address", "hr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections = _Sections()
        self.blocks: list[Block] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._buf: list[str] = []
        self._heading: int | None = None
        self._pre = 0
        self._rows: list[list[str]] | None = None
        self._table_depth = 0
        self._items: list[str] | None = None
        self._list_depth = 0

    def _flush(self) -> None:
        text = " ".join("".join(self._buf).split())
        self._buf = []
        if not text:
            return
        if self._rows is not None:
            if self._rows:
                self._rows[-1].append(text)
            return
        if self._items is not None:
            self._items.append("  " * max(self._list_depth - 1, 0) + "- " + text)
            return
        self.blocks.append(Block("prose", text, self.sections.path))

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif self._skip:
            return
        elif tag == "pre":
            self._flush()
            self._pre += 1
        elif self._pre:
            return
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._flush()
            self._heading = int(tag[1])
        elif tag == "table":
            self._flush()
            self._table_depth += 1
            if self._table_depth == 1:
                self._rows = []
        elif tag == "tr" and self._rows is not None and self._table_depth == 1:
            self._flush()
            self._rows.append([])
        elif tag in ("td", "th") and self._table_depth == 1:
            self._flush()
        elif tag in ("ul", "ol") and self._rows is None:
            self._flush()
            self._list_depth += 1
            if self._items is None:
                self._items = []
        elif tag == "li" or tag in self.BREAKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self._skip = max(self._skip - 1, 0)
        elif tag == "title":
            self._in_title = False
        elif self._skip:
            return
        elif tag == "pre" and self._pre:
            self._pre -= 1
            if not self._pre:
                code = "".join(self._buf).strip("\n").rstrip()
                self._buf = []
                if code.strip():
                    self.blocks.append(Block("lines", code, self.sections.path))
        elif self._pre:
            return
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") and self._heading is not None:
            text = " ".join("".join(self._buf).split())
            self._buf = []
            level, self._heading = self._heading, None
            if text:
                self.blocks.append(Block("heading", text, self.sections.enter(level, text)))
        elif tag == "table" and self._table_depth:
            self._flush()
            self._table_depth -= 1
            if not self._table_depth and self._rows is not None:
                rows = [" | ".join(r) for r in self._rows if r]
                self._rows = None
                if rows:
                    self.blocks.append(Block("lines", "\n".join(rows), self.sections.path))
        elif tag in ("td", "th") and self._table_depth == 1:
            self._flush()
        elif tag in ("ul", "ol") and self._list_depth and self._rows is None:
            self._flush()
            self._list_depth -= 1
            if not self._list_depth and self._items is not None:
                items, self._items = self._items, None
                if items:
                    self.blocks.append(Block("lines", "\n".join(items), self.sections.path))
        elif tag == "li" or tag in self.BREAKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self._buf.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def _parse_html(html: str) -> ParsedDocument:
    parser = _HTMLBlocks()
    parser.feed(html)
    parser.close()
    title = " ".join(parser.title.split()) or parser.sections.title or parser.sections.first
    return ParsedDocument(title or _first_text_line(parser.blocks), parser.blocks)


def html_text(html: str) -> tuple[str, str]:
    """(visible text, title) of an HTML document."""
    doc = _parse_html(html)
    return "\n\n".join(b.text for b in doc.blocks), doc.title


# ---------------------------------------------------------------------------------------------- files

TEXT_NAMES = ("README", "LICENSE", "LICENCE", "CHANGELOG", "CHANGES", "NEWS", "COPYING", "AUTHORS", "NOTICE",
              "INSTALL", "HISTORY", "CONTRIBUTING", "TODO")
"""Files read as text whatever their suffix (README.Debian, LICENSE.txt, ...)."""
NOT_PROSE_NAMES = ("Makefile", "GNUmakefile", "makefile", "Dockerfile", "Containerfile", "Jenkinsfile",
                   "Vagrantfile", "Gemfile", "Rakefile", "Procfile", "Pipfile", "Brewfile", "Justfile", "justfile",
                   "Snakefile", "BUILD", "WORKSPACE", "Caddyfile", "Earthfile", "Tiltfile", "Podfile", "Fastfile")
"""Suffix-less build and configuration files, never read as documents."""
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
RECORD_KEYS = {"chunk_id", "document_id", "content", "embedding", "position", "metadata", "acl_labels"}
RECORD_REQUIRED = ("chunk_id", "document_id", "content")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass
class SourceScan:
    """What a folder or file holds for ingest: chunk records, and every file read, skipped or noted."""

    records: list[dict[str, Any]] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)


def _decode(data: bytes) -> tuple[str, str | None]:
    """The text of data and, when it is not UTF-8, a note naming the encoding used."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    for enc in ("cp1252", "latin-1"):
        try:
            return data.decode(enc), f"not valid UTF-8 (byte {first_bad}): decoded as {enc}"
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes every byte")  # pragma: no cover


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """YAML front matter (--- ... --- at the top) as a dict, and the text without it; ({}, text) if none."""
    m = _FRONT_MATTER.match(text)
    if not m:
        return {}, text
    import yaml

    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    meta = json.loads(json.dumps({str(k): v for k, v in data.items()}, default=str))
    return meta, text[m.end():]


def guess_title(text: str, syntax: str = "markdown") -> str:
    """The document's title: its first top-level heading (else its first heading), else its first line
    that reads as text (not a label, a rule or a directive). A '#' line inside a code block is no heading."""
    return parse_document(text, syntax).title[:200]


def syntax_of(path: Path) -> str:
    """How a file is parsed: "markdown", "rst", "html" or "text", by its suffix."""
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    if suffix in HTML_SUFFIXES:
        return "html"
    return "text"


def _is_text_name(f: Path) -> bool:
    return f.suffix.lower() in TEXT_SUFFIXES or f.suffix == "" or f.name.upper().startswith(TEXT_NAMES)


_PROSE_WORD = re.compile(r"^[(\"'`*_]*[^\W\d_][^\W_]*(?:['’-][^\W_]+)*[)\"'`*_]*[.,;:!?]*[)\"']*$")


def not_prose(text: str) -> str | None:
    """Why a suffix-less file is not read as a document (code, a script, a build file), or None if it
    reads as prose: most of its whitespace-separated tokens are words."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    if lines[0].startswith("#!"):
        return "a script (it starts with #!)"
    tokens = text.split()
    words = sum(1 for t in tokens if _PROSE_WORD.match(t))
    code_lines = sum(1 for ln in lines if ln.startswith("\t") or re.search(r"[{};]\s*$|\$[({]|^\S+\s*:?[:+?!]?=", ln))
    if words < 0.6 * len(tokens) or code_lines > 0.3 * len(lines):
        return (f"no suffix and it does not read as prose ({words} of {len(tokens)} tokens are words, "
                f"{code_lines} of {len(lines)} lines look like code)")
    return None


def _records_from_jsonl(f: Path, shown: str) -> Iterator[dict[str, Any]]:
    from ._jsonl import read_jsonl

    for _, rec in read_jsonl(f, shown=shown, what="a chunk record", keys=RECORD_KEYS, required=RECORD_REQUIRED,
                             format_hint="a chunk record has chunk_id, document_id and content (required) and "
                                         "position, metadata, acl_labels, embedding (optional)"):
        yield rec


LARGE_FILE_BYTES = 5_000_000
"""A file scan_source tells before_large of, before it reads it: a 5.7 MB text file took 4.0 s to chunk into 5,794
chunks here (embedding them takes minutes), with nothing to show meanwhile."""


def scan_source(path: Path, *, root: Path | None = None, chunk_tokens: int | None = None,
                overlap_tokens: int | None = None, max_words: int | None = None,
                overlap_words: int | None = None,
                before_large: Callable[[str, int], Progress | None] | None = None) -> SourceScan:
    """Chunk records from a file or every file under a directory, with a report of what was read and skipped.

    JSONL files hold chunk records (chunk_id, document_id, content; position, metadata, acl_labels,
    embedding optional) that pass through unchanged. Markdown (.md .markdown), reStructuredText (.rst),
    HTML and plain text (.txt, README.* and the like, and suffix-less files that read as prose) are
    chunked along their structure (see chunk_document) with document_id = the file's path relative to
    root (default: the directory given, or the file's own directory) and chunk ids document_id#position.
    Each chunk's metadata holds the document's title (from YAML front matter, else its first heading,
    else its first line of text), its section and headings (the path of headings above it), source and
    sha1; front matter becomes metadata. Binary, empty, hidden and unsupported files are skipped, each
    with its reason; text that is not UTF-8 is decoded as cp1252 (or Latin-1), with a note.

    chunk_tokens, overlap_tokens: chunk size and overlap in the bundled embedder's tokens (defaults
    DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS). max_words, overlap_words: the same in words instead
    (0.2's unit), when chunk_tokens is not given. before_large(shown, bytes) is called before a file of
    LARGE_FILE_BYTES or more is read; what it returns, a Progress, is told how far chunking that file has got.
    """
    if chunk_tokens is None and max_words is not None:
        size, overlap, count, unit = max_words, 30 if overlap_words is None else overlap_words, count_words, "words"
    else:
        size = DEFAULT_CHUNK_TOKENS if chunk_tokens is None else chunk_tokens
        overlap = DEFAULT_OVERLAP_TOKENS if overlap_tokens is None else overlap_tokens
        count, unit = count_tokens, "tokens"
    check_sizes(size, overlap, unit)
    if not path.exists():
        raise InvalidParameterError(f"path {str(path)!r} does not exist")
    base = root if root is not None else (path if path.is_dir() else path.parent)
    if not base.is_dir():
        raise InvalidParameterError(f"root {str(base)!r} is not a directory")
    try:
        path.resolve().relative_to(base.resolve())
    except ValueError:
        raise InvalidParameterError(f"root {str(base)!r} does not contain path {str(path)!r}") from None
    scan = SourceScan()
    if path.is_dir():
        files = []
        for f in sorted(path.rglob("*")):
            rel = f.relative_to(path)
            if any(part.startswith(".") for part in rel.parts):
                if f.is_file():
                    scan.skipped.append((f.as_posix(), "hidden"))
                continue
            if f.is_file():
                files.append(f)
    else:
        files = [path]
    sizes = (size, overlap, count)
    for f in files:
        shown = f.as_posix()
        doc = f.resolve().relative_to(base.resolve()).as_posix()
        suffix = f.suffix.lower()
        progress = None
        if before_large and (suffix in (".jsonl", ".pdf", *HTML_SUFFIXES) or _is_text_name(f)) \
                and (size_bytes := f.stat().st_size) >= LARGE_FILE_BYTES:
            progress = before_large(shown, size_bytes)
        if suffix == ".jsonl":
            scan.records.extend(_records_from_jsonl(f, shown))
            scan.files_read.append(shown)
            continue
        if suffix == ".pdf":
            text, title, why = _pdf_text(f)
            if why:
                scan.skipped.append((shown, why))
                continue
            _add_document(scan, shown, doc, text, {"title": title} if title else {}, "text", sizes, progress)
            continue
        if suffix not in HTML_SUFFIXES and not _is_text_name(f):
            scan.skipped.append((shown, f"unsupported file type {suffix} (read: .txt .md .markdown .rst .html "
                                        ".pdf .jsonl, README-like names and suffix-less files that read as prose)"))
            continue
        prose_only = suffix == "" and not f.name.upper().startswith(TEXT_NAMES)
        if prose_only and f.name in NOT_PROSE_NAMES:
            scan.skipped.append((shown, f"a build or configuration file ({f.name}), not a document"))
            continue
        data = f.read_bytes()
        if b"\x00" in data[:8192]:
            scan.skipped.append((shown, "binary file (it holds NUL bytes)"))
            continue
        text, note = _decode(data)
        if prose_only and (why_not := not_prose(text)):
            scan.skipped.append((shown, why_not))
            continue
        if note:
            scan.notes.append((shown, note))
        meta, text = front_matter(text)
        _add_document(scan, shown, doc, text, meta, syntax_of(f), sizes, progress)
    return scan


def _add_document(scan: SourceScan, shown: str, doc: str, text: str, meta: dict[str, Any], syntax: str,
                  sizes: tuple[int, int, TokenCounter], progress: Progress | None = None) -> None:
    if not text.strip():
        scan.skipped.append((shown, "no text"))
        return
    size, overlap, count = sizes
    try:
        parsed = parse_document(text, syntax)
    except Exception as exc:  # a parser's bug must not lose the document: read it as plain text
        scan.notes.append((shown, f"could not be parsed as {syntax} ({type(exc).__name__}: {exc}): read as plain text"))
        parsed = parse_document(text, "text")
    pieces = _pack(parsed.blocks, size, overlap, count, progress)
    if not pieces:
        scan.skipped.append((shown, "no text"))
        return
    title = str(meta.get("title") or "") or parsed.title
    meta = {**meta, "source": doc, "sha1": hashlib.sha1(text.encode()).hexdigest()[:12]}
    if title:
        meta["title"] = title[:200]
    else:
        meta.pop("title", None)
    scan.files_read.append(shown)
    for i, piece in enumerate(pieces):
        chunk_meta = dict(meta)
        chunk_meta["headings"] = list(piece.headings)
        if piece.headings:
            chunk_meta["section"] = piece.headings[-1]
        scan.records.append({"chunk_id": f"{doc}#{i}", "document_id": doc, "position": i,
                             "content": piece.content, "metadata": chunk_meta})


def _pdf_text(f: Path) -> tuple[str, str, str | None]:
    """(text, title, None) of a PDF, or ("", "", why it cannot be read)."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        return "", "", "a PDF needs pypdf: pip install 'pyhybrid[pdf]'"
    try:
        reader = PdfReader(f)
        pages = [page.extract_text() or "" for page in reader.pages]
        info: Any = reader.metadata
        title = str((info.get("/Title") if info is not None else None) or "").strip()
    except (PyPdfError, ValueError, OSError) as exc:
        return "", "", f"an unreadable PDF ({exc})"
    return "\n\n".join(pages), title, None


def read_source(path: Path, *, chunk_tokens: int | None = None, overlap_tokens: int | None = None,
                max_words: int | None = None, overlap_words: int | None = None) -> Iterator[dict[str, Any]]:
    """The chunk records of scan_source(path) (what was skipped is not reported: use scan_source)."""
    yield from scan_source(path, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens, max_words=max_words,
                           overlap_words=overlap_words).records
