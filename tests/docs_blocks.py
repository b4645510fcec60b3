"""The code blocks of README.md and docs/*.md, each with the check its `<!-- check: NAME -->` tag names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# docs/sql-reference.md is generated from the catalog (its signatures are not snippets): tests/test_sql_reference.py
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "sql-reference.md")]

_FENCE = re.compile(r"(?:<!-- check: (?P<name>[\w-]+)[^>]*-->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    check: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(paths: list[Path] | None = None) -> list[Block]:
    """Every fenced block of the given files (default: README.md and docs/*.md), in file order."""
    out = []
    for path in paths or DOCS:
        text = path.read_text()
        for m in _FENCE.finditer(text):
            out.append(Block(path, text.count("\n", 0, m.start("code")), m["lang"], m["code"], m["name"]))
    return out


def block(name: str) -> Block:
    """The one block tagged `<!-- check: name -->`."""
    found = [b for b in blocks() if b.check == name]
    assert len(found) == 1, f"expected one block tagged {name!r} in README.md and docs/, found {len(found)}"
    return found[0]
