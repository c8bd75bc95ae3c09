export { Idem } from "./client.js";
export type { ApprovalQuestion, ApprovalState } from "./approvals.js";
export type { ClaimOptions, GuardOptions, IdemOptions, OnUnavailable } from "./client.js";
export { canonicalJson, derivedKey, fingerprint } from "./canonical.js";
export * from "./errors.js";
export type { Claim, GuardResult, Lease, Operation, OperationStatus } from "./models.js";
