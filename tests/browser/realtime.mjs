// Drives the realtime demo page of `dtp serve` in Debian's headless
// chromium (SPEC RT-5, RT-7, RT-8, RT-9): both feeds (EventSource and
// WebSocket `realtime.v1`) must apply every published event in order, resume
// without a gap after the server ends every subscription (kick), and resync
// from a snapshot on RESET_REQUIRED (kick + publish + cut: expired cursors).
//
// Usage: node realtime.mjs http://127.0.0.1:PORT/v1
// Prints one JSON summary line; exits 0 only if every check passed.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const WAIT_MS = 20000; // hard deadline of every wait
const N = 10; // live events
const K = 10; // events published while both feeds reconnect after a kick
const P = 5; // events published between kick and cut (expired for the page)
const Q = 5; // events after the resync
const started = Date.now();
const origin = new URL(process.argv[2] ?? "").origin;
const AUTH = { Authorization: "Bearer dtp-demo-token" };
const checks = [];
const pageErrors = [];
const sseRequests = []; // {url, lastEventId}
const wsTypes = [];
const headerReads = []; // pending reads of the SSE requests' headers // types of the realtime.v1 messages the browser received

function check(name, ok, detail) {
  checks.push({ name, ok: Boolean(ok), detail });
  if (!ok) console.error(`FAIL ${name}: ${JSON.stringify(detail)}`);
  return Boolean(ok);
}
const range = (from, to) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let resetAttempts = 0;
let head = 0; // the stream's last published sequence
async function publish(count) {
  for (let i = 0; i < count; i++) {
    const r = await fetch(`${origin}/v1/streams/demo/events`, {
      method: "POST",
      headers: { ...AUTH, "Content-Type": "application/json" },
      body: JSON.stringify({ eventType: "demo.tick", payload: { n: head + 1 } }),
    });
    const body = await r.text();
    let seq = NaN;
    try { seq = Number(JSON.parse(body).sequence); } catch { /* reported below */ }
    if (r.status !== 201 || seq !== head + 1) {
      check("publish answers 201 with the next sequence", false, { status: r.status, body, expected: head + 1 });
      throw new Error("publish failed");
    }
    head = seq;
  }
}
async function admin(action) {
  const r = await fetch(`${origin}/v1/streams/demo/${action}`, { method: "POST", headers: AUTH });
  const body = await r.text();
  check(`${action} answers 200`, r.status === 200, { status: r.status, body });
}
async function snapshotHead() {
  const r = await fetch(`${origin}/v1/streams/demo/snapshot`, { headers: AUTH });
  const s = await r.json();
  return s.checkpoint === null ? 0 : Number(s.checkpoint.lastAppliedSequence);
}
const state = (page) => page.evaluate(() => window.__dtp ?? null);
// Polls the page until pred(__dtp) holds; records a failed check on timeout.
async function waitFor(page, name, pred, ms = WAIT_MS, quiet = false) {
  const until = Date.now() + ms;
  let d = null;
  for (;;) {
    d = await state(page).catch((e) => ({ evaluateError: String(e) }));
    if (d && !d.evaluateError && pred(d)) return { ok: quiet || check(name, true), d };
    if (Date.now() > until) break;
    await sleep(50);
  }
  if (!quiet) check(name, false, { waitedMs: ms, dtp: d, pageErrors, wsTypes, sseRequests });
  return { ok: false, d };
}
const controls = (feed, type, key, value) => feed.controls.filter((c) => c.type === type && c[key] === value).length;

async function openPage(context) {
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  page.on("request", (r) => {
    if (!r.url().includes("/sse")) return;
    const seen = { url: r.url(), lastEventId: null };
    sseRequests.push(seen);
    headerReads.push(r.allHeaders().then((h) => { seen.lastEventId = h["last-event-id"] ?? null; }, () => {}));
  });
  page.on("websocket", (ws) => ws.on("framereceived", (f) => {
    try { wsTypes.push(JSON.parse(String(f.payload)).type); } catch { wsTypes.push("?"); }
  }));
  await page.goto(`${origin}/`);
  return page;
}
const wsSubscribed = () => wsTypes.filter((t) => t === "SUBSCRIBED").length;
const opened = (d) => d.ready && d.sse.opens >= 1 && d.ws.opens >= 1;

