"""A throwaway idem server (SQLite in a temporary directory, random port) and sandbox provider.

For tests, examples and benchmarks; the binary is `IDEM_BIN` or `target/release/idem`.

    with local_server() as server:
        idem = Idem(server.base_url, server.new_key())
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import httpx

ADMIN_USERNAME = "local-admin"
_ADMIN_PASSWORD = "local-admin-password-" + uuid.uuid4().hex[:8]
_ADDRESS = re.compile(r"(?:address=|listening on http://)(\d+\.\d+\.\d+\.\d+:\d+)")


def default_binary() -> str:
    """`IDEM_BIN`, else `target/release/idem` (what `make build` leaves)."""
    return os.environ.get("IDEM_BIN") or "target/release/idem"


def _start(
    args: list[str], log: Path, env: Optional[Mapping[str, str]] = None
) -> tuple["subprocess.Popen[bytes]", str]:
    handle = log.open("w")
    environment = {**os.environ, **env} if env else None
    process = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, env=environment)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _ADDRESS.search(log.read_text())
        if found:
            return process, "http://" + found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{args[0]} did not start: {log.read_text()}")


@dataclass
class LocalServer:
    """A running idem server, its sandbox provider, and an admin session on the server."""

    base_url: str
    sandbox_url: str
    admin: httpx.Client

    def new_key(self) -> str:
        """An API key of a fresh namespace."""
        namespace = "ns-" + uuid.uuid4().hex[:12]
        answer = self.admin.post("/v1/keys", json={"namespace": namespace})
        answer.raise_for_status()
        return str(answer.json()["key"])

    def put_tool(self, name: str, **policy: Any) -> None:
        """Registers a tool's policy."""
        self.admin.put(f"/v1/tools/{name}", json=policy).raise_for_status()

    def approve(self, operation_id: str, reason: str = "fine") -> None:
        """Approves as the admin."""
        self.admin.post(
            f"/v1/operations/{operation_id}/approve", json={"reason": reason}
        ).raise_for_status()

    def reject(self, operation_id: str, reason: str) -> None:
        """Rejects as the admin."""
        self.admin.post(
            f"/v1/operations/{operation_id}/reject", json={"reason": reason}
        ).raise_for_status()

    def waiting_for_approval(self, tool: str) -> list[str]:
        """Ids of the operations of `tool` that wait for a person."""
        listed = self.admin.get(
            "/v1/operations", params={"tool": tool, "status": "awaiting_approval"}
        ).json()
        return [op["id"] for op in listed["operations"]]

    def effects(self, action: str) -> int:
        """How many effects the sandbox provider committed for `action`."""
        found = httpx.get(self.sandbox_url + "/_effects").json()["effects"]
        return sum(1 for effect in found if effect["name"] == action)

    def fault(self, fault: str, *, action: Optional[str] = None, **options: Any) -> None:
        """Queues a fault at the sandbox provider for the next call of `action`, e.g.
        `fault("delay_after_commit", action="refund", delay_ms=2000)` (commit, then answer
        late) or `fault("drop_after_commit", action="refund")` (commit, then hang up)."""
        body = {"fault": fault, "action": action, **options}
        httpx.post(f"{self.sandbox_url}/_faults", json=body).raise_for_status()

    def act(self, action: str, body: Any, key: Optional[str] = None) -> Any:
        """A side effect at the sandbox provider; without a key every call commits a new one."""
        headers = {"Idempotency-Key": key} if key else {}
        answer = httpx.post(f"{self.sandbox_url}/actions/{action}", json=body, headers=headers)
        answer.raise_for_status()
        return answer.json()


@contextlib.contextmanager
def local_server(
    binary: Optional[str] = None, env: Optional[Mapping[str, str]] = None
) -> Iterator[LocalServer]:
    """Starts idem (with `env` added to its environment, e.g. `IDEM_*` settings) and the
    sandbox provider; stops both on exit."""
    binary = binary or default_binary()
    with tempfile.TemporaryDirectory(prefix="idem-local-") as tmp:
        work = Path(tmp)
        database = f"sqlite://{work / 'idem.db'}"
        subprocess.run(
            [binary, "users", "create", "--username", ADMIN_USERNAME, "--role", "admin",
             "--password-stdin", "--database-url", database],
            input=_ADMIN_PASSWORD + "\n", text=True, check=True, capture_output=True,
        )
        idem, base_url = _start(
            [binary, "serve", "--bind", "127.0.0.1:0", "--database-url", database],
            work / "idem.log",
            env,
        )
        sandbox, sandbox_url = _start(
            [binary, "sandbox-provider", "--bind", "127.0.0.1:0"], work / "sandbox.log"
        )
        admin = httpx.Client(base_url=base_url)
        try:
            admin.post(
                "/auth/login", json={"username": ADMIN_USERNAME, "password": _ADMIN_PASSWORD}
            ).raise_for_status()
            yield LocalServer(base_url, sandbox_url, admin)
        finally:
            admin.close()
            for process in (idem, sandbox):
                process.terminate()
                process.wait(timeout=10)
