"""A real idem server (SQLite, random port) and the sandbox provider, for the whole session."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
ADMIN_PASSWORD = "py-admin-password-1"
ADDRESS = re.compile(r"(?:address=|listening on http://)(\d+\.\d+\.\d+\.\d+:\d+)")


def _binary() -> str:
    return os.environ.get("IDEM_BIN") or str(REPO / "target" / "release" / "idem")


def _start(args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    handle = log.open("w")
    process = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = ADDRESS.search(log.read_text())
        if found:
            return process, "http://" + found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{args[0]} did not start: {log.read_text()}")


@dataclass
class Server:
    """The running idem server and an admin session on it."""

    base_url: str
    sandbox_url: str
    admin: httpx.Client

    def new_key(self) -> str:
        """An API key of a fresh namespace, so tests never see each other's operations."""
        namespace = "ns-" + uuid.uuid4().hex[:12]
        answer = self.admin.post("/v1/keys", json={"namespace": namespace})
        answer.raise_for_status()
        return answer.json()["key"]

    def put_tool(self, name: str, **policy: Any) -> None:
        self.admin.put(f"/v1/tools/{name}", json=policy).raise_for_status()

    def approve(self, operation_id: str, reason: str = "fine") -> None:
        self.admin.post(
            f"/v1/operations/{operation_id}/approve", json={"reason": reason}
        ).raise_for_status()

    def reject(self, operation_id: str, reason: str) -> None:
        self.admin.post(
            f"/v1/operations/{operation_id}/reject", json={"reason": reason}
        ).raise_for_status()

    def effects(self, action: str) -> int:
        """How many effects the sandbox provider committed for `action`."""
        found = httpx.get(self.sandbox_url + "/_effects").json()["effects"]
        return sum(1 for effect in found if effect["name"] == action)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    binary = _binary()
    with tempfile.TemporaryDirectory(prefix="idem-python-") as tmp:
        work = Path(tmp)
        database = f"sqlite://{work / 'idem.db'}"
        subprocess.run(
            [binary, "users", "create", "--username", "pytest-admin", "--role", "admin",
             "--password-stdin", "--database-url", database],
            input=ADMIN_PASSWORD + "\n", text=True, check=True, capture_output=True,
        )
        idem, base_url = _start(
            [binary, "serve", "--bind", "127.0.0.1:0", "--database-url", database],
            work / "idem.log",
        )
        sandbox, sandbox_url = _start(
            [binary, "sandbox-provider", "--bind", "127.0.0.1:0"], work / "sandbox.log"
        )
        admin = httpx.Client(base_url=base_url)
        try:
            admin.post(
                "/auth/login", json={"username": "pytest-admin", "password": ADMIN_PASSWORD}
            ).raise_for_status()
            yield Server(base_url, sandbox_url, admin)
        finally:
            admin.close()
            for process in (idem, sandbox):
                process.terminate()
                process.wait(timeout=10)


@pytest.fixture
def api_key(server: Server) -> str:
    return server.new_key()


@pytest.fixture
def tool_name() -> str:
    """A tool name no other test uses (tools are global, not per namespace)."""
    return "t_" + uuid.uuid4().hex[:10]


def act(sandbox_url: str, action: str, body: Any, key: str | None = None) -> dict:
    """A side effect at the sandbox provider; without a key every call commits a new one."""
    headers = {"Idempotency-Key": key} if key else {}
    answer = httpx.post(f"{sandbox_url}/actions/{action}", json=body, headers=headers)
    answer.raise_for_status()
    return answer.json()
