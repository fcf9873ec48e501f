// The steps of SPEC RT-4 after the schema, for one logical subscription:
// registry lookup -> scope + generation fence -> epoch / sequence / dedupe
// (the RT-5 table) -> mapper -> effect -> commit, strictly after the
// effect. And the bounded sequential queue events wait in (SPEC RT-13:
// 256 events or 4 MiB, the one being applied included).
//
// Pure apart from awaiting the caller's own mapper and effect; time comes
// in as `now`. What it keeps is ids, sequences, digests, the scope token
// in memory (never reported) and counters: never a payload.

import { SequenceTable, Verdict, VERDICT_FAILURE, digest } from "./order.js";

/** SPEC RT-13: the inbound apply queue. */
export const QUEUE_CEILING = Object.freeze({ maxEvents: 256, maxBytes: 4 * 1024 * 1024 });

/**
 * What became of one event:
 * - `{ kind: "APPLIED" }` effect done, sequence (and cursor) committed;
 * - `{ kind: "IGNORED", failure }` DUPLICATE_EVENT / STALE_EVENT / SEQUENCE_GAP
 *   (dropped while resyncing) / SCOPE_FENCED (an old generation's event);
 * - `{ kind: "RESYNC", failure }` stop applying and recover (snapshot):
 *   SEQUENCE_GAP, EVENT_CONFLICT, SCOPE_PROTOCOL_VIOLATION, APPLY_FAILED;
 * - `{ kind: "FATAL", failure }` fail closed: MALFORMED_EVENT (not in the
 *   registry) or MAPPING_CONTRACT_VIOLATION.
 */
const done = (kind, failure) => ({ kind, failure });

/** The default mapper: what a feature sees of an envelope. */
export const defaultMap = (env) => ({ eventType: env.eventType, sequence: env.sequence, payload: env.payload });

/** One subscription's apply pipeline. */
export class Feed {
  /**
   * @param {object} o
   * @param {string} o.streamId the registered stream
   * @param {Iterable<string>|null} [o.eventTypes] the registered event types (null: any valid id)
   * @param {(env:object)=>any} [o.map] the pure boundary mapper; throwing is a contract violation
   * @param {(event:any, ctx:object)=>any} o.effect the feature effect (may return a promise)
   * @param {{maxIds?:number,maxAgeMs?:number}} [o.dedupe]
   */
  constructor(o) {
    this.streamId = o.streamId;
    this.eventTypes = o.eventTypes ? new Set(o.eventTypes) : null;
    this.map = o.map ?? defaultMap;
    this.effect = o.effect;
    this.table = new SequenceTable(o.dedupe);
    this.scope = null;
    this.generation = 0;
  }

  /** A new generation: events of older ones are dropped from now on (SCOPE_FENCED). */
  fence() {
    return ++this.generation;
  }

  /** Adopts a snapshot's scope binding and checkpoint (null: an empty stream). */
  adopt(scope, checkpoint) {
    this.scope = scope;
    if (checkpoint === null) this.table.reset(null, 0n, null);
    else this.table.reset(checkpoint.streamEpoch, checkpoint.last, checkpoint.resumeCursor);
  }

  /**
   * One schema-valid envelope `env` received on generation `gen`, through
   * the rest of the RT-4 order. The effect is awaited; the commit follows
   * it only if it succeeded and the generation is still current.
   */
  async process(env, gen, now) {
    if (env.streamId !== this.streamId || (this.eventTypes !== null && !this.eventTypes.has(env.eventType))) {
      return done("FATAL", "MALFORMED_EVENT");
    }
    if (gen !== this.generation) return done("IGNORED", "SCOPE_FENCED");
    if (this.scope !== null && env.scopeBinding !== this.scope) return done("RESYNC", "SCOPE_PROTOCOL_VIOLATION");
    const ev = { epoch: env.streamEpoch, eventId: env.eventId, seq: env.seq, digest: digest(JSON.stringify(env.payload)),
      cursor: env.resumeCursor };
    const verdict = this.table.observe(ev, now);
    switch (verdict) {
      case Verdict.APPLY:
        break;
      case Verdict.DUPLICATE:
      case Verdict.STALE:
      case Verdict.RESYNCING:
        return done("IGNORED", VERDICT_FAILURE[verdict]);
      default:
        return done("RESYNC", VERDICT_FAILURE[verdict]);
    }
    let event;
    try {
      event = this.map(env);
    } catch {
      this.table.pending = null;
      return done("FATAL", "MAPPING_CONTRACT_VIOLATION");
    }
    try {
      await this.effect(event, { streamId: env.streamId, eventType: env.eventType, sequence: env.sequence });
    } catch {
      this.table.pending = null;
      this.table.stopped = "SNAPSHOT";
      return done("RESYNC", "APPLY_FAILED");
    }
    if (gen !== this.generation) return done("IGNORED", "SCOPE_FENCED");
    this.table.commit(ev.seq, ev.cursor);
    return done("APPLIED", null);
  }
}

/**
 * A bounded sequential queue (SPEC RT-13): items run one at a time through
 * `work`, in order; `push` refuses (returns false) past `maxEvents` or
 * `maxBytes`, the item being worked on included. The caller then fences
 * the generation and recovers (QUEUE_OVERFLOW): never a silent eviction.
 */
export class SerialQueue {
  constructor(work, limits = {}) {
    this.work = work;
    this.maxEvents = Math.min(QUEUE_CEILING.maxEvents, limits.maxEvents ?? QUEUE_CEILING.maxEvents);
    this.maxBytes = Math.min(QUEUE_CEILING.maxBytes, limits.maxBytes ?? QUEUE_CEILING.maxBytes);
    this.items = [];
    this.bytes = 0;
    this.running = false;
    this.highWater = 0;
  }

  /** Queues `item` of `bytes`; false if a ceiling would be passed (nothing queued). */
  push(item, bytes) {
    if (this.items.length + 1 > this.maxEvents || this.bytes + bytes > this.maxBytes) return false;
    this.items.push({ item, bytes });
    this.bytes += bytes;
    this.highWater = Math.max(this.highWater, this.items.length);
    if (!this.running) this.run();
    return true;
  }

  /** Drops everything not yet started (after a fence). */
  clear() {
    const first = this.running ? this.items.slice(0, 1) : [];
    this.items = first;
    this.bytes = first.reduce((n, i) => n + i.bytes, 0);
  }

  async run() {
    this.running = true;
    try {
      while (this.items.length > 0) {
        const { item, bytes } = this.items[0];
        try {
          await this.work(item);
        } catch {
          // `work` reports its own failures; the queue goes on.
        }
        this.items.shift();
        this.bytes -= bytes;
      }
    } finally {
      this.running = false;
    }
  }
}
