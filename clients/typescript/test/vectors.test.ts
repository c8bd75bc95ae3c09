// The shared vectors of clients/test-vectors.json, which the server's Rust tests also check.

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

import { canonicalJson, derivedKey, fingerprint } from "../src/index.js";

const vectors = JSON.parse(readFileSync(resolve(__dirname, "../../test-vectors.json"), "utf8"));

describe("the key recipe matches the server", () => {
  for (const vector of vectors.canonical_json) {
    it(`canonical JSON: ${vector.name}`, () => {
      expect(canonicalJson(JSON.parse(vector.input))).toBe(vector.canonical);
    });
  }
  for (const vector of vectors.fingerprints) {
    it(`fingerprint: ${vector.name}`, () => {
      expect(fingerprint(vector.tool, JSON.parse(vector.args), vector.ignore_fields)).toBe(vector.fingerprint);
    });
  }
  for (const vector of vectors.derived_keys) {
    it(`derived key: ${vector.name}`, () => {
      const key = derivedKey(vector.run_id, vector.step, vector.tool, JSON.parse(vector.args), vector.ignore_fields);
      expect(key).toBe(vector.key);
    });
  }
  it("refuses numbers JSON cannot hold", () => {
    expect(() => canonicalJson({ x: Number.NaN })).toThrow(RangeError);
  });
});
