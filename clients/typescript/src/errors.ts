// One error class per error of the contract (docs/api.md), and `IdemUnavailable` when idem
// cannot be reached. Each carries the contract's `code`, the HTTP status and the operation
// when the answer named one.

import type { Operation } from "./models.js";

export interface ErrorFields {
  code: string;
  status?: number;
  details?: Record<string, unknown>;
  operation?: Operation;
}

export class IdemError extends Error {
  readonly code: string;
  readonly status?: number;
  readonly details: Record<string, unknown>;
  readonly operation?: Operation;

  constructor(message: string, fields: ErrorFields) {
    super(message);
    this.name = new.target.name;
    this.code = fields.code;
    this.status = fields.status;
    this.details = fields.details ?? {};
    this.operation = fields.operation;
  }
}

/** `409 operation_in_progress`: another caller holds the lease. */
export class InProgress extends IdemError {
  constructor(message: string, fields: ErrorFields, readonly retryAfter?: number) {
    super(message, fields);
  }
}

/** `409 operation_outcome_unknown`: it may have happened; never retry, reconciliation decides. */
export class OutcomeUnknown extends IdemError {}

/** `422 idempotency_key_reused`: the same key with other arguments. */
export class KeyReused extends IdemError {}

/** `202`: the operation waits for a person's approval in idem's dashboard. */
export class AwaitingApproval extends IdemError {
  constructor(
    message: string,
    fields: ErrorFields,
    readonly operationId: string,
    readonly dashboardUrl: string,
  ) {
    super(message, fields);
  }
}

/** A person rejected the operation; the message says who and why. */
export class Rejected extends IdemError {}

/** `429 too_many_requests`; `retryAfter` in seconds. */
export class RateLimited extends IdemError {
  constructor(message: string, fields: ErrorFields, readonly retryAfter?: number) {
    super(message, fields);
  }
}

/** `409 lease_lost`: the lease ran out or was taken over before the completion. */
export class LeaseLost extends IdemError {}

/** `409 operation_already_final`: another report on a settled operation. */
export class AlreadyFinal extends IdemError {}

/** `401`/`403`: the API key is missing, wrong or may not do this. */
export class Unauthorized extends IdemError {}

/** `404`. */
export class NotFound extends IdemError {}

/** Any other `4xx`: the request was refused and nothing was stored. */
export class BadRequest extends IdemError {}

/** idem could not be reached (or answered a server error). */
export class IdemUnavailable extends IdemError {}

/**
 * Thrown by a guarded function for a failure that must be stored and replayed as such (a
 * declined card); a replay of a failed operation throws it again without calling the function.
 */
export class PermanentFailure extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "PermanentFailure";
  }
}
