"""How long `pyhybrid search` takes as a new process, by stage, beside `python -c "import pyhybrid"`.

The embedded server at --data-dir must run and hold the demo (`pyhybrid --data-dir DIR demo`). Each repeat runs,
as new processes: `python -c pass`, `python -c "import pyhybrid"`, the real `pyhybrid search`, and the same
search in stages (what cmd_search does, timed between steps), and the search through the search daemon
(pyhybrid._launch; the in-process rows run with PYHYBRID_DAEMON=0). A first search warms the caches and starts the
daemon, and is not counted. Prints the median of each over the repeats, in milliseconds.

    python tools/cli_timing.py --data-dir /tmp/cli-dev/pg --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

QUERY = "How quickly must the pump alarm after a downstream occlusion?"

STAGED = r"""
import time, json, io, sys, contextlib
t0 = time.perf_counter()
from pyhybrid import cli
from pyhybrid.client import HybridClient
t1 = time.perf_counter()
args = cli.build_parser().parse_args(sys.argv[1:])
target = cli.Target(args)
target.ensure_ready()
t2 = time.perf_counter()
query = cli._query(args)
t3 = time.perf_counter()
client = HybridClient(target.app)
with client, client.tenant(args.tenant) as t:
    t.conn.execute("SELECT 1")
    t4 = time.perf_counter()
    refs = t.retrieve(query)
t5 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    cli._print_table(refs)
    cli._print_context(refs[0])
t6 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "schema check": t2 - t1, "embedder load + embed": t3 - t2,
                  "connect": t4 - t3, "query": t5 - t4, "print": t6 - t5, "inside": t6 - t0}))
sys.stdout.flush()
import os
os._exit(0)  # as pyhybrid search ends (pyhybrid.cli.QUICK_EXIT)
"""


def wall(argv: list[str], daemon: str = "0") -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYHYBRID_DAEMON": daemon})
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return took, done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, help="the embedded server's data dir, holding the demo")
    p.add_argument("--repeat", type=int, default=7, help="runs of each command (default 7); medians are shown")
    args = p.parse_args()
    bin_ = str(Path(sys.executable).parent / "pyhybrid")
    search = ["search", QUERY, "--tenant", "acme", "--data-dir", args.data_dir]
    wall([bin_, *search])  # warm the page cache and the server
    wall([bin_, *search], daemon="1")  # starts the search daemon (pyhybrid._launch), if none runs
    for _ in range(600):
        if wall([bin_, *search], daemon="1")[0] < 0.5:
            break  # the daemon answers (it loads the model first)
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for name, argv, daemon in (("python -c pass", [sys.executable, "-c", "pass"], "0"),
                                   ('python -c "import pyhybrid"', [sys.executable, "-c", "import pyhybrid"], "0"),
                                   ("pyhybrid search, in-process", [bin_, *search], "0"),
                                   ("pyhybrid search, through the daemon", [bin_, *search], "only")):
            runs.setdefault(name, []).append(wall(argv, daemon)[0])
        took, out = wall([sys.executable, "-c", STAGED, *search])
        stages = json.loads(out)
        stages["interpreter start + exit + the rest"] = took - stages.pop("inside")
        for name, value in stages.items():
            runs.setdefault(f"  staged: {name}", []).append(value)
        runs.setdefault("  staged: whole process", []).append(took)
    print(f"median of {args.repeat} runs, ms (min-max)")
    for name, values in runs.items():
        print(f"{name:<40} {statistics.median(values) * 1000:8.1f}   ({min(values) * 1000:.1f}-"
              f"{max(values) * 1000:.1f})")


if __name__ == "__main__":
    main()
