// Authoritative recovery (SPEC RT-6, seed §4.4): GET a stream's snapshot,
// check it (a bounded body, the JSON ceilings of a snapshot, exact keys,
// the checkpoint's recovery mode and cursor), run the subscriber's
// snapshot effect, and only then adopt its scope binding and checkpoint.
// Also the conditional request of a poll lease (If-None-Match -> 304).

import { decodeJson, SNAPSHOT_CEILINGS } from "./json.js";
import { snapshot as snapshotSchema } from "./schema.js";
import { retryAfterMs, statusFailure } from "./backoff.js";

/**
 * Takes a snapshot for `sub` of client `rt`; resolves to null when it was
 * applied (or unchanged, with `etag`), else to the failure kind. The answer's
 * status, ETag and Retry-After are left in `sub.lastAnswer` for a poll lease.
 */
export async function takeSnapshot(rt, sub, signal, etag = null) {
  rt.count("snapshots");
  const headers = { Accept: "application/json", ...rt.credentials() };
  if (etag !== null) headers["If-None-Match"] = etag;
  let r;
  try {
    r = await rt.env.fetch(rt.url(`/v1/streams/${encodeURIComponent(sub.stream)}/snapshot`), {
      headers, signal, credentials: "same-origin", redirect: "error", cache: "no-store", referrerPolicy: "no-referrer",
    });
  } catch {
    return signal?.aborted ? "ABORTED" : "OFFLINE";
  }
  sub.lastAnswer = { status: r.status, etag: r.headers.get("ETag"), hint: retryAfterMs(r.headers.get("Retry-After")) };
  if (r.status === 304 && etag !== null) return null;
  if (r.status !== 200) {
    r.body?.cancel().catch(() => {});
    return statusFailure(r.status, sub.lastAnswer.hint !== null);
  }
  let bytes;
  try {
    bytes = await readCapped(r, SNAPSHOT_CEILINGS.maxBytes);
  } catch {
    return signal?.aborted ? "ABORTED" : "OFFLINE";
  }
  if (bytes === null) return "EVENT_TOO_LARGE";
  const j = decodeJson(bytes, SNAPSHOT_CEILINGS);
  const s = j.ok ? snapshotSchema(j.value, sub.stream) : j;
  if (!s.ok) return s.failure;
  if (sub.closed) return "ABORTED";
  const sequence = s.value.checkpoint === null ? "0" : s.value.checkpoint.lastAppliedSequence;
  try {
    await sub.handlers.onSnapshot?.(s.value.state, { streamId: sub.stream, sequence });
  } catch {
    return "APPLY_FAILED";
  }
  sub.feed.adopt(s.value.scopeBinding, s.value.checkpoint);
  sub.needSnapshot = false;
  return null;
}

/** Reads at most `max` bytes of a response body; null past that. */
async function readCapped(r, max) {
  const declared = Number(r.headers.get("Content-Length"));
  if (declared > max) {
    r.body?.cancel().catch(() => {});
    return null;
  }
  const reader = r.body.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      reader.cancel().catch(() => {});
      return null;
    }
    parts.push(value);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
