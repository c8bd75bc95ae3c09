// The low-level client: one method per endpoint an agent uses, each answer typed, each
// error of the contract its own class; and `run` and `guard`, the claim → act → complete loop.

import { AsyncLocalStorage } from "node:async_hooks";

import {
  AlreadyFinal,
  AwaitingApproval,
  BadRequest,
  IdemError,
  IdemUnavailable,
  InProgress,
  KeyReused,
  LeaseLost,
  NotFound,
  OutcomeUnknown,
  PermanentFailure,
  RateLimited,
  Rejected,
  Unauthorized,
  type ErrorFields,
} from "./errors.js";
import { ApprovalDesk, type ApprovalQuestion, type ApprovalState } from "./approvals.js";
import type { Claim, GuardResult, Operation } from "./models.js";

/** The longest `Prefer: wait` the contract allows, in seconds. */
const MAX_WAIT_SECONDS = 60;

export type OnUnavailable = "fail_closed" | "fail_open";

export interface IdemOptions {
  baseUrl: string;
  apiKey: string;
  /** Per request, in milliseconds (default 10 000). */
  timeoutMs?: number;
  /** When idem cannot be reached: raise (default) or act unrecorded. */
  onUnavailable?: OnUnavailable;
  /** How long a guarded call waits for another caller's attempt, in seconds (default 10). */
  inProgressWaitSeconds?: number;
}

export interface ClaimOptions {
  key?: string;
  businessKey?: string;
  runId?: string;
  step?: number;
  /** `Prefer: wait=N`: hold the request up to N seconds for an attempt in flight or approval. */
  waitSeconds?: number;
}

export interface GuardOptions<A extends unknown[]> {
  /** A business identity from the arguments (`(order) => \`refund:${order.id}\``). */
  key?: (...args: A) => string;
  /** Return `{ value, replayed, note }` instead of the value. */
  withNote?: boolean;
  /** Errors after which the effect may or may not have happened: reported `unknown`. */
  isUnknown?: (error: unknown) => boolean;
  /** Seconds to wait for a person's approval instead of throwing `AwaitingApproval`. */
  approvalWaitSeconds?: number;
  onUnavailable?: OnUnavailable;
  /**
   * The toolkit's id of this tool call, when its approval was asked of idem first
   * (`approvalState`): the call then uses the key that question fixed.
   */
  callId?: string;
}

const ERRORS_BY_CODE: Record<string, new (message: string, fields: ErrorFields) => IdemError> = {
  operation_outcome_unknown: OutcomeUnknown,
  idempotency_key_reused: KeyReused,
  lease_lost: LeaseLost,
  operation_already_final: AlreadyFinal,
};

/** Timeouts and dropped connections: the tool may have acted. */
function isTimeoutOrDrop(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  const code = (error as { code?: string })?.code;
  return (
    name === "TimeoutError" ||
    name === "AbortError" ||
    code === "ECONNRESET" ||
    code === "ETIMEDOUT" ||
    code === "UND_ERR_SOCKET"
  );
}

/** The run a guarded call belongs to, and its next step. */
class RunState {
  constructor(
    readonly runId: string,
    private nextStep: number,
  ) {}

  takeStep(): number {
    return this.nextStep++;
  }
}

export class Idem {
  readonly baseUrl: string;
  readonly onUnavailable: OnUnavailable;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly inProgressWaitSeconds: number;
  private readonly runs = new AsyncLocalStorage<RunState>();
  private readonly approvalPolicies = new Map<string, Promise<boolean>>();
  private readonly approvals = new ApprovalDesk(this);

  constructor(options: IdemOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.onUnavailable = options.onUnavailable ?? "fail_closed";
    this.inProgressWaitSeconds = options.inProgressWaitSeconds ?? 10;
  }

  /** `POST /v1/operations`: a Claim for 200/201; throws `AwaitingApproval` for 202. */
  async claim(tool: string, args: Record<string, unknown>, options: ClaimOptions = {}): Promise<Claim> {
    return this.claimAt("/v1/operations", { tool, ...claimBody(args, options) }, options.waitSeconds);
  }

