"""Reading JSON-lines files: one object a line, a bad line reported as file:line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import IO, Any, Collection, Iterator

from .errors import InvalidParameterError


def open_text(path: Path, mode: str = "r") -> IO[str]:
    """path opened as UTF-8 text, through gzip when its name ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return path.open(mode, encoding="utf-8")


def read_jsonl(path: Path, *, shown: str | None = None, what: str = "a record",
               keys: Collection[str] | None = None, required: Collection[str] = (),
               format_hint: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of path.

    shown: how the file is named in messages (default: path). what: the record's name in messages.
    keys: the keys a record may hold (None: any); required: those it must hold, non-empty.
    format_hint: appended to every message about a bad line (what a good line looks like).
    """
    name = shown if shown is not None else str(path)
    hint = f"; {format_hint}" if format_hint else ""
    with open_text(path) as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidParameterError(f"{name}:{n}: not valid JSON ({exc.msg}){hint}") from None
            if not isinstance(rec, dict):
                raise InvalidParameterError(f"{name}:{n}: {what} must be a JSON object, got "
                                            f"{type(rec).__name__}{hint}")
            unknown = sorted(set(rec) - set(keys)) if keys is not None else []
            missing = [k for k in required if rec.get(k) in (None, "")]
            if unknown or missing:
                problem = f"unknown key(s) {unknown}" if unknown else f"missing {', '.join(missing)}"
                raise InvalidParameterError(f"{name}:{n}: {problem}{hint}")
            yield n, rec
