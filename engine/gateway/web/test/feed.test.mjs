// SPEC RT-4 after the schema: registry -> scope + generation fence ->
// sequence table -> mapper -> effect -> commit, in that order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Feed, SerialQueue } from "../client/feed.js";
import { envelope } from "../client/schema.js";
import { env, snap } from "./helpers.mjs";
import { checkpoint } from "../client/schema.js";

function feed(over = {}) {
  const calls = [];
  const f = new Feed({
    streamId: "demo", eventTypes: ["demo.tick"],
    map: (e) => {
      calls.push(`map ${e.sequence}`);
      return { n: e.payload.n };
    },
    effect: (ev, ctx) => calls.push(`effect ${ctx.sequence}`),
    ...over,
  });
  f.adopt("scope-1", checkpoint(snap("0").checkpoint).value);
  return { f, calls };
}
const E = (over) => envelope(env(over)).value;

test("the effect runs before the commit, and a failed effect commits nothing", async () => {
  let seenLast = null;
  const { f } = feed({ effect: () => { seenLast = f.table.lastApplied; } });
  assert.deepEqual(await f.process(E({ sequence: "1" }), f.generation, 0), { kind: "APPLIED", failure: null });
  assert.equal(seenLast, 0n, "the effect saw the sequence not yet committed");
  assert.equal(f.table.lastApplied, 1n);
  const g = feed({ effect: () => { throw new Error("db down"); } }).f;
  assert.deepEqual(await g.process(E({ sequence: "1" }), g.generation, 0), { kind: "RESYNC", failure: "APPLY_FAILED" });
  assert.equal(g.table.lastApplied, 0n);
  assert.equal(g.table.cursor, "c1.0");
});

test("registry before everything: another stream or an unregistered type fails closed, no mapper, no effect", async () => {
  const { f, calls } = feed();
  assert.equal((await f.process(E({ streamId: "other" }), f.generation, 0)).failure, "MALFORMED_EVENT");
  assert.equal((await f.process(E({ eventType: "demo.unknown" }), f.generation, 0)).failure, "MALFORMED_EVENT");
  assert.deepEqual(calls, []);
  assert.equal(f.table.stats.apply, 0, "the sequence table never saw them");
});

test("scope and generation fences come before the sequence table", async () => {
  const { f, calls } = feed();
  assert.deepEqual(await f.process(E({ scopeBinding: "scope-2" }), f.generation, 0),
    { kind: "RESYNC", failure: "SCOPE_PROTOCOL_VIOLATION" });
  const old = f.generation;
  f.fence();
  assert.deepEqual(await f.process(E(), old, 0), { kind: "IGNORED", failure: "SCOPE_FENCED" });
  assert.deepEqual(calls, []);
  assert.equal(f.table.stats.apply + f.table.stats.gap, 0);
});

test("a generation fenced during the effect commits nothing", async () => {
  let fenceNow;
  const { f } = feed({ effect: () => fenceNow() });
  fenceNow = () => f.fence();
  assert.deepEqual(await f.process(E(), f.generation, 0), { kind: "IGNORED", failure: "SCOPE_FENCED" });
  assert.equal(f.table.lastApplied, 0n);
});

test("the mapper runs after the sequence table and before the effect; its failure is fatal and commits nothing", async () => {
  const { f, calls } = feed();
  await f.process(E({ sequence: "1" }), f.generation, 0);
  await f.process(E({ sequence: "1" }), f.generation, 0); // duplicate: no mapper
  await f.process(E({ sequence: "3" }), f.generation, 0); // gap: no mapper
  assert.deepEqual(calls, ["map 1", "effect 1"]);
  const g = feed({ map: () => { throw new Error("contract"); } }).f;
  assert.deepEqual(await g.process(E(), g.generation, 0), { kind: "FATAL", failure: "MAPPING_CONTRACT_VIOLATION" });
  assert.equal(g.table.lastApplied, 0n);
});

test("duplicates and stale events are ignored; gaps and conflicts resync", async () => {
  const { f } = feed();
  for (const s of ["1", "2"]) await f.process(E({ sequence: s }), f.generation, 0);
  assert.equal((await f.process(E({ sequence: "2" }), f.generation, 0)).failure, "DUPLICATE_EVENT");
  assert.equal((await f.process(E({ sequence: "1", eventId: "x" }), f.generation, 0)).failure, "EVENT_CONFLICT");
  const { f: g } = feed();
  await g.process(E({ sequence: "1" }), g.generation, 0);
  assert.deepEqual(await g.process(E({ sequence: "5" }), g.generation, 0), { kind: "RESYNC", failure: "SEQUENCE_GAP" });
  assert.equal((await g.process(E({ sequence: "2" }), g.generation, 0)).kind, "IGNORED", "nothing applies while resyncing");
  const { f: h } = feed();
  await h.process(E({ sequence: "1" }), h.generation, 0);
  assert.equal((await h.process(E({ sequence: "1", payload: { n: 9 } }), h.generation, 0)).failure, "EVENT_CONFLICT");
});

test("the apply queue runs one item at a time and refuses past its ceilings", async () => {
  const order = [];
  let release;
  const gate = new Promise((r) => { release = r; });
  const q = new SerialQueue(async (i) => {
    order.push(`start ${i}`);
    if (i === 0) await gate;
    order.push(`end ${i}`);
  }, { maxEvents: 3, maxBytes: 100 });
  assert.equal(q.push(0, 10), true);
  assert.equal(q.push(1, 10), true);
  assert.equal(q.push(2, 10), true);
  assert.equal(q.push(3, 10), false, "the item in flight counts");
  assert.equal(new SerialQueue(() => {}, { maxBytes: 100 }).push(0, 101), false);
  release();
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(order, ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
  assert.equal(q.highWater, 3);
  assert.equal(new SerialQueue(() => {}, { maxEvents: 1e6 }).maxEvents, 256, "lowered, never raised");
});
