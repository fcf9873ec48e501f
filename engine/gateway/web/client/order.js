// One logical subscription's ordering state (SPEC RT-5, RT-13): the
// epoch, the last applied sequence, the cursor and a bounded dedupe
// window, judged by the duplicate / gap / conflict table of seed §4.4.
// The same machine as the Rust client's `Subscription`
// (engine/realtime/src/client/subscription.rs), so both clients agree.
//
// Pure: time comes in as `now` (milliseconds). Sequences are BigInts.
// It holds ids, sequences and payload digests, never payloads.

/** SPEC RT-13: 2,048 ids or 10 minutes per stream, whichever first. */
export const DEDUPE_CEILING = Object.freeze({ maxIds: 2048, maxAgeMs: 600_000 });

/** The verdicts of the RT-5 table. */
export const Verdict = Object.freeze({
  APPLY: "APPLY", // lastApplied + 1: apply, then commit
  DUPLICATE: "DUPLICATE", // same id, sequence and payload: ignore
  CONFLICT: "CONFLICT", // same id other event, or same sequence other id: close + resync
  STALE: "STALE", // sequence <= lastApplied: drop
  GAP: "GAP", // sequence > lastApplied + 1: stop, resync
  UNKNOWN_EPOCH: "UNKNOWN_EPOCH", // another epoch: snapshot, never mix epochs
  RESYNCING: "RESYNCING", // stopped earlier: dropped unjudged until a reset
});

/** The failure kind (SPEC RT-14) each verdict is observed as. */
export const VERDICT_FAILURE = Object.freeze({
  DUPLICATE: "DUPLICATE_EVENT", CONFLICT: "EVENT_CONFLICT", STALE: "STALE_EVENT", GAP: "SEQUENCE_GAP",
  UNKNOWN_EPOCH: "SEQUENCE_GAP", RESYNCING: "SEQUENCE_GAP",
});

