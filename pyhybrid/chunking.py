"""Split plain text and markdown into overlapping chunks on paragraph and sentence boundaries."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
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


def read_source(path: Path, *, max_words: int = 180, overlap_words: int = 30) -> Iterator[dict[str, Any]]:
    """Chunk records from a text/markdown file, a JSONL file, or every such file under a directory.

    JSONL lines are chunk records (chunk_id, document_id, content, metadata?, acl_labels?, embedding?)
    and pass through unchanged; other files are chunked, with document_id = the path relative to the
    directory given (or the file name).
    """
    if not path.exists():
        raise InvalidParameterError(f"path {str(path)!r} does not exist")
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    base = path if path.is_dir() else path.parent
    for f in files:
        if f.suffix == ".jsonl":
            with f.open(encoding="utf-8") as fh:
                for n, line in enumerate(fh, start=1):
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except json.JSONDecodeError as exc:
                            raise InvalidParameterError(f"{f}:{n}: not valid JSON ({exc.msg})") from None
        elif f.suffix.lower() in TEXT_SUFFIXES:
            text = f.read_text(encoding="utf-8", errors="replace")
            doc = f.relative_to(base).as_posix()
            meta = {"source": doc, "sha1": hashlib.sha1(text.encode()).hexdigest()[:12]}
            title = next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.strip()), "")
            if title:
                meta["title"] = title[:200]
            for c in _doc_chunks(doc, text, meta, max_words, overlap_words):
                yield {"chunk_id": c.chunk_id, "document_id": c.document_id, "position": c.position,
                       "content": c.content, "metadata": c.metadata}
