"""Folder sync for `pyhybrid ingest DIR`: which folder a corpus's document ids are relative to, which ids a
folder still holds, and which of its documents another corpus stores.

A corpus ingested from a directory remembers that directory (hybrid.set_corpus_root). Later ingests into the
corpus of a file or folder inside it keep ids relative to it, so `pyhybrid ingest docs/basic/usage.rst` after
`pyhybrid ingest docs/` updates `basic/usage.rst` instead of adding a second `usage.rst`. A path outside the
remembered folder is refused unless --root names the corpus's new folder. `--prune` supersedes the corpus's
documents under the path that the folder no longer holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from .errors import InvalidParameterError
from .types import CorpusInfo, DocumentInfo


@dataclass(frozen=True)
class FolderPlan:
    """Where an ingest's ids come from: root (ids are paths relative to it), prefix (the ids under the path given:
    '' for the whole root), and whether to remember root as the corpus's folder afterwards."""

    root: Path
    prefix: str
    remember: bool
    note: str | None = None


def plan_root(path: Path, corpus: str, explicit_root: Path | None, remembered: str | None) -> FolderPlan:
    """The root an ingest of path into corpus uses (see the module's docstring)."""
    if not path.exists():
        raise InvalidParameterError(f"path {str(path)!r} does not exist")
    target = path.resolve()
    if explicit_root is not None:
        root = explicit_root.resolve()
        note = None
        if remembered is not None and Path(remembered) != root:
            note = (f"corpus {corpus!r} was synced with {remembered}; its folder is now {root} (ids of documents "
                    "ingested from the old folder stay as they were; --prune supersedes those this folder lacks)")
        return FolderPlan(root, _prefix(target, root), remember=remembered is None or Path(remembered) != root, note=note)
    if remembered is not None:
        root = Path(remembered)
        try:
            target.relative_to(root)
        except ValueError:
            raise InvalidParameterError(
                f"corpus {corpus!r} is synced with folder {remembered}, which does not contain {str(path)!r}: "
                f"give --root {str(path if path.is_dir() else path.parent)!r} to make that the corpus's folder, "
                "or --corpus NAME to ingest into another corpus") from None
        return FolderPlan(root, _prefix(target, root), remember=False)
    root = target if path.is_dir() else target.parent
    # a single file does not make its directory the corpus's folder: a later ingest of the whole folder may
    return FolderPlan(root, "", remember=path.is_dir())


def _prefix(target: Path, root: Path) -> str:
    """The document-id prefix of the files under target, when ids are relative to root."""
    try:
        rel = target.relative_to(root)
    except ValueError:
        raise InvalidParameterError(f"root {str(root)!r} does not contain path {str(target)!r}") from None
    if rel == Path("."):
        return ""
    return rel.as_posix() + ("/" if target.is_dir() else "")


def folder_ids(path: Path, root: Path) -> set[str]:
    """The document id of every file under path (or of path itself), relative to root: what the folder holds,
    read or not (a file that could not be read this time is not gone)."""
    files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
    base = root.resolve()
    return {f.resolve().relative_to(base).as_posix() for f in files}


def remembered_root(corpora: Iterable[CorpusInfo], corpus: str) -> str | None:
    """The folder corpus is synced with, if any."""
    return next((c.source_root for c in corpora if c.corpus_id == corpus), None)


def elsewhere(documents: Iterable[DocumentInfo], ids: Iterable[str], corpus: str) -> dict[str, list[str]]:
    """{other corpus: [document ids]} of the ids that the tenant stores in a corpus other than corpus."""
    wanted = set(ids)
    found: dict[str, list[str]] = {}
    for d in documents:
        if d.document_id in wanted and d.corpus_id != corpus:
            found.setdefault(d.corpus_id, []).append(d.document_id)
    return found


def moved_message(found: dict[str, list[str]], corpus: str, corpus_given: bool) -> str:
    """The refusal of an ingest that would move documents from their corpus into corpus."""
    parts = []
    for other, ids in sorted(found.items()):
        shown = ", ".join(repr(i) for i in sorted(ids)[:3]) + (", ..." if len(ids) > 3 else "")
        parts.append(f"{len(ids)} in corpus {other!r} ({shown})")
    hint = (f"re-ingest with --corpus {sorted(found)[0]}" if len(found) == 1 else "ingest each corpus's files with its --corpus")
    default = "" if corpus_given else " (the default corpus: --corpus was not given)"
    return (f"this ingest would move documents into corpus {corpus!r}{default}: " + "; ".join(parts)
            + f". {hint.capitalize()}, or pass --move-corpus to move them to {corpus!r}")


def summary(pruned: dict[str, int], *, dry_run: bool) -> Sequence[str]:
    """Lines reporting pruned documents (a few named)."""
    if not pruned:
        return []
    verb = "would prune" if dry_run else "pruned"
    names = ", ".join(f"{d} ({n} chunk{'s' if n != 1 else ''})" for d, n in sorted(pruned.items())[:10])
    more = f", and {len(pruned) - 10} more" if len(pruned) > 10 else ""
    return [f"{verb} {len(pruned)} document(s) gone from the folder: {names}{more}"]