/** A stable 53-bit digest of a string (cyrb53): payloads compare by it, never stored. */
export function digest(s) {
  let h1 = 0xdeadbeef, h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** Committed events of one epoch, oldest first: id -> sequence, sequence -> {id, digest, at}. */
class DedupeWindow {
  constructor(config) {
    this.config = config;
    this.bySeq = new Map(); // insertion order is commit order
    this.byId = new Map();
  }
  get size() {
    return this.bySeq.size;
  }
  expire(now) {
    let n = 0;
    for (const [seq, e] of this.bySeq) {
      if (now - e.at <= this.config.maxAgeMs) break;
      this.forget(seq, e.id);
      n++;
    }
    return n;
  }
  insert(id, seq, dig, at) {
    let evicted = 0;
    while (this.bySeq.size >= this.config.maxIds) {
      const [s, e] = this.bySeq.entries().next().value;
      this.forget(s, e.id);
      evicted++;
    }
    this.bySeq.set(seq, { id, digest: dig, at });
    this.byId.set(id, seq);
    return evicted;
  }
  forget(seq, id) {
    this.bySeq.delete(seq);
    this.byId.delete(id);
  }
  clear() {
    this.bySeq.clear();
    this.byId.clear();
  }
}

/**
 * The RT-5 table over one subscription. Order of use: `observe` every
 * decoded event; on APPLY run the effect and only then `commit` (SPEC
 * RT-4: the last applied sequence and the cursor advance strictly after
 * the effect); if the effect fails, do not commit.
 *
 * A full or aged dedupe window forgets its oldest ids: memory, never
 * events. A forgotten event arriving again has sequence <= lastApplied and
 * is STALE, so it is still never applied twice.
 */
export class SequenceTable {
  /** @param {{maxIds?:number,maxAgeMs?:number}} [dedupe] lowered from DEDUPE_CEILING */
  constructor(dedupe = {}) {
    const maxIds = Math.min(DEDUPE_CEILING.maxIds, dedupe.maxIds ?? DEDUPE_CEILING.maxIds);
    const maxAgeMs = Math.min(DEDUPE_CEILING.maxAgeMs, dedupe.maxAgeMs ?? DEDUPE_CEILING.maxAgeMs);
    if (!(maxIds >= 1 && maxAgeMs >= 1)) throw new RangeError("dedupe bounds must be positive");
    this.window = new DedupeWindow({ maxIds, maxAgeMs });
    this.epoch = null;
    this.lastApplied = 0n;
    this.cursor = null;
    this.pending = null;
    this.stopped = null; // "GAP" (a same-position resume heals it) | "SNAPSHOT"
    this.adoptFirst = false;
    this.stats = { apply: 0, commits: 0, duplicate: 0, conflict: 0, stale: 0, gap: 0, unknownEpoch: 0, resyncing: 0,
      resets: 0, dedupeEvicted: 0, dedupeExpired: 0 };
  }

  /** Whether the table stopped and waits for a resync. */
  get resyncing() {
    return this.stopped !== null;
  }

  /**
   * Judges `ev` = {epoch, eventId, seq (BigInt), digest, cursor} by the RT-5
   * table. Advances nothing: an APPLY waits for `commit`.
   */
  observe(ev, now) {
    this.pending = null;
    this.stats.dedupeExpired += this.window.expire(now);
    const verdict = this.judge(ev);
    const key = { APPLY: "apply", DUPLICATE: "duplicate", CONFLICT: "conflict", STALE: "stale", GAP: "gap",
      UNKNOWN_EPOCH: "unknownEpoch", RESYNCING: "resyncing" }[verdict];
    this.stats[key]++;
    if (verdict === Verdict.APPLY) this.pending = { ...ev, at: now };
    else if (verdict === Verdict.GAP) this.stopped = "GAP";
    else if (verdict === Verdict.CONFLICT || verdict === Verdict.UNKNOWN_EPOCH) this.stopped = "SNAPSHOT";
    return verdict;
  }

  judge(ev) {
    if (this.stopped !== null) return Verdict.RESYNCING;
    if (this.epoch !== ev.epoch) {
      // An empty stream (a snapshot with no checkpoint) has no events to
      // mix with: its first event names the epoch.
      if (!(this.adoptFirst && this.lastApplied === 0n && ev.seq === 1n)) return Verdict.UNKNOWN_EPOCH;
    }
    const known = this.window.byId.get(ev.eventId);
    if (known !== undefined) {
      const e = this.window.bySeq.get(known);
      return known === ev.seq && e.digest === ev.digest ? Verdict.DUPLICATE : Verdict.CONFLICT;
    }
    if (this.window.bySeq.has(ev.seq)) return Verdict.CONFLICT; // same sequence, another id
    const next = this.lastApplied + 1n;
    if (ev.seq === next) return Verdict.APPLY;
    return ev.seq > next ? Verdict.GAP : Verdict.STALE;
  }

  /**
   * Records that the event just judged APPLY had its effect: advances the
   * last applied sequence and the cursor and remembers the id. Returns
   * false (and changes nothing) for anything else.
   */
  commit(seq, cursor) {
    const p = this.pending;
    if (p === null || p.seq !== seq || p.cursor !== cursor) return false;
    this.pending = null;
    this.epoch = p.epoch;
    this.adoptFirst = false;
    this.lastApplied = p.seq;
    this.cursor = p.cursor;
    this.stats.dedupeEvicted += this.window.insert(p.eventId, p.seq, p.digest, p.at);
    this.stats.commits++;
    return true;
  }

  /**
   * Adopts an authoritative position (a snapshot's checkpoint, SPEC RT-6).
   * `epoch` null: the stream had no event yet, so its first event (sequence
   * 1) names the epoch. Clears the stop and, unless the position is the one
   * already held, the dedupe window (seed §4.4).
   */
  reset(epoch, last, cursor) {
    if (!(this.epoch === epoch && this.lastApplied === last)) this.window.clear();
    this.epoch = epoch;
    this.adoptFirst = epoch === null;
    this.lastApplied = last;
    this.cursor = cursor;
    this.pending = null;
    this.stopped = null;
    this.stats.resets++;
  }

  /**
   * Checks a SUBSCRIBED answer (SPEC RT-9): with no epoch yet (or an empty
   * stream) the server's position is adopted; otherwise the epoch must match
   * and `next` must be lastApplied + 1 (no silent advance or rewind), which
   * also heals a stop after a gap. Returns null when accepted, else why not
   * ("EPOCH_CHANGED" | "POSITION_MISMATCH" | "INVALID_NEXT" | "SNAPSHOT_REQUIRED"),
   * and then the table stops until `reset`.
   */
  acceptSubscribed(epoch, acceptedCursor, next) {
    this.pending = null;
    const why = this.checkSubscribed(epoch, next);
    if (why === "ADOPT") {
      this.reset(epoch, next - 1n, acceptedCursor);
      return null;
    }
    if (why === null) {
      this.stopped = null;
      if (acceptedCursor !== null) this.cursor = acceptedCursor; // a rotated cursor of the same position
      return null;
    }
    this.stopped = "SNAPSHOT";
    return why;
  }

  checkSubscribed(epoch, next) {
    if (next < 1n) return "INVALID_NEXT";
    if (this.epoch === null) return this.adoptFirst && next !== 1n && this.lastApplied === 0n ? "POSITION_MISMATCH" : "ADOPT";
    if (this.epoch !== epoch) return "EPOCH_CHANGED";
    if (this.stopped === "SNAPSHOT") return "SNAPSHOT_REQUIRED";
    return next - 1n === this.lastApplied ? null : "POSITION_MISMATCH";
  }
}
