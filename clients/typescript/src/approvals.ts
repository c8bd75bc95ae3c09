// Asking idem, without acting, whether a tool call that waits for a person may run. The
// toolkits' own approval hooks answer from it (the AI SDK's `toolApproval` and
// `needsApproval`, the Agents SDK's `needsApproval`), and the guarded execution of the same
// call then uses the key the first question fixed.
//
// The first question about a call claims it: idem records the request (`202`), which is what
// puts it on the approvals page. Every later question reads the operation
// (`GET /v1/operations/{id}`): a read takes no lease and records no event, so asking again,
// or waiting for a person's decision, never starts the attempt. The guarded execution claims
// it, and an approval gives the lease once.

import { AwaitingApproval, InProgress, KeyReused, NotFound, OutcomeUnknown } from "./errors.js";
import type { Claim, Operation } from "./models.js";

/** Where a tool call that may need a person stands in idem (see `Idem.approvalState`). */
export type ApprovalState =
  /** Calls of the tool wait for no one in idem: idem has no say, and the call was not claimed. */
  | { decision: "no_person" }
  /** idem has the call past approval (running, done, or unsettled): the guarded call replays or reports it. */
  | { decision: "not_needed" }
  /** A person approved it in idem: the guarded call runs it, once. */
  | { decision: "approved" }
  /** It waits for a person in idem's dashboard; nothing was done. */
  | { decision: "awaiting"; operationId: string; dashboardUrl: string }
  /** A person rejected it (or the request lapsed); never run. `reason` is idem's note: who and why. */
  | { decision: "rejected"; reason: string };

export interface ApprovalQuestion {
  /** The toolkit's id of the tool call; the guarded execution must be given the same. */
  callId: string;
  /** A business identity of the call, as the guard's `key` would give. */
  businessKey?: string;
  /** Hold the question up to this many seconds while the call waits for a person. */
  waitSeconds?: number;
}

/** The claim options that name a call's operation (its key, or its run and step). */
export interface CallKey {
  businessKey?: string;
  runId?: string;
  step?: number;
}

/** What asking needs of the client. */
export interface Ledger {
  readonly baseUrl: string;
  claim(tool: string, args: Record<string, unknown>, options: CallKey): Promise<Claim>;
  get(id: string): Promise<Operation>;
}

/** A call whose approval was asked: its key, its operation once known, and an attempt it opened. */
interface AskedCall {
  key: CallKey;
  operationId?: string;
  opened?: Claim;
  /** When `opened`'s lease runs out, by this process's clock. */
  openedUntil?: number;
}

/** What the guarded execution of an asked call takes: the key, and a live attempt if one was opened. */
export interface AskedExecution {
  key: CallKey;
  opened?: Claim;
}

/** Asked calls kept at most; the oldest are forgotten first (their execution then claims anew). */
const MAX_ASKED_CALLS = 10_000;
/** How often a waiting question reads the operation again. */
const POLL_MS = 500;
/** A lease this close to running out (or its last quarter) is not used: the tool might outlive it. */
const LEASE_MARGIN_MS = 2_000;

const NOT_NEEDED: ApprovalState = { decision: "not_needed" };
const APPROVED: ApprovalState = { decision: "approved" };

/** The calls asked about, by the toolkit's call id, and the questions about them. */
export class ApprovalDesk {
  private readonly calls = new Map<string, AskedCall>();

  constructor(private readonly ledger: Ledger) {}

