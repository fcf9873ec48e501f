// The duplicate / gap / conflict table of SPEC RT-5 (seed §4.4).
import { test } from "node:test";
import assert from "node:assert/strict";
import { SequenceTable, Verdict } from "../client/order.js";

const ev = (seq, over = {}) => ({ epoch: "e1", eventId: `id-${seq}`, seq: BigInt(seq), digest: seq, cursor: `c.${seq}`, ...over });

function table(last = 0) {
  const t = new SequenceTable();
  t.reset("e1", BigInt(last), `c.${last}`);
  return t;
}

function apply(t, e, now = 0) {
  assert.equal(t.observe(e, now), Verdict.APPLY);
  assert.equal(t.commit(e.seq, e.cursor), true);
}

test("lastApplied + 1 applies; nothing advances before the commit", () => {
  const t = table(4);
  assert.equal(t.observe(ev(5), 0), Verdict.APPLY);
  assert.equal(t.lastApplied, 4n, "not advanced before the effect");
  assert.equal(t.cursor, "c.4");
  assert.equal(t.commit(5n, "c.other"), false, "a commit must name the judged event");
  assert.equal(t.commit(5n, "c.5"), true);
  assert.equal(t.lastApplied, 5n);
  assert.equal(t.cursor, "c.5");
  assert.equal(t.commit(5n, "c.5"), false, "one commit per judged event");
});

test("an effect that failed is not committed and the event can come again", () => {
  const t = table(0);
  assert.equal(t.observe(ev(1), 0), Verdict.APPLY);
  // no commit: the effect failed
  assert.equal(t.observe(ev(1), 0), Verdict.APPLY);
});

test("seen eventId is a duplicate; the same id with another event is a conflict", () => {
  const t = table(0);
  apply(t, ev(1));
  assert.equal(t.observe(ev(1), 0), Verdict.DUPLICATE);
  assert.equal(t.observe(ev(1, { digest: 99 }), 0), Verdict.CONFLICT, "same id, other payload");
  assert.equal(t.resyncing, true);
  assert.equal(t.observe(ev(2), 0), Verdict.RESYNCING, "nothing applies until a snapshot");
  const u = table(0);
  apply(u, ev(1));
  assert.equal(u.observe(ev(2, { eventId: "id-1" }), 0), Verdict.CONFLICT, "same id, other sequence");
  const w = table(0);
  apply(w, ev(1));
  assert.equal(w.observe(ev(1, { eventId: "other" }), 0), Verdict.CONFLICT, "same sequence, other id");
});

test("older is stale, newer is a gap that stops the table until a resync", () => {
  const t = table(10);
  assert.equal(t.observe(ev(9), 0), Verdict.STALE);
  assert.equal(t.observe(ev(13), 0), Verdict.GAP);
  assert.equal(t.observe(ev(11), 0), Verdict.RESYNCING, "never apply after a gap as if contiguous");
  assert.equal(t.lastApplied, 10n);
  // A same-position resume heals a gap; a snapshot (reset) always does.
  assert.equal(t.acceptSubscribed("e1", "c.10", 11n), null);
  apply(t, ev(11));
  t.observe(ev(20), 0);
  t.reset("e1", 19n, "c.19");
  apply(t, ev(20));
});

test("another epoch is never mixed in; an empty stream adopts its first event's epoch", () => {
  const t = table(3);
  assert.equal(t.observe(ev(4, { epoch: "e2" }), 0), Verdict.UNKNOWN_EPOCH);
  assert.equal(t.acceptSubscribed("e1", null, 4n), "SNAPSHOT_REQUIRED");
  const empty = new SequenceTable();
  empty.reset(null, 0n, null);
  assert.equal(empty.observe(ev(2, { epoch: "e9" }), 0), Verdict.UNKNOWN_EPOCH);
  const fresh = new SequenceTable();
  fresh.reset(null, 0n, null);
  apply(fresh, ev(1, { epoch: "e9" }));
  assert.equal(fresh.epoch, "e9");
});

test("SUBSCRIBED must resume at lastApplied + 1: no silent advance or rewind", () => {
  const t = table(7);
  assert.equal(t.acceptSubscribed("e1", "c.7b", 8n), null);
  assert.equal(t.cursor, "c.7b", "a rotated cursor of the same position");
  assert.equal(table(7).acceptSubscribed("e1", null, 9n), "POSITION_MISMATCH");
  assert.equal(table(7).acceptSubscribed("e1", null, 7n), "POSITION_MISMATCH");
  assert.equal(table(7).acceptSubscribed("e2", null, 8n), "EPOCH_CHANGED");
  assert.equal(table(7).acceptSubscribed("e1", null, 0n), "INVALID_NEXT");
  const blank = new SequenceTable();
  assert.equal(blank.acceptSubscribed("e5", null, 40n), null, "no position yet: the server's");
  assert.equal(blank.lastApplied, 39n);
});

test("the dedupe window is bounded by count and age and forgets memory, never events", () => {
  const t = new SequenceTable({ maxIds: 3, maxAgeMs: 1000 });
  t.reset("e1", 0n, null);
  for (let i = 1; i <= 5; i++) apply(t, ev(i), 0);
  assert.equal(t.window.size, 3);
  assert.equal(t.stats.dedupeEvicted, 2);
  assert.equal(t.observe(ev(1), 0), Verdict.STALE, "a forgotten id is still never applied twice");
  assert.equal(t.observe(ev(5), 0), Verdict.DUPLICATE);
  assert.equal(t.observe(ev(5), 2000), Verdict.STALE, "aged out");
  assert.equal(t.window.size, 0);
  assert.throws(() => new SequenceTable({ maxIds: 0 }));
  assert.equal(new SequenceTable({ maxIds: 1e9 }).window.config.maxIds, 2048, "lowered, never raised");
});
