"""README stays a front page: it opens with the demo command and the test command CI runs, in under 300 lines.
Its snippets, and those of docs/, run in tests/test_docs.py."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, re.S)


def test_readme_opens_with_the_demo_command_and_the_test_command_that_ci_runs() -> None:
    demo, tests = (b.strip() for b in _bash_blocks()[:2])
    assert demo.endswith("pyhybrid demo")
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), "the README test command must appear verbatim as a line of .ci/run"


def test_readme_is_a_front_page_under_300_lines() -> None:
    assert len(README.splitlines()) < 300


def test_every_relative_link_of_readme_and_docs_points_to_a_file_or_a_reserved_page() -> None:
    reserved = {"docs/cli.md", "bench/RESULTS.md"}  # written by the CLI and benchmark owners
    missing = []
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
            resolved = (path.parent / target).resolve()
            if not resolved.exists() and str(resolved.relative_to(ROOT)) not in reserved:
                missing.append(f"{path.relative_to(ROOT)}: {target}")
    assert missing == []


_BENCH_PATH = re.compile(r"(?<![\w/.:-])(?P<out>--out[ =])?(?:\.\./)?(?P<path>bench/(?:results/[\w.*-]*[\w*]|[a-z_]+\.py))")


def test_every_bench_results_file_and_bench_script_the_docs_name_exists() -> None:
    """A `bench/results/...` file or `bench/*.py` script named in README.md, docs/*.md, CHANGELOG.md, SECURITY.md
    or bench/README.md is in the tree (removed ones are cited by their section of bench/FINDINGS.md or by a
    commit). A path written by `--out` is an output, not a reference; `<sha>:bench/...` names a commit's file."""
    files = [ROOT / n for n in ("README.md", "CHANGELOG.md", "SECURITY.md", "bench/README.md")]
    files += sorted((ROOT / "docs").glob("*.md"))
    missing = []
    for f in files:
        if not f.exists():
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in _BENCH_PATH.finditer(line):
                if m["out"]:
                    continue
                path = m["path"]
                found = list(ROOT.glob(path)) if "*" in path else [ROOT / path] if (ROOT / path).exists() else []
                if not found:
                    missing.append(f"{f.relative_to(ROOT)}:{n}: {path}")
    assert not missing, "bench paths that are not in the tree:\n" + "\n".join(missing)
