"""What `idem mcp-proxy` adds to a tool call: the same upstream (a server written with the
official MCP Python SDK, clients/python/tests/mcp_upstream.py) called directly and through the
proxy, by the SDK's client, N calls each with new arguments (each a claim, a forwarded call and
a completion), then N repeats through the proxy (replays, not forwarded). Prints p50/p99.

Run with the Python client's venv (make test-python makes it), after make build:
  .ci/tools/python-venv/bin/python bench/mcp/proxy-latency.py [N]
"""

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from idem.testing import default_binary, local_server

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "clients" / "python" / "tests" / "mcp_upstream.py"
TOOL = "bench_refund"


def percentiles(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"p50 {statistics.median(ms):.2f} ms, p99 {p99:.2f} ms"


async def timed_calls(
    params: StdioServerParameters, calls: list[dict], passes: int
) -> list[list[float]]:
    """The time of each call, per pass; all passes in one MCP session (so that through the
    proxy, keyed by the session, the second pass repeats the first's calls)."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as host:
        await host.initialize()
        await host.call_tool(TOOL, {"order_id": "warm-up", "cents": 1})
        took = []
        for _ in range(passes):
            took.append([])
            for args in calls:
                start = time.perf_counter()
                result = await host.call_tool(TOOL, args)
                took[-1].append(time.perf_counter() - start)
                assert not result.is_error, result
        return took


async def main(n: int) -> None:
    binary = os.path.abspath(default_binary())
    with local_server(binary) as server, tempfile.TemporaryDirectory() as work:
        env = {"IDEM_TEST_TOOL": TOOL, "IDEM_TEST_EFFECTS": str(Path(work) / "effects")}
        server.put_tool(TOOL, effect="non_idempotent_write")
        key = server.new_key()
        direct = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)], env=env)
        proxied = StdioServerParameters(
            command=binary,
            args=["mcp-proxy", "--idem-url", server.base_url, "--api-key", key,
                  "--", sys.executable, str(UPSTREAM)],
            env=env,
        )
        calls = [{"order_id": f"o-{i}", "cents": i} for i in range(n)]
        (plain,) = await timed_calls(direct, calls, 1)
        new, again = await timed_calls(proxied, calls, 2)
        print(f"direct to the upstream:       {percentiles(plain)}")
        print(f"through the proxy, new calls: {percentiles(new)}")
        print(f"through the proxy, repeats:   {percentiles(again)}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
