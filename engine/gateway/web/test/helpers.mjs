// Shared makers for the client's tests.

/** A valid REALTIME_EVENT_V1 envelope object, fields overridable. */
export function env(over = {}) {
  const seq = over.sequence ?? "1";
  return {
    protocol: "REALTIME_EVENT_V1", streamId: "demo", streamEpoch: "e1", eventType: "demo.tick", eventId: `ev-${seq}`,
    sequence: seq, occurredAt: "2026-01-02T03:04:05.123Z", scopeBinding: "scope-1", payload: { n: Number(seq) },
    recoveryMode: "CURSOR", resumeCursor: `c1.${seq}`, ...over,
  };
}

/** A snapshot answer object. */
export function snap(last = "0", over = {}) {
  return {
    streamId: "demo", scopeBinding: "scope-1", state: { rows: [] },
    checkpoint: { streamEpoch: "e1", lastAppliedSequence: last, snapshotRevision: `r${last}`, recoveryMode: "CURSOR",
      resumeCursor: `c1.${last}` },
    ...over,
  };
}

export const bytes = (s) => new TextEncoder().encode(s);

/** A virtual clock with timers, run by hand. */
export function virtualTime(start = 1_000_000) {
  let now = start;
  let serial = 0;
  const timers = new Map();
  return {
    now: () => now,
    setTimeout: (f, ms) => {
      const id = ++serial;
      timers.set(id, { at: now + Math.max(0, ms), f });
      return id;
    },
    clearTimeout: (id) => timers.delete(id),
    /** Runs timers due within `ms`, in order, letting promises settle between them. */
    async advance(ms) {
      const until = now + ms;
      for (;;) {
        await settle();
        let next = null;
        for (const [id, t] of timers) if (t.at <= until && (next === null || t.at < next[1].at)) next = [id, t];
        if (next === null) break;
        timers.delete(next[0]);
        now = next[1].at;
        next[1].f();
      }
      now = until;
      await settle();
    },
    pending: () => timers.size,
  };
}

export async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/** A fetch Response-like answer. */
export function answer(status, { body = "", headers = {} } = {}) {
  return new Response(status === 204 || status === 304 ? null : body, { status, headers });
}