  /**
   * Where the call `question.callId` of `tool` stands. `newKey` gives the call's key the
   * first time it is asked about (it may take the run's next step); later questions reuse it.
   */
  async ask(
    tool: string,
    args: Record<string, unknown>,
    question: ApprovalQuestion,
    newKey: () => CallKey,
  ): Promise<ApprovalState> {
    const call = this.asked(question.callId, newKey);
    if (call.opened) return APPROVED;
    if (call.operationId === undefined) {
      const first = await this.claimAsked(tool, args, call);
      if (first.decision !== "awaiting" || !question.waitSeconds) return first;
    }
    let operation: Operation;
    try {
      operation = await this.decision(call.operationId!, question.waitSeconds ?? 0);
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
      call.operationId = undefined;
      return this.claimAsked(tool, args, call);
    }
    switch (operation.status) {
      case "awaiting_approval":
        return this.awaiting(operation.id);
      case "approved":
        return APPROVED;
      case "rejected":
        // A claim of a rejected call is a replay: it takes no lease, and its note says who and why.
        return this.claimAsked(tool, args, call);
      default:
        // Started, done or unsettled: the guarded execution replays it or tells the model.
        return NOT_NEEDED;
    }
  }

  /** The key the call `callId` was asked with, and an attempt opened for it that still lives; once. */
  take(callId: string): AskedExecution | undefined {
    const call = this.calls.get(callId);
    if (!call) return undefined;
    this.calls.delete(callId);
    const live = call.opened && Date.now() < (call.openedUntil ?? 0);
    return { key: call.key, opened: live ? call.opened : undefined };
  }

  /** The call `callId` as first asked: its key is fixed then. */
  private asked(callId: string, newKey: () => CallKey): AskedCall {
    const known = this.calls.get(callId);
    if (known) return known;
    const call: AskedCall = { key: newKey() };
    if (this.calls.size >= MAX_ASKED_CALLS) this.calls.delete(this.calls.keys().next().value!);
    this.calls.set(callId, call);
    return call;
  }

  /** Claims the call: records the request the first time, or replays how it was settled. */
  private async claimAsked(tool: string, args: Record<string, unknown>, call: AskedCall): Promise<ApprovalState> {
    let claim: Claim;
    try {
      claim = await this.ledger.claim(tool, args, call.key);
    } catch (error) {
      if (error instanceof AwaitingApproval) {
        call.operationId = error.operationId;
        return this.awaiting(error.operationId);
      }
      // In flight, unknown, or a key reused: the guarded execution tells the model.
      if (error instanceof InProgress || error instanceof OutcomeUnknown || error instanceof KeyReused) return NOT_NEEDED;
      throw error;
    }
    call.operationId = claim.operation.id;
    if (claim.operation.status === "rejected") return { decision: "rejected", reason: claim.note ?? "rejected" };
    if (!claim.lease) return NOT_NEEDED;
    // Approved before this process first asked (a run resumed elsewhere): the claim opened the
    // attempt, which the execution uses while its lease lives.
    call.opened = claim;
    const lease = leaseMilliseconds(claim);
    call.openedUntil = Date.now() + lease - Math.min(LEASE_MARGIN_MS, lease / 4);
    return APPROVED;
  }

  /** The operation, read until nobody needs to decide any more or `waitSeconds` passed. */
  private async decision(id: string, waitSeconds: number): Promise<Operation> {
    const until = Date.now() + waitSeconds * 1000;
    for (;;) {
      const operation = await this.ledger.get(id);
      if (operation.status !== "awaiting_approval" || Date.now() + POLL_MS > until) return operation;
      await new Promise((done) => setTimeout(done, POLL_MS));
    }
  }

  private awaiting(operationId: string): ApprovalState {
    return { decision: "awaiting", operationId, dashboardUrl: `${this.ledger.baseUrl}/operations/${operationId}` };
  }
}

/**
 * How long a claim's lease lasts: from the claim (the operation's `updated_at`) to its end, both
 * by the server's clock; else what is left of it by this one's (0 when it cannot tell).
 */
function leaseMilliseconds(claim: Claim): number {
  const ends = Date.parse(claim.lease!.expires_at);
  const length = ends - Date.parse(String(claim.operation.updated_at));
  if (Number.isFinite(length)) return length;
  return Number.isFinite(ends) ? Math.max(0, ends - Date.now()) : 0;
}
