"""What the three refund agents share: an idem to talk to, and the refund itself.

With IDEM_URL and IDEM_API_KEY set, the examples use that server (register the tool `refund`
as `irreversible` there, and approve in its dashboard when asked). Otherwise they start a
throwaway server and sandbox provider from IDEM_BIN (default target/release/idem) and play the
approver themselves.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional

from idem import provider_key
from idem.testing import LocalServer, local_server

TOOL = "refund"


class Setup:
    """The idem server's address and key, the provider, and how an approval happens."""

    def __init__(self, base_url: str, api_key: str, local: Optional[LocalServer]) -> None:
        self.base_url, self.api_key, self.local = base_url, api_key, local

    def refund(self, order_id: str, amount_cents: int) -> dict[str, Any]:
        """The side effect: a refund at the (sandbox) payment provider."""
        print(f"    >>> refunding {amount_cents} cents for order {order_id} at the provider")
        if self.local is None:
            return {"refund_id": f"re_{order_id}", "amount_cents": amount_cents}
        # The provider deduplicates by its own idempotency key: give it the operation's.
        body = {"order_id": order_id, "amount_cents": amount_cents}
        return dict(self.local.act(TOOL, body, key=provider_key()))

    def approve_pending(self) -> None:
        """A person approves the waiting refund (here: the example, as the local admin)."""
        if self.local is None:
            input("    approve the refund in idem's dashboard, then press Enter ")
            return
        for operation_id in self.local.waiting_for_approval(TOOL):
            print(f"    (a person approves operation {operation_id} in idem's dashboard)")
            self.local.approve(operation_id, "customer is right")

    def effects(self) -> str:
        if self.local is None:
            return "see your provider"
        return str(self.local.effects(TOOL))


@contextlib.contextmanager
def setup() -> Iterator[Setup]:
    url, key = os.environ.get("IDEM_URL"), os.environ.get("IDEM_API_KEY")
    if url and key:
        yield Setup(url, key, None)
        return
    with local_server() as server:
        server.put_tool(TOOL, effect="irreversible")
        yield Setup(server.base_url, server.new_key(), server)


def step(title: str) -> None:
    print(f"\n== {title}")
