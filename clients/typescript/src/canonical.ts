// The key recipe, identical to the server's (docs/concepts.md): RFC 8785 canonical JSON, the
// fingerprint of a call, and the key derived from a run and a step. `clients/test-vectors.json`
// proves they agree.

import { createHash } from "node:crypto";

/** The longest run id used verbatim in a derived key; longer ones are hashed. */
const MAX_VERBATIM_RUN_ID_LEN = 128;

/** RFC 8785 (JCS): members sorted by UTF-16 code units, numbers as ECMAScript prints them. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError(`not a JSON number: ${value}`);
    return JSON.stringify(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const members = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, member]) => `${JSON.stringify(name)}:${canonicalJson(member)}`);
    return `{${members.join(",")}}`;
  }
  throw new TypeError(`not JSON: ${typeof value}`);
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** Removes the member at a dotted path through objects, in every object of nested arrays. */
function removePath(value: unknown, path: string): void {
  const dot = path.indexOf(".");
  const first = dot < 0 ? path : path.slice(0, dot);
  if (Array.isArray(value)) {
    for (const item of value) removePath(item, path);
  } else if (value !== null && typeof value === "object") {
    const object = value as Record<string, unknown>;
    if (dot < 0) delete object[first];
    else if (first in object) removePath(object[first], path.slice(dot + 1));
  }
}

/** Lowercase hex SHA-256 of the tool, a newline, and JCS of `args` without `ignoreFields`. */
export function fingerprint(tool: string, args: unknown, ignoreFields: string[] = []): string {
  const kept = structuredClone(args);
  for (const path of ignoreFields) removePath(kept, path);
  return sha256Hex(`${tool}\n${canonicalJson(kept)}`);
}

const isKeyChar = (char: string) => char >= " " && char <= "~";

/** The key the server derives for `tool` with `args` at `step` of the run `runId`. */
export function derivedKey(
  runId: string,
  step: number,
  tool: string,
  args: unknown,
  ignoreFields: string[] = [],
): string {
  const digest = fingerprint(tool, args, ignoreFields);
  const verbatim =
    runId.length >= 1 && runId.length <= MAX_VERBATIM_RUN_ID_LEN && [...runId].every(isKeyChar);
  return verbatim
    ? `run:${runId}:step:${step}:${digest}`
    : `run-sha256:${sha256Hex(runId)}:step:${step}:${digest}`;
}
