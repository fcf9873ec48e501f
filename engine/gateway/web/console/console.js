// The operator console of the admin port (`GET /console`): live sessions,
// resources, handovers in progress and the human-decision panel (SPEC
// HO-3c), all from the admin port's own `/v1` JSON, polled (decisions
// every 500 ms, the rest every second). Decisions go through
// `POST /v1/decisions/{id}`, as `dtp ctl decide` does.
//
// What a decision shows is a closed list of fields (source and target
// Fay, resource, access mode, reason, time left, what happens if nobody
// decides); anything else the server might send is never rendered, so a
// signature, key id or credential never reaches the page. Text is set
// with textContent only. The admin token, when the port has one, is asked
// for once and kept in this tab's sessionStorage.

const DECISIONS_MS = 500;
const LISTS_MS = 1000;
const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("dtp-admin-token"), deadlines: new Map() };
// For tests and curious operators: counters and when each decision appeared.
const seen = (window.__console = { polls: 0, failures: 0, decisions: {}, decided: [] });

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  let json = null;
  try { json = await r.json(); } catch { /* reported below */ }
  if (r.status === 401) {
    state.token = null;
    sessionStorage.removeItem("dtp-admin-token");
    $("login").hidden = false;
    throw new Error("this admin port needs its token");
  }
  if (!r.ok) throw new Error(json?.message ?? `HTTP ${r.status}`);
  return json;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

const ago = (ms) => (typeof ms === "number" ? `${Math.max(0, Math.round((Date.now() - ms) / 1000))}s ago` : "-");
const left = (ms) => (ms > Date.now() ? `${Math.ceil((ms - Date.now()) / 1000)}s` : "due");
const text = (v) => (v === null || v === undefined ? "-" : typeof v === "boolean" ? (v ? "yes" : "no") : String(v));

function table(id, headers, rows, empty) {
  const t = $(id);
  t.replaceChildren();
  if (rows.length === 0) {
    const tr = el("tr");
    tr.append(el("td", empty, "empty"));
    t.append(tr);
    return;
  }
  const head = el("tr");
  for (const h of headers) head.append(el("th", h));
  t.append(head);
  for (const row of rows) {
    const tr = el("tr");
    for (const [v, cls] of row) tr.append(el("td", v, cls));
    t.append(tr);
  }
}

function lists([sessions, resources, handovers]) {
  table("sessions", ["Session", "Holder", "Resource", "Mode", "State", "Connection", "Last beat"],
    (sessions.sessions ?? []).map((s) => [[s.session_id, "id"], [s.fay_id], [s.resource_id], [s.access_mode], [s.state],
      [s.conn ? "up" : `down ${ago(s.conn_down_since)}`], [ago(s.last_heartbeat_at)]]),
    "no sessions");
  table("resources", ["Resource", "Available", "Policy", "Controllers", "Occupants", "Handover", "Queued"],
    (resources.resources ?? []).map((r) => [[r.resource_id], [text(r.available)], [r.handover_policy],
      [(r.controllers ?? []).join(", ") || "-", "id"], [(r.occupancy ?? []).length], [r.handover?.handover_id ?? "-", "id"], [text(r.queued)]]),
    "no resources");
  table("handovers", ["Handover", "Resource", "Source session", "Target", "Trigger", "Policy", "Time left"],
    (handovers.handovers ?? []).map((h) => [[h.handover_id, "id"], [h.resource_id], [h.source_session_id, "id"], [h.target_fay_id],
      [text(h.trigger)], [`${text(h.policy)} (${text(h.policy_kind)})`], [typeof h.deadline === "number" ? left(h.deadline) : "-"]]),
    "no handovers in progress");
}

async function decide(id, decision, card) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    const answer = await call("POST", `/v1/decisions/${encodeURIComponent(id)}`, { decision });
    const verdict = answer?.verdict?.decision ?? decision;
    $("decided").textContent = `handover ${id}: ${verdict === "allow" ? "allowed" : verdict === "reject" ? "rejected" : verdict}`;
    seen.decided.push({ id, decision: verdict });
    card.remove();
  } catch (e) {
    $("decided").textContent = `handover ${id}: ${e.message}`;
    for (const b of card.querySelectorAll("button")) b.disabled = false;
  }
}

// One card per pending decision; cards already shown stay as they are (a
// person may be reading one), others come and go.
function decisions(answer) {
  const box = $("decisions");
  const pending = answer.decisions ?? [];
  const ids = new Set(pending.map((d) => d.handover_id));
  for (const card of box.querySelectorAll(".decision")) {
    if (!ids.has(card.dataset.id)) { state.deadlines.delete(card.dataset.id); card.remove(); }
  }
  for (const d of pending) {
    if (box.querySelector(`.decision[data-id="${CSS.escape(d.handover_id)}"]`)) continue;
    seen.decisions[d.handover_id] ??= performance.now();
    const card = el("article", undefined, "decision");
    card.dataset.id = d.handover_id;
    card.append(el("h3", `${d.target_fay_id} asks for ${d.resource_id}`));
    const dl = el("dl");
    for (const [k, v, cls] of [["From (holds it now)", d.source_fay_id], ["To (asks for it)", d.target_fay_id],
      ["Resource", d.resource_id], ["Access", d.access_mode], ["Reason", d.reason],
      ["Time left", left(d.deadline_ms), "left"], ["If nobody decides", d.default_action]]) {
      dl.append(el("dt", k), el("dd", text(v), cls));
    }
    card.append(dl);
    const buttons = el("div", undefined, "buttons");
    const reject = el("button", "Reject (recommended)", "reject");
    const allow = el("button", "Allow", "allow");
    reject.type = allow.type = "button";
    reject.addEventListener("click", () => decide(d.handover_id, "reject", card));
    allow.addEventListener("click", () => decide(d.handover_id, "allow", card));
    buttons.append(reject, allow, el("span", `handover ${d.handover_id}`, "hint"));
    card.append(buttons);
    box.append(card);
    state.deadlines.set(d.handover_id, d.deadline_ms);
  }
  const empty = box.querySelector(".empty");
  if (pending.length === 0 && !empty) box.append(el("p", "no decisions pending", "empty"));
  if (pending.length > 0 && empty) empty.remove();
}

function tick() {
  for (const card of document.querySelectorAll(".decision")) {
    const dd = card.querySelector("dd.left");
    if (dd) dd.textContent = left(state.deadlines.get(card.dataset.id));
  }
}

function status(ok, message) {
  const s = $("status");
  s.textContent = ok ? `live · updated ${new Date().toLocaleTimeString()}` : message;
  s.className = ok ? "" : "down";
}

// Polls `paths` every `ms`, one round in flight at a time.
function poll(ms, paths, render) {
  const round = async () => {
    if (!$("login").hidden) return setTimeout(round, ms);
    try {
      render(await Promise.all(paths.map((p) => call("GET", p))));
      seen.polls++;
      status(true);
    } catch (e) {
      seen.failures++;
      status(false, e.message);
    }
    setTimeout(round, ms);
  };
  round();
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("dtp-admin-token", state.token);
  $("token").value = "";
  $("login").hidden = true;
});
poll(DECISIONS_MS, ["/v1/decisions"], ([d]) => decisions(d));
poll(LISTS_MS, ["/v1/sessions", "/v1/resources", "/v1/handovers"], lists);
setInterval(tick, 250);