  /** `POST /v1/tools/{tool}/invoke`: idem runs the tool through its executor. */
  async invoke(tool: string, args: Record<string, unknown>, options: ClaimOptions = {}): Promise<Claim> {
    const path = `/v1/tools/${encodeURIComponent(tool)}/invoke`;
    return this.claimAt(path, claimBody(args, options), options.waitSeconds);
  }

  /** A claim that waits (`Prefer: wait`) up to `seconds` for an attempt in flight or approval. */
  async wait(tool: string, args: Record<string, unknown>, seconds: number, options: ClaimOptions = {}): Promise<Claim> {
    return this.claim(tool, args, { ...options, waitSeconds: seconds });
  }

  /** `POST /v1/operations/{id}/complete` with `outcome: succeeded`. */
  async complete(id: string, leaseToken: string, result: unknown, providerRef?: string): Promise<Operation> {
    const body = { lease_token: leaseToken, outcome: "succeeded", result, provider_ref: providerRef };
    return operationOf(await this.send("POST", `/v1/operations/${id}/complete`, body));
  }

  /** `POST /v1/operations/{id}/complete` with `outcome: failed`. */
  async fail(id: string, leaseToken: string, code: string, message: string, retryable = false): Promise<Operation> {
    const body = { lease_token: leaseToken, outcome: "failed", error: { code, message }, retryable };
    return operationOf(await this.send("POST", `/v1/operations/${id}/complete`, body));
  }

  /** `POST /v1/operations/{id}/unknown`: the caller cannot tell what happened. */
  async unknown(id: string, leaseToken: string, code: string, message: string): Promise<Operation> {
    const body = { lease_token: leaseToken, error: { code, message } };
    return operationOf(await this.send("POST", `/v1/operations/${id}/unknown`, body));
  }

  /** `GET /v1/operations/{id}`. */
  async get(id: string): Promise<Operation> {
    return operationOf(await this.send("GET", `/v1/operations/${id}`));
  }

  /**
   * Asks idem, without acting, whether the tool call `question.callId` may run: for a tool
   * that waits for a person (`irreversible`, or `approval: "always"`), the first question
   * claims the call, which records the request for the dashboard, and later ones read the
   * operation (`GET`), so asking never starts the attempt; any other tool is `no_person`,
   * unclaimed. The key is fixed by the first question: `businessKey`, or the run's next step
   * (taken then). The guarded call given the same `callId` uses that key, and runs the call
   * once a person approved it. When idem cannot be reached, `fail_open` answers `no_person`
   * (the guarded call then runs unrecorded, as it would anyway); `fail_closed` throws.
   */
  async approvalState(tool: string, args: Record<string, unknown>, question: ApprovalQuestion): Promise<ApprovalState> {
    try {
      if (!(await this.waitsForPerson(tool))) return { decision: "no_person" };
      return await this.approvals.ask(tool, args, question, () => {
        const run = this.runs.getStore();
        return { businessKey: question.businessKey, runId: run?.runId, step: run?.takeStep() };
      });
    } catch (error) {
      if (!(error instanceof IdemUnavailable) || this.onUnavailable !== "fail_open") throw error;
      console.error(`idem is unavailable: cannot ask whether ${tool} needs approval (fail_open)`);
      return { decision: "no_person" };
    }
  }

  /** Whether calls of `tool` wait for a person, by its registered policy (asked once). */
  private waitsForPerson(tool: string): Promise<boolean> {
    let answer = this.approvalPolicies.get(tool);
    if (!answer) {
      answer = this.send("GET", `/v1/tools/${encodeURIComponent(tool)}`).then((policy) => {
        const { effect, approval } = policy as { effect?: string; approval?: string };
        return effect === "irreversible" || approval === "always";
      });
      answer.catch(() => this.approvalPolicies.delete(tool));
      this.approvalPolicies.set(tool, answer);
    }
    return answer;
  }

  /** Runs `body` as the run `runId`: each guarded call inside gets the next step number. */
  run<T>(runId: string, body: () => T, options: { step?: number } = {}): T {
    return this.runs.run(new RunState(runId, options.step ?? 0), body);
  }

