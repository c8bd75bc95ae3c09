// The trivial Restate service that `idem-bench --peers` calls through Restate's ingress:
// one handler that answers at once, so the measurement is Restate's own cost of an
// idempotent request (journal, idempotency table, invocation round trip), not the work.
//
// Usage: node handler.mjs [port]   (port 0, the default, lets the system pick a free one)
// Prints `restate handler listening on 127.0.0.1:<port>` once it accepts connections; the
// bench waits for that line.
import * as http2 from "node:http2";
import * as restate from "@restatedev/restate-sdk";

// The SDK calls `Promise.withResolvers` (Node ≥ 22) when it serves a request; on Node 20 it
// would fail every invocation. The SDK only calls it per request, so defining it here, before
// the server starts, is enough.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const bench = restate.service({
  name: "Bench",
  handlers: {
    charge: async (_ctx, request) => ({ ok: true, amount_cents: request?.amount_cents ?? 0 }),
  },
});

const endpoint = restate.endpoint().bind(bench);
// `endpoint.listen(port)` binds every interface; the bench keeps to loopback, so it serves the
// same HTTP/2 handler on 127.0.0.1 itself.
const server = http2.createServer(endpoint.http2Handler());
const port = Number(process.argv[2] ?? 0);
server.listen(port, "127.0.0.1", () => {
  console.log(`restate handler listening on 127.0.0.1:${server.address().port}`);
});
