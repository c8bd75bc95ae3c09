// A refund step guarded by idem, run twice as a retried agent run would: the provider
// refunds once, and the second run gets the stored result and idem's note.
//
//   make build && npm --prefix clients/typescript ci
//   IDEM_URL=http://127.0.0.1:3000 IDEM_API_KEY=idem_… node examples/typescript/refund.mjs
//
// (`make run` serves a demo idem on 127.0.0.1:3000; `idem keys create --namespace shop
// --database-url sqlite://idem-demo.db` makes a key for it.)

import { Idem } from "../../clients/typescript/dist/index.js";

const idem = new Idem({ baseUrl: process.env.IDEM_URL ?? "http://127.0.0.1:3000", apiKey: process.env.IDEM_API_KEY });

let refunds = 0;
const refund = idem.guard(
  "refund",
  async ({ orderId, cents }) => {
    refunds += 1; // the side effect: your payment provider's call goes here
    return { refundId: `re_${orderId}`, cents };
  },
  { key: ({ orderId }) => `refund:${orderId}`, withNote: true },
);

for (const attempt of [1, 2]) {
  const outcome = await idem.run("run-ts-example", () => refund({ orderId: "1234", cents: 500 }));
  console.log(`run ${attempt}:`, outcome.replayed ? `replayed (${outcome.note})` : "refunded", outcome.value);
}
console.log(`refunds made: ${refunds}`);
