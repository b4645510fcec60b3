"""README stays true: CI runs its test command, and every Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, re.S)


def test_readme_opens_with_the_demo_command_and_the_test_command_that_ci_runs() -> None:
    demo, tests = (b.strip() for b in _bash_blocks()[:2])
    assert demo.endswith("pyhybrid demo")
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), "the README test command must appear verbatim as a line of .ci/run"


@pytest.fixture(scope="module")
def demo_on_embedded_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The state README's examples assume: `pyhybrid demo` run on the embedded default server."""
    from pyhybrid.cli import main
    from pyhybrid.server import stop_embedded

    # a directory of its own under the system temp dir: the server runs as another user (pgserver when run
    # as root), which may not traverse pytest's private tmp_path_factory tree
    import tempfile

    data_dir = Path(tempfile.mkdtemp(prefix="pyhybrid-readme-")) / "pgdata"
    mp = pytest.MonkeyPatch()
    mp.setenv("PYHYBRID_DATA_DIR", str(data_dir))
    mp.delenv("PYHYBRID_DSN", raising=False)
    assert main(["demo", "--quiet"]) == 0
    yield data_dir  # type: ignore[misc]
    stop_embedded(data_dir)
    mp.undo()


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", README, re.S),
                         ids=lambda b: b.strip().splitlines()[-1][:40])
def test_readme_python_example_runs_as_written(block: str, demo_on_embedded_default: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYHYBRID_DATA_DIR", str(demo_on_embedded_default))
    monkeypatch.delenv("PYHYBRID_DSN", raising=False)
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "acme:" in out or "'id': 'acme:" in out, out


def test_readme_sql_example_runs_as_written(demo_on_embedded_default: Path) -> None:
    import psycopg

    from pyhybrid.server import embedded_dsn

    sql = re.sub(r"--[^\n]*", "", re.findall(r"```sql\n(.*?)```", README, re.S)[0])
    with psycopg.connect(embedded_dsn(data_dir=demo_on_embedded_default), autocommit=True) as c:
        statements = [s for s in sql.split(";") if s.strip()]
        results: list[tuple] = []
        rows: list[tuple] = []
        for stmt in statements:
            cur = c.execute(stmt)
            if cur.description:
                results = cur.fetchall()
            if "hybrid_retrieve" in stmt:
                rows = results
    assert rows and all(r[0].startswith("acme:") for r in rows)
