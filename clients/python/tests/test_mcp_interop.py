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


async def test_a_python_sdk_host_hears_progress_logs_and_list_changes(server, api_key, tmp_path):
    """What the proxy passes through besides tool calls, to a host nobody here wrote: progress
    under the host's own token (the Python SDK picks it, the proxy's upstream request carries
    another), log lines and list changes from idem's sandbox MCP server behind the proxy."""
    idem = os.path.abspath(default_binary())
    sandbox = [idem, "sandbox-mcp", "--effects-file", str(tmp_path / "effects")]
    proxy = StdioServerParameters(
        command=idem,
        args=["mcp-proxy", "--idem-url", server.base_url, "--api-key", api_key, "--", *sandbox],
    )
    progress, logs, heard = [], [], []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def on_log(params):
        logs.append(params.data)

    async def on_message(message):
        heard.append(getattr(message, "method", None))

    session = {"logging_callback": on_log, "message_handler": on_message}
    async with stdio_client(proxy) as (read, write), ClientSession(read, write, **session) as host:
        await host.initialize()
        resources = await host.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["sandbox://orders/42"]
        prompt = await host.get_prompt("order_summary", {"order_id": "42"})
        assert prompt.messages[0].content.text == "Summarize order 42."

        report = await host.call_tool("build_report", {"month": "may"}, progress_callback=on_progress)
        assert texts(report) == 'report of {"month":"may"}'
        assert [done for done, _, _ in progress] == [1, 2, 3], "in order, before the answer"
        assert all(total == 3 for _, total, _ in progress)

        await host.call_tool("refresh_catalog", {})
        listed = await host.list_tools()
        assert "track_parcel" in [tool.name for tool in listed.tools]
    assert logs == [{"building": {"month": "may"}}]
    assert "notifications/tools/list_changed" in heard, heard