  /**
   * `fn` guarded as the tool `tool` of idem's registry: a new call is claimed, run, and its
   * result completed; a repeat returns the stored result without calling `fn`; a
   * `PermanentFailure` is stored and thrown again on repeats; a timeout is reported
   * `unknown` and thrown as `OutcomeUnknown`; any other error is stored as retryable.
   */
  guard<A extends unknown[], R>(
    tool: string,
    fn: (...args: A) => Promise<R> | R,
    options: GuardOptions<A> = {},
  ): (...args: A) => Promise<R | GuardResult<R>> {
    return async (...args: A) => {
      const outcome = await this.callGuarded(tool, fn, args, options);
      return options.withNote ? outcome : outcome.value;
    };
  }

  private async callGuarded<A extends unknown[], R>(
    tool: string,
    fn: (...args: A) => Promise<R> | R,
    args: A,
    options: GuardOptions<A>,
  ): Promise<GuardResult<R>> {
    const named = namedArgs(args);
    const asked = options.callId === undefined ? undefined : this.approvals.take(options.callId);
    const run = this.runs.getStore();
    const claimOptions: ClaimOptions = asked?.key ?? {
      businessKey: options.key?.(...args),
      runId: run?.runId,
      step: run?.takeStep(),
    };
    const failOpen = (options.onUnavailable ?? this.onUnavailable) === "fail_open";
    let claim: Claim;
    try {
      claim = asked?.opened ?? (await this.patientClaim(tool, named, claimOptions, options.approvalWaitSeconds));
    } catch (error) {
      if (!(error instanceof IdemUnavailable) || !failOpen) throw error;
      console.error(`idem is unavailable: running ${tool} UNRECORDED (fail_open)`);
      return { value: await fn(...args), replayed: false };
    }
    if (!claim.lease) return settled<R>(claim);
    const { operation, lease } = claim;
    let value: R;
    try {
      value = await fn(...args);
    } catch (error) {
      throw await this.reportFailure(operation, lease.token, error, options.isUnknown ?? isTimeoutOrDrop);
    }
    const final = await this.complete(operation.id, lease.token, value ?? null);
    return { value, replayed: false, operation: final };
  }

  /** Claims; waits for another caller's attempt (and for approval if asked) as allowed. */
  private async patientClaim(
    tool: string,
    args: Record<string, unknown>,
    options: ClaimOptions,
    approvalWaitSeconds = 0,
  ): Promise<Claim> {
    const started = Date.now();
    let waitSeconds: number | undefined;
    for (;;) {
      try {
        return await this.claim(tool, args, { ...options, waitSeconds });
      } catch (error) {
        const patience =
          error instanceof AwaitingApproval ? approvalWaitSeconds
          : error instanceof InProgress ? this.inProgressWaitSeconds
          : 0;
        const left = patience - (Date.now() - started) / 1000;
        if (left < 1) throw error;
        waitSeconds = Math.floor(left);
      }
    }
  }

  /** Records a failed attempt and gives the error the caller sees. */
  private async reportFailure(
    operation: Operation,
    token: string,
    error: unknown,
    isUnknown: (error: unknown) => boolean,
  ): Promise<unknown> {
    const message = error instanceof Error ? error.message : String(error);
    const name = error instanceof Error ? error.name : "Error";
    try {
      if (error instanceof PermanentFailure) {
        await this.fail(operation.id, token, error.code, error.message, false);
        return error;
      }
      if (isUnknown(error)) {
        await this.unknown(operation.id, token, name, message || name);
        return new OutcomeUnknown(
          `${operation.tool}: the outcome is unknown (${name}: ${message}); it will not be retried, reconciliation decides`,
          { code: "operation_outcome_unknown", operation },
        );
      }
      await this.fail(operation.id, token, name, message || name, true);
    } catch (reportError) {
      console.error(`could not record the failure of operation ${operation.id}: ${reportError}`);
    }
    return error;
  }

