"""The search daemon's request handling (pyhybrid._launch), over a real Unix socket pair and without a server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import types
from typing import Any

from pyhybrid import _launch


def _request(cli: Any, argv: list[str]) -> dict[str, Any]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        _launch._send(ours, {"argv": argv, "env": {"PYHYBRID_TENANT": "acme"}, "cwd": "/"})
        _launch._answer(theirs, cli)
        return _launch._receive(ours)


FAKE_CLI = r"""
import json, socket, sys, types, warnings
from pyhybrid import _launch

def main(argv):
    import os
    warnings.warn("the lexical branch fell back", UserWarning)  # shown once per place and process, by default
    print(f"{argv[0]} for {os.environ['PYHYBRID_TENANT']} in {os.getcwd()}")
    print("a note", file=sys.stderr)
    return 3 if argv[0] == "empty" else 0

answers = []
for argv in (["search"], ["empty"]):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    _launch._send(ours, {"argv": argv, "env": {"PYHYBRID_TENANT": "acme"}, "cwd": "/"})
    _launch._answer(theirs, types.SimpleNamespace(main=main))
    answers.append(_launch._receive(ours))
print(json.dumps(answers))
"""


def test_each_request_prints_what_a_new_process_would_warnings_included() -> None:
    # in a process of its own, as the daemon runs: pytest's own warning capture would hide what it prints
    done = subprocess.run([sys.executable, "-c", FAKE_CLI], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)
    assert first["out"] == "search for acme in /\n" and first["code"] == 0
    assert second["out"] == "empty for acme in /\n" and second["code"] == 3
    for answer in (first, second):  # the second request shows the warning again, as a second process would
        assert "the lexical branch fell back" in answer["err"] and "a note" in answer["err"]


def test_a_bad_flag_and_a_crash_are_answers_not_a_dead_daemon() -> None:
    def main(argv: list[str]) -> int:
        if argv[0] == "--bad":
            raise SystemExit(2)
        raise RuntimeError("a bug")

    cli = types.SimpleNamespace(main=main)
    assert _request(cli, ["--bad"])["code"] == 2
    crashed = _request(cli, ["x"])
    assert crashed["code"] == 2 and "the search daemon failed: RuntimeError: a bug (PYHYBRID_DAEMON=0" in crashed["err"]


def test_the_subcommand_is_found_after_the_global_flags() -> None:
    assert _launch._subcommand(["--dsn", "postgresql://x", "--data-dir", "d", "search", "q"]) == "search"
    assert _launch._subcommand(["--data-dir=d", "embed", "q"]) == "embed"
    assert _launch._subcommand(["--help"]) is None
