// SPEC RT-4's first steps and RT-13's ceilings, in that order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeJson, parseStrict, jsonLimits, JSON_CEILINGS } from "../client/json.js";
import { bytes } from "./helpers.mjs";

test("the byte ceiling comes before UTF-8 and syntax", () => {
  const big = new Uint8Array(64 * 1024 + 1).fill(0xff); // too large and not UTF-8
  assert.deepEqual(decodeJson(big), { ok: false, failure: "EVENT_TOO_LARGE" });
  const padded = `{"a":"${"x".repeat(64 * 1024)}"}`;
  assert.equal(decodeJson(padded).failure, "EVENT_TOO_LARGE");
  // Multi-byte text is measured in UTF-8 bytes, not UTF-16 units.
  const wide = `"${"é".repeat(33 * 1024)}"`;
  assert.equal(wide.length < 64 * 1024, true);
  assert.equal(decodeJson(wide).failure, "EVENT_TOO_LARGE");
});

test("UTF-8 comes before syntax: invalid bytes are malformed, never repaired", () => {
  assert.deepEqual(decodeJson(new Uint8Array([0x7b, 0xc3, 0x28, 0x7d])), { ok: false, failure: "MALFORMED_EVENT" });
  assert.deepEqual(decodeJson(bytes('{"a":"é"}')), { ok: true, value: { a: "é" } });
});

test("depth and element ceilings refuse before a value is used", () => {
  const deep = (n) => "[".repeat(n) + "]".repeat(n);
  assert.equal(parseStrict(deep(16)).ok, true);
  assert.equal(parseStrict(deep(17)).failure, "EVENT_TOO_LARGE");
  const many = (n) => `[${Array(n).fill(0).join(",")}]`;
  assert.equal(parseStrict(many(4095)).ok, true); // root + 4,095 items
  assert.equal(parseStrict(many(4096)).failure, "EVENT_TOO_LARGE");
  // A deployment lowers, never raises.
  assert.deepEqual(jsonLimits({ maxDepth: 99, maxBytes: 10 }), { ...JSON_CEILINGS, maxBytes: 10 });
  assert.equal(decodeJson('{"a":12345}', jsonLimits({ maxBytes: 10 })).failure, "EVENT_TOO_LARGE");
});

test("strict syntax: repeated keys, trailing text, lone surrogates and bad numbers are refused", () => {
  for (const bad of ['{"a":1,"a":1}', '{"a":{"b":1,"b":2}}', "{} x", '"\\ud800"', "01", "1.", "NaN", "{'a':1}",
    '{"a":1,}', "[1,]", '"a\nb"', "1e400", ""]) {
    assert.equal(parseStrict(bad).failure, "MALFORMED_EVENT", bad);
  }
  assert.deepEqual(parseStrict(' {"a":[true,false,null,-1.5e2,"\\u00e9\\"\\\\"]} ').value, { a: [true, false, null, -150, 'é"\\'] });
  // __proto__ is data, not a prototype.
  const v = parseStrict('{"__proto__":{"polluted":1}}').value;
  assert.equal(Object.keys(v).join(), "__proto__");
  assert.equal({}.polluted, undefined);
});