  private async claimAt(path: string, body: Record<string, unknown>, waitSeconds?: number): Promise<Claim> {
    const headers: Record<string, string> = {};
    let timeoutMs = this.timeoutMs;
    if (waitSeconds) {
      const seconds = Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.floor(waitSeconds)));
      headers.prefer = `wait=${seconds}`;
      timeoutMs += seconds * 1000;
    }
    const response = await this.fetch("POST", path, body, headers, timeoutMs);
    const payload = await readJson(response);
    if (response.status === 202) {
      const operation = (payload as { operation: Operation }).operation;
      throw new AwaitingApproval(
        `operation ${operation.id} (${operation.tool}) waits for a person's approval`,
        { code: "awaiting_approval", status: 202, operation },
        operation.id,
        `${this.baseUrl}/operations/${operation.id}`,
      );
    }
    if (!response.ok) throw errorFor(response, payload);
    const claim = payload as { operation: Operation; lease?: Claim["lease"]; replayed?: boolean; note?: string };
    return {
      operation: claim.operation,
      lease: claim.lease ?? undefined,
      replayed: claim.replayed ?? false,
      note: claim.note ?? undefined,
      status: response.status,
    };
  }

  private async send(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await this.fetch(method, path, body, {}, this.timeoutMs);
    const payload = await readJson(response);
    if (!response.ok) throw errorFor(response, payload);
    return payload;
  }

  private async fetch(
    method: string,
    path: string,
    body: unknown,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<Response> {
    try {
      return await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.apiKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new IdemUnavailable(`idem is unreachable: ${error}`, { code: "unavailable" });
    }
  }
}

function claimBody(args: Record<string, unknown>, options: ClaimOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { args };
  if (options.key !== undefined) body.key = options.key;
  if (options.businessKey !== undefined) body.business_key = options.businessKey;
  if (options.runId !== undefined) body.run_id = options.runId;
  if (options.step !== undefined) body.step = options.step;
  return body;
}

/** A guarded function's arguments as idem fingerprints them: one object is taken as the
 * arguments by name; anything else as `{ args: [...] }`. */
function namedArgs(args: unknown[]): Record<string, unknown> {
  const [only] = args;
  if (args.length === 1 && only !== null && typeof only === "object" && !Array.isArray(only)) {
    return JSON.parse(JSON.stringify(only)) as Record<string, unknown>;
  }
  return { args: JSON.parse(JSON.stringify(args)) as unknown[] };
}

/** The outcome of a claim that found the operation settled: a replay. */
function settled<R>(claim: Claim): GuardResult<R> {
  const { operation } = claim;
  switch (operation.status) {
    case "succeeded":
      return { value: operation.result as R, replayed: true, note: claim.note, operation };
    case "failed":
      throw new PermanentFailure(operation.error?.code ?? "failed", operation.error?.message ?? "");
    case "rejected":
      throw new Rejected(claim.note ?? "rejected", { code: "rejected", status: claim.status, operation });
    default:
      throw new IdemError(`unexpected operation status ${operation.status}`, { code: "unexpected", operation });
  }
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return { error: { code: `http_${response.status}`, message: text.slice(0, 500), details: {} } };
  }
}

/** The Op of an answer about one operation. */
function operationOf(payload: unknown): Operation {
  return (payload as { operation: Operation }).operation;
}

function retryAfter(response: Response): number | undefined {
  const value = Number(response.headers.get("retry-after"));
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The error for an answer that is not a success. */
function errorFor(response: Response, payload: unknown): IdemError {
  const error = (payload as { error?: { code?: string; message?: string; details?: Record<string, unknown> } })?.error;
  const code = error?.code ?? `http_${response.status}`;
  const message = error?.message ?? response.statusText;
  const details = error?.details ?? {};
  const operation = (details.operation as Operation | undefined) ?? undefined;
  const fields: ErrorFields = { code, status: response.status, details, operation };
  if (code === "operation_in_progress") return new InProgress(message, fields, retryAfter(response));
  if (code === "too_many_requests") return new RateLimited(message, fields, retryAfter(response));
  const known = ERRORS_BY_CODE[code];
  if (known) return new known(message, fields);
  if (response.status >= 500) return new IdemUnavailable(message, fields);
  if (response.status === 401 || response.status === 403) return new Unauthorized(message, fields);
  if (response.status === 404) return new NotFound(message, fields);
  return new BadRequest(message, fields);
}
