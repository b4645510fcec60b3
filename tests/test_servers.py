"""The test server's selection: an external DSN, the docker/ image through testcontainers, or embedded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.servers import docker_server, server_choice

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only


def test_the_server_is_chosen_from_the_environment() -> None:
    assert server_choice({}) == "embedded"
    assert server_choice({"PYHYBRID_TEST_SERVER": "docker"}) == "docker"
    assert server_choice({"PYHYBRID_TEST_SERVER": "docker", "PYHYBRID_TEST_DSN": "postgresql://x"}) == "dsn"
    assert server_choice({"PYHYBRID_TEST_SERVER": ""}) == "embedded"
    with pytest.raises(ValueError, match="PYHYBRID_TEST_SERVER must be one of"):
        server_choice({"PYHYBRID_TEST_SERVER": "podman"})


def test_the_docker_path_fails_loudly_where_there_is_no_engine(tmp_path: Path) -> None:
    # no Docker engine runs on these machines (and testcontainers may not be installed): a clear error,
    # never a silent fallback to another server
    with pytest.raises(RuntimeError, match="PYHYBRID_TEST_SERVER=docker needs"):
        with docker_server(Path(__file__).resolve().parent.parent):
            pass
