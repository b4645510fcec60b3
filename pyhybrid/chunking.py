"""Split plain text and markdown into overlapping chunks on paragraph and sentence boundaries."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

from .errors import InvalidParameterError

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst"}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class TextChunk:
    """A piece of a document, before embedding."""

    chunk_id: str
    document_id: str
    position: int
    content: str
    metadata: dict[str, Any]


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
    the last overlap_words words of the previous one."""
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


def _doc_chunks(document_id: str, text: str, meta: dict[str, Any], max_words: int,
                overlap_words: int) -> Iterator[TextChunk]:
    for i, piece in enumerate(chunk_text(text, max_words=max_words, overlap_words=overlap_words)):
        yield TextChunk(f"{document_id}#{i}", document_id, i, piece, dict(meta))


TEXT_NAMES = ("README", "LICENSE", "LICENCE", "CHANGELOG", "CHANGES", "NEWS", "COPYING", "AUTHORS", "NOTICE",
              "INSTALL", "HISTORY", "CONTRIBUTING", "TODO")
"""Files read as text whatever their suffix (README.Debian, LICENSE.txt, ...)."""
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
RECORD_KEYS = {"chunk_id", "document_id", "content", "embedding", "position", "metadata", "acl_labels"}
RECORD_REQUIRED = ("chunk_id", "document_id", "content")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_NOT_A_TITLE = re.compile(r"^(\(.+\)=|[-=~^*#`_]{3,}|<!--.*|\.\. .*|:[a-z]+:.*)$")


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


class _HTMLText(HTMLParser):
    """Visible text and <title> of an HTML page (stdlib parser; scripts and styles dropped)."""

    BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre",
              "blockquote", "table", "ul", "ol", "dd", "dt", "header", "footer"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript", "template") and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_text(html: str) -> tuple[str, str]:
    """(visible text, title) of an HTML document."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts), " ".join(parser.title.split())


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


def guess_title(text: str) -> str:
    """A markdown heading near the top, else the first line that reads as text (not a label or a rule)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][:40]
    for ln in lines:
        if re.match(r"^#{1,6}\s+\S", ln):
            return ln.lstrip("#").strip()[:200]
    for ln in lines:
        if not _NOT_A_TITLE.match(ln):
            return ln.lstrip("# ").strip()[:200]
    return ""


def _is_text_name(f: Path) -> bool:
    return f.suffix.lower() in TEXT_SUFFIXES or f.suffix == "" or f.name.upper().startswith(TEXT_NAMES)


def _records_from_jsonl(f: Path, shown: str) -> Iterator[dict[str, Any]]:
    from ._jsonl import read_jsonl

    for _, rec in read_jsonl(f, shown=shown, what="a chunk record", keys=RECORD_KEYS, required=RECORD_REQUIRED,
                             format_hint="a chunk record has chunk_id, document_id and content (required) and "
                                         "position, metadata, acl_labels, embedding (optional)"):
        yield rec


def scan_source(path: Path, *, root: Path | None = None, max_words: int = 180,
                overlap_words: int = 30) -> SourceScan:
    """Chunk records from a file or every file under a directory, with a report of what was read and skipped.

    JSONL files hold chunk records (chunk_id, document_id, content; position, metadata, acl_labels,
    embedding optional) that pass through unchanged. Text (.txt .md .markdown .rst, files without a
    suffix, README.* and the like) and HTML files are chunked with document_id = the file's path relative
    to root (default: the directory given, or the file's own directory); YAML front matter becomes
    metadata and the title comes from it, from the first heading or from the first line of text. Binary,
    empty, hidden and unsupported files are skipped, each with its reason; text that is not UTF-8 is
    decoded as cp1252 (or Latin-1), with a note.
    """
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
    for f in files:
        shown = f.as_posix()
        doc = f.resolve().relative_to(base.resolve()).as_posix()
        suffix = f.suffix.lower()
        if suffix == ".jsonl":
            scan.records.extend(_records_from_jsonl(f, shown))
            scan.files_read.append(shown)
            continue
        if suffix == ".pdf":
            text, title, why = _pdf_text(f)
            if why:
                scan.skipped.append((shown, why))
                continue
            _add_document(scan, shown, doc, text, {"title": title} if title else {}, max_words, overlap_words)
            continue
        if suffix not in HTML_SUFFIXES and not _is_text_name(f):
            scan.skipped.append((shown, f"unsupported file type {suffix} (read: .txt .md .markdown .rst .html "
                                        ".pdf .jsonl, README-like names and files without a suffix)"))
            continue
        data = f.read_bytes()
        if b"\x00" in data[:8192]:
            scan.skipped.append((shown, "binary file (it holds NUL bytes)"))
            continue
        text, note = _decode(data)
        if note:
            scan.notes.append((shown, note))
        meta, text = front_matter(text)
        if suffix in HTML_SUFFIXES:
            text, html_title = html_text(text)
            meta.setdefault("title", html_title)
        _add_document(scan, shown, doc, text, meta, max_words, overlap_words)
    return scan


def _add_document(scan: SourceScan, shown: str, doc: str, text: str, meta: dict[str, Any], max_words: int,
                  overlap_words: int) -> None:
    if not text.strip():
        scan.skipped.append((shown, "no text"))
        return
    title = str(meta.get("title") or "") or guess_title(text)
    meta = {**meta, "source": doc, "sha1": hashlib.sha1(text.encode()).hexdigest()[:12]}
    if title:
        meta["title"] = title[:200]
    else:
        meta.pop("title", None)
    scan.files_read.append(shown)
    for c in _doc_chunks(doc, text, meta, max_words, overlap_words):
        scan.records.append({"chunk_id": c.chunk_id, "document_id": c.document_id, "position": c.position,
                             "content": c.content, "metadata": c.metadata})


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


def read_source(path: Path, *, max_words: int = 180, overlap_words: int = 30) -> Iterator[dict[str, Any]]:
    """The chunk records of scan_source(path) (what was skipped is not reported: use scan_source)."""
    yield from scan_source(path, max_words=max_words, overlap_words=overlap_words).records
