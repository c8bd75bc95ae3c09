// The contract's objects, as the client reads them.

export type OperationStatus =
  | "awaiting_approval"
  | "approved"
  | "pending"
  | "succeeded"
  | "failed"
  | "unknown"
  | "rejected";

/** An operation (the contract's `Op`); fields the client does not name are kept as they came. */
export interface Operation {
  id: string;
  namespace: string;
  key: string;
  tool: string;
  status: OperationStatus;
  provider_key: string;
  args: unknown;
  result: unknown;
  error: { code: string; message: string } | null;
  retryable: boolean;
  run_id: string | null;
  step: number | null;
  [field: string]: unknown;
}

export interface Lease {
  token: string;
  expires_at: string;
}

/** A claim's answer: `lease` when the caller must execute now (`201`), else a stored outcome. */
export interface Claim {
  operation: Operation;
  lease?: Lease;
  replayed: boolean;
  note?: string;
  status: number;
}

/** What a guarded call gives with `withNote`: the value, and whether it was replayed and why. */
export interface GuardResult<T> {
  value: T;
  replayed: boolean;
  note?: string;
  operation?: Operation;
}
