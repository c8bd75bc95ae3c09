"""An MCP server written with the official Python SDK (`mcp` on PyPI), for the interop test:
one tool, named by `IDEM_TEST_TOOL`, that appends each call to the file `IDEM_TEST_EFFECTS`.
Run on stdio: `python mcp_upstream.py`."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("payments")


@server.tool(
    name=os.environ["IDEM_TEST_TOOL"],
    annotations=ToolAnnotations(destructiveHint=False, idempotentHint=False),
)
def refund(order_id: str, cents: int) -> str:
    """Refunds an order: one line in the effects file per call."""
    with open(os.environ["IDEM_TEST_EFFECTS"], "a") as effects:
        effects.write(f"{order_id} {cents}\n")
    return f"refunded {cents} cents on {order_id}"


if __name__ == "__main__":
    server.run()