async function run(context) {
  head = await snapshotHead();
  const empty = head === 0;
  let page = await openPage(context);
  // 1. The page starts (on the empty stream of a fresh server, too).
  let r = await waitFor(page, `page ready, both feeds open (stream head ${head})`, opened, empty ? 5000 : WAIT_MS);
  if (!r.ok && empty) {
    // Go on with one event in the stream so the later checks still run.
    await publish(1);
    await page.close();
    page = await openPage(context);
    r = await waitFor(page, "page ready, both feeds open (after one event)", opened);
  }
  if (!r.ok) return;
  const s0 = head;
  check("page starts from the snapshot's sequence", r.d.sse.last === s0 && r.d.ws.last === s0, r.d);
  await waitFor(page, "WebSocket SUBSCRIBED", () => wsSubscribed() >= 1);

  // 2. Live events reach both feeds, in order.
  await publish(N);
  const exact = (to) => (d) => same(d.sse.seqs, range(s0 + 1, to)) && same(d.ws.seqs, range(s0 + 1, to));
  r = await waitFor(page, `both feeds apply ${s0 + 1}..${head}`, exact(head));
  if (!r.ok) return;
  check("no gap while live", r.d.sse.gaps === 0 && r.d.ws.gaps === 0, r.d);

  // 3. The server ends every subscription; both resume without a gap.
  const sseReqs = sseRequests.length;
  await admin("kick");
  await publish(K);
  r = await waitFor(page, `after kick both feeds apply ${s0 + 1}..${head} and reopened`,
    (d) => exact(head)(d) && d.sse.opens >= 2 && d.ws.opens >= 2);
  if (!r.ok) return;
  check("no gap across the kick", r.d.sse.gaps === 0 && r.d.ws.gaps === 0, r.d);
  check("SSE got control CLOSE RESTART", controls(r.d.sse, "CLOSE", "category", "RESTART") === 1, r.d.sse.controls);
  check("WebSocket got CLOSE RESTART", controls(r.d.ws, "CLOSE", "category", "RESTART") === 1, r.d.ws.controls);
  await Promise.all(headerReads);
  const resume = sseRequests.slice(sseReqs);
  check("the EventSource resumed with Last-Event-ID",
    resume.length >= 1 && resume[0].lastEventId !== null && resume[0].lastEventId.startsWith("c1."), resume);

  // 4. Kick, publish while the feeds are away, cut: their cursors expired.
  const before = head;
  let attempts = 0;
  for (; attempts < 3; attempts++) {
    const o = (await state(page)).ws;
    // One event between the feeds' cursors and the cut is enough; the
    // WebSocket comes back within 250 ms, so the cut follows at once.
    await admin("kick");
    await publish(1);
    await admin("cut");
    await publish(P - 1);
    r = await waitFor(page, "", (d) => (d.sse.resets >= 1 && d.ws.resets >= 1) ||
      (d.ws.opens > o.opens && d.ws.resets === o.resets && d.ws.last === head), 8000, true);
    if (r.d?.sse?.resets >= 1 && r.d?.ws?.resets >= 1) break;
    // else the WebSocket resumed before the cut: again
  }
  r.ok = attempts < 3;
  resetAttempts = attempts + 1;
  check("both feeds got RESET_REQUIRED after kick + cut", r.ok, { attempts: resetAttempts, dtp: r.d, wsTypes });
  if (!r.ok) return;
  check("SSE reset names CURSOR_EXPIRED", controls(r.d.sse, "RESET_REQUIRED", "reason", "CURSOR_EXPIRED") >= 1, r.d.sse.controls);
  check("WebSocket reset names CURSOR_EXPIRED", controls(r.d.ws, "RESET_REQUIRED", "reason", "CURSOR_EXPIRED") >= 1, r.d.ws.controls);
  r = await waitFor(page, `both feeds resynced to the snapshot at ${head}`, (d) => d.sse.last === head && d.ws.last === head);
  if (!r.ok) return;
  const resynced = head;
  await publish(Q);
  r = await waitFor(page, `after the resync both feeds apply ${resynced + 1}..${head}`,
    (d) => same(d.sse.seqs.slice(-Q), range(resynced + 1, head)) && same(d.ws.seqs.slice(-Q), range(resynced + 1, head)));
  if (!r.ok) return;
  for (const feed of ["sse", "ws"]) {
    const seqs = r.d[feed].seqs;
    const i = seqs.indexOf(before);
    check(`${feed}: applied 1..${before}, nothing from the cut range twice, then ${resynced + 1}..${head}`,
      i >= 0 && same(seqs.slice(0, i + 1), range(s0 + 1, before)) && seqs.slice(i + 1).every((s, j, a) => s > before && (j === 0 || s > a[j - 1])),
      seqs);
    check(`${feed}: no gap counted across the reset`, r.d[feed].gaps === 0, r.d[feed]);
  }
  const final = r.d;
  await page.close();

  // 5. A new page after the cut starts from the snapshot and follows.
  const subscribed = wsSubscribed();
  const page2 = await openPage(context);
  r = await waitFor(page2, "a new page after the cut is ready at the head",
    (d) => opened(d) && d.sse.last === head && d.ws.last === head);
  if (r.ok) {
    const from = head;
    await waitFor(page2, "new page: WebSocket SUBSCRIBED", () => wsSubscribed() > subscribed);
    await publish(3);
    await waitFor(page2, `new page: both feeds apply ${from + 1}..${head}`,
      (d) => same(d.sse.seqs, range(from + 1, head)) && same(d.ws.seqs, range(from + 1, head)) && d.sse.gaps + d.ws.gaps === 0);
  }
  await page2.close();
  return final;
}

const userDataDir = mkdtempSync(join(tmpdir(), "dtp-chromium-"));
let context = null;
let final = null;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    timeout: WAIT_MS,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  final = await run(context);
} catch (e) {
  check("driver ran to the end", false, { error: String(e?.stack ?? e) });
} finally {
  await context?.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}
check("no page errors", pageErrors.length === 0, pageErrors);
const failed = checks.filter((c) => !c.ok);
const feed = (f) => f && { n: f.seqs.length, first: f.seqs[0], last: f.last, opens: f.opens, resets: f.resets, gaps: f.gaps };
console.log(JSON.stringify({
  ok: failed.length === 0 && checks.length > 0,
  checks: checks.length,
  failed: failed.map((c) => c.name),
  head,
  sse: feed(final?.sse),
  ws: feed(final?.ws),
  resetAttempts,
  sseConnects: sseRequests.length,
  wsMessages: wsTypes.length,
  ms: Date.now() - started,
}));
process.exit(failed.length === 0 && checks.length > 0 ? 0 : 1);
