"""`idem mcp-proxy` between MCP software nobody here wrote: the official Python SDK's client
as the host and a server built with the same SDK as the upstream, with a real idem."""

import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from idem.testing import default_binary

UPSTREAM = Path(__file__).with_name("mcp_upstream.py")


def texts(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_a_python_sdk_host_through_the_proxy_refunds_once(server, api_key, tool_name, tmp_path):
    effects = tmp_path / "effects"
    server.put_tool(tool_name, effect="non_idempotent_write")
    proxy = StdioServerParameters(
        command=os.path.abspath(default_binary()),
        args=["mcp-proxy", "--idem-url", server.base_url, "--api-key", api_key,
              "--", sys.executable, str(UPSTREAM)],
        env={"IDEM_TEST_TOOL": tool_name, "IDEM_TEST_EFFECTS": str(effects)},
    )
    async with stdio_client(proxy) as (read, write), ClientSession(read, write) as host:
        await host.initialize()
        listed = await host.list_tools()
        assert [tool.name for tool in listed.tools] == [tool_name]
        args = {"order_id": "o-77", "cents": 500}
        first = await host.call_tool(tool_name, args)
        assert not first.is_error and "refunded 500 cents" in texts(first)
        again = await host.call_tool(tool_name, args)
        said = texts(again)
        assert said.startswith("already completed"), said
        assert "refunded 500 cents" in said, "the stored result follows the note"
    assert effects.read_text().splitlines() == ["o-77 500"], "one refund"
