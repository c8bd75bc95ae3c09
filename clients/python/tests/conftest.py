"""A real idem server (SQLite, random port) and the sandbox provider, for the whole session."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from idem.testing import LocalServer, local_server

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def server() -> Iterator[LocalServer]:
    binary = os.environ.get("IDEM_BIN") or str(REPO / "target" / "release" / "idem")
    with local_server(binary) as running:
        yield running


@pytest.fixture(scope="session")
def limited_server() -> Iterator[LocalServer]:
    """A second server whose API keys may make one request a second, in bursts of one."""
    binary = os.environ.get("IDEM_BIN") or str(REPO / "target" / "release" / "idem")
    limits = {"IDEM_RATE_LIMIT_PER_SECOND": "1", "IDEM_RATE_LIMIT_BURST": "1"}
    with local_server(binary, env=limits) as running:
        yield running


@pytest.fixture
def api_key(server: LocalServer) -> str:
    return server.new_key()


@pytest.fixture
def tool_name() -> str:
    """A tool name no other test uses (tools are global, not per namespace)."""
    return "t_" + uuid.uuid4().hex[:10]
