"""The guard's own overhead per call over loopback (a benchmark, not a test).

Starts a server like the tests do (IDEM_BIN, SQLite in a temporary directory), then times a
guarded no-op function: N fresh calls (claim + complete: two round trips) and N replays (one
claim), and prints p50/p99 in milliseconds. Run: python bench/guard_overhead.py [N]
(on a server without the per-key rate limit, which a long enough loop would reach).
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid

from idem import Idem
from idem.testing import local_server


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"


def main(n: int) -> None:
    # The per-key rate limit off (default 1000 requests/s, bursts of 2000): a loop of fresh
    # calls (two requests each) outruns it within a few thousand calls, and each 429 makes
    # the guard wait its Retry-After (1 s) before recording: that would time the limiter.
    with local_server(env={"IDEM_RATE_LIMIT_PER_SECOND": "0"}) as server:
        with Idem(server.base_url, server.new_key()) as client:

            @client.guard("bench_noop")
            def noop(i: int) -> int:
                return i

            base = "bench-" + uuid.uuid4().hex[:8]
            phases = (("warm-up", base + "-warm"), ("fresh", base), ("replay", base))
            for phase, run_id in phases:
                samples = []
                with client.run(run_id):
                    for i in range(n):
                        start = time.perf_counter()
                        noop(i)
                        samples.append(time.perf_counter() - start)
                if phase != "warm-up":
                    print(f"{phase:7} (n={n}): {percentiles(samples)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
