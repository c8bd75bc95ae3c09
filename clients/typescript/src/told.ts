// What an agent framework's model reads when idem did not (or not just now) run a tool: the
// adapters answer these as the tool's output, not as errors, so the model can act on them.

import { AwaitingApproval, KeyReused, Rejected } from "./errors.js";

/** idem's refusals as the model should read them; anything else is thrown on. */
export function toldToTheModel(error: unknown): string {
  if (error instanceof AwaitingApproval) {
    return (
      `Nothing was done yet: this call needs a person's approval in idem (${error.dashboardUrl}). ` +
      "Once it is approved, calling the tool again with the same arguments runs it, once."
    );
  }
  if (error instanceof Rejected) return `Not done, do not retry: ${error.message}`;
  if (error instanceof KeyReused) return `Not done: ${error.message}`;
  throw error;
}
