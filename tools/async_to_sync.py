"""Generate pyhybrid/client.py (the synchronous client) from pyhybrid/aio.py (the asynchronous one).

The async module is the source: its text, with the awaits and the Async names taken out, is the sync module.
Markers in aio.py say where the two differ:

    code  # async-only            the line is left out of the sync module
    # async-only {  ...  # async-only }     the lines between (and the markers) are left out
    code  # sync: other code      the sync module has `other code` there, at the same indentation
    a docstring paragraph that starts "Async only:" is left out, with the blank line before it

Run `python tools/async_to_sync.py` after editing aio.py; `--check` exits 1 when client.py is stale
(tests/test_async_to_sync.py runs it).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "pyhybrid" / "aio.py"
TARGET = ROOT / "pyhybrid" / "client.py"

HEADER = "# Generated from pyhybrid/aio.py by tools/async_to_sync.py: edit aio.py, then run that tool.\n"

# (pattern, replacement), applied in order to every line kept
RULES: list[tuple[str, str]] = [
    (r"await asyncio\.to_thread\(([\w.]+), ", r"\1("),
    (r"\bawait ", ""),
    (r"\basync (def|with|for) ", r"\1 "),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bpsycopg\.AsyncConnection\.connect\(", "psycopg.connect("),
    (r"\bpsycopg\.AsyncConnection\b", "psycopg.Connection"),
    (r"\bAsync(TenantSession|HybridClient)\b", r"\1"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\bregister_vector_type_async\b", "register_vector_type"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bconnect_async\b", "connect"),
]
_SYNC = re.compile(r"^(?P<indent>\s*)(?P<code>.*?)\s*# sync: (?P<sync>.*)$")


def generate(source: str) -> str:
    """The sync module's text for the async module's."""
    out: list[str] = []
    skipping = False
    in_paragraph = False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("Async only:"):
            in_paragraph = True
            if out and not out[-1].strip():
                out.pop()
        if in_paragraph:
            if stripped.endswith('"""'):
                out.append(line[:len(line) - len(line.lstrip())] + '"""')
                in_paragraph = False
            elif not stripped:
                in_paragraph = False
                out.append("")
            continue
        if stripped == "# async-only {":
            skipping = True
            continue
        if stripped == "# async-only }":
            skipping = False
            continue
        if skipping or line.rstrip().endswith("# async-only") or stripped == "import asyncio":
            continue
        if (m := _SYNC.match(line)) is not None:
            line = m["indent"] + m["sync"]
        else:
            for pattern, repl in RULES:
                line = re.sub(pattern, repl, line)
        out.append(line.rstrip())
    if skipping:
        raise SystemExit("aio.py: an '# async-only {' block is not closed")
    return HEADER + "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = generate(SOURCE.read_text(encoding="utf-8"))
    if "--check" in argv:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run python tools/async_to_sync.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
