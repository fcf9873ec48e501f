// The bounded SSE parser (SPEC RT-8, RT-13).
import { test } from "node:test";
import assert from "node:assert/strict";
import { SseParser, SSE_MAX_BUFFER } from "../client/event-stream.js";
import { sseEnvelope } from "../client/live.js";
import { env, bytes } from "./helpers.mjs";

const all = (p, ...chunks) => chunks.flatMap((c) => p.push(bytes(c)));

test("line ends, BOM, comments, multi-line data, own ids and retry", () => {
  const p = new SseParser();
  const out = all(p, "\ufeffretry: 2000\n\n: heartbeat\r\n\r\nid: c1\r", "\ndata: a\rdata: b\n\nevent: control\ndata: {}\n", "\n");
  assert.deepEqual(out, [
    { type: "retry", ms: 2000 },
    { type: "comment" },
    { type: "event", event: "", data: "a\nb", id: "c1" },
    { type: "event", event: "control", data: "{}", id: null },
  ]);
  assert.deepEqual(all(p, "retry: 5s\n\nid: a\0b\ndata: x\n\n"), [{ type: "event", event: "", data: "x", id: null }],
    "a bad retry is ignored; an id with NUL is never a cursor");
});

test("an incomplete block at the end is dropped; a split UTF-8 character is joined", () => {
  const p = new SseParser();
  const e = bytes("data: é\n\n");
  assert.deepEqual([...p.push(e.slice(0, 7)), ...p.push(e.slice(7))], [{ type: "event", event: "", data: "é", id: null }]);
  assert.deepEqual(all(p, "data: half"), []);
  p.end();
  assert.deepEqual(all(p, "\n\n"), []);
});

test("invalid UTF-8 is refused, and the incomplete buffer is capped", () => {
  assert.throws(() => new SseParser().push(new Uint8Array([0x64, 0x61, 0xff, 0x0a])), (e) => e.failure === "MALFORMED_EVENT");
  const p = new SseParser();
  assert.throws(() => p.push(bytes("data: " + "x".repeat(SSE_MAX_BUFFER))), (e) => e.failure === "EVENT_TOO_LARGE");
  const q = new SseParser();
  const line = "data: " + "x".repeat(60 * 1024) + "\n";
  assert.throws(() => { q.push(bytes(line)); q.push(bytes(line)); q.push(bytes(line)); }, (e) => e.failure === "EVENT_TOO_LARGE");
});

test("a CURSOR block must carry its own id equal to the envelope's cursor", () => {
  const data = JSON.stringify(env());
  assert.equal(sseEnvelope({ data, id: "c1.1" }).ok, true);
  assert.equal(sseEnvelope({ data, id: null }).failure, "PROTOCOL_MISMATCH");
  assert.equal(sseEnvelope({ data, id: "c1.0" }).failure, "PROTOCOL_MISMATCH");
  const plain = JSON.stringify(env({ recoveryMode: "SNAPSHOT_ONLY", resumeCursor: null }));
  assert.equal(sseEnvelope({ data: plain, id: null }).ok, true);
  assert.equal(sseEnvelope({ data: plain, id: "x" }).failure, "PROTOCOL_MISMATCH");
  assert.equal(sseEnvelope({ data: "x".repeat(70_000), id: null }).failure, "EVENT_TOO_LARGE");
});
