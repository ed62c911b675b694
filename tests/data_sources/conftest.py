"""A real PostgreSQL server for the data-source tests: pgserver's own binaries (pip-installable,
so CI's clean machine has it from the ``test`` extra), a fresh cluster in a temp dir, started
once per session and stopped at its end. Nothing is skipped when it is missing: the tests fail."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """An SQLAlchemy URL (psycopg driver, Unix socket) of a database only this test session uses."""
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("postgres"), cleanup_mode="stop")
    socket_dir = server.get_uri().split("host=", 1)[1]
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={socket_dir}"
    finally:
        server.cleanup()
