// Drives the operator console (`/console` on the admin port of `dtp
// serve`) in Debian's headless chromium (SPEC HO-3c): the token is asked
// for, sessions show, a pending human decision appears with what a person
// must see (and no secret), Reject is the recommended button, and Allow
// goes through /v1/decisions.
//
// Usage: node console.mjs ADMIN_ORIGIN TOKEN SCREENSHOT_PATH
// Prints READY once the page is live, then waits for a line on stdin (the
// test has made a Fay ask for a held resource); prints one JSON line at
// the end.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [origin, token, screenshot] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const out = { ok: false, errors: [] };
const dir = mkdtempSync(join(tmpdir(), "dtp-chromium-"));
const context = await chromium.launchPersistentContext(dir, {
  executablePath: "/usr/bin/chromium", headless: true, timeout: 20000, viewport: { width: 1100, height: 760 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const until = async (what, f, ms = 15000) => {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(20);
  }
};
try {
  const page = await context.newPage();
  page.on("pageerror", (e) => out.errors.push(e.message));
  const answer = await page.goto(`${origin}/console`);
  out.headers = { csp: answer.headers()["content-security-policy"] ?? null, frame: answer.headers()["x-frame-options"] ?? null };
  await until("the token form", () => page.isVisible("#login"));
  out.askedForToken = true;
  await page.fill("#token", token);
  await page.click("#login button");
  out.formHiddenAfter = !(await page.isVisible("#login"));
  await until("sessions listed", async () => (await page.textContent("#sessions")).includes("fay-a"));
  console.log("READY");
  await lines.next();
  const asked = Date.now();
  await until("a pending decision", () => page.isVisible(".decision"), 10000);
  out.appearedMs = Date.now() - asked;
  const card = page.locator(".decision").first();
  out.card = await card.innerText();
  out.fields = await card.locator("dd").allInnerTexts();
  out.buttons = await card.locator("button").allInnerTexts();
  out.handovers = await until("the handover listed", async () => {
    const t = await page.innerText("#handovers");
    return t.includes("arm") && t;
  }, 5000).catch(() => page.innerText("#handovers"));
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  out.html = await page.content();
  await card.locator("button.allow").click();
  await until("the decision recorded", () => page.evaluate(() => window.__console.decided.length === 1));
  out.decided = await page.innerText("#decided");
  await until("fay-b holds the arm", async () => (await page.textContent("#sessions")).includes("fay-b"));
  out.sessions = await page.innerText("#sessions");
  out.stillPending = await page.locator(".decision").count();
  out.ok = out.errors.length === 0;
} catch (e) {
  out.error = String(e?.stack ?? e);
} finally {
  await context.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
process.exit(0);
