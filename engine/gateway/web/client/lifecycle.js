// Page lifecycle and network for the window runtime (seed §5.4): a
// hidden page stops polling at once and closes its live connections after
// a grace period; visible again, or restored from the back/forward cache,
// it reconnects from a new snapshot (a document that comes back does not
// trust what it held); `offline` aborts every attempt and timer until
// `online`, which reconnects after a jitter rather than all at once.
// `pagehide` closes everything the document owns.

/** Installs the listeners for client `rt`; returns the function that removes them. */
export function listen(rt) {
  const { document: doc, window: win } = rt.env;
  const on = [];
  const add = (target, type, fn) => {
    if (!target?.addEventListener) return;
    target.addEventListener(type, fn);
    on.push(() => target.removeEventListener(type, fn));
  };
  add(doc, "visibilitychange", () => (rt.hidden() ? onHidden(rt) : resume(rt, "hidden")));
  add(win, "offline", () => pause(rt, "offline", "offline"));
  add(win, "online", () => online(rt));
  add(win, "pagehide", () => pause(rt, "pagehide", "paused"));
  add(win, "pageshow", (e) => e.persisted && resume(rt, "pagehide"));
  return () => on.forEach((f) => f());
}

function onHidden(rt) {
  for (const sub of rt.subs) {
    if (sub.lease && !sub.paused) {
      sub.paused = "hidden";
      sub.lease.stop("ABORTED");
      rt.env.clearTimeout(sub.leaseTimer);
      rt.emit(sub, "paused", {});
    }
  }
  for (const ch of rt.channels()) {
    rt.env.clearTimeout(ch.hiddenTimer);
    ch.hiddenTimer = rt.env.setTimeout(() => rt.hidden() && pauseChannel(rt, ch, "hidden", "paused"), rt.hiddenGraceMs);
  }
}

/** Closes every connection and timer for `why` (offline, pagehide). */
function pause(rt, why, state) {
  for (const sub of rt.subs) {
    if (sub.lease) {
      sub.paused = why;
      sub.lease.stop("ABORTED");
      rt.env.clearTimeout(sub.leaseTimer);
      rt.emit(sub, state, {});
    }
  }
  for (const ch of rt.channels()) pauseChannel(rt, ch, why, state);
}

/** Closes channel `ch` for `why`; a refused channel stays as it is. */
function pauseChannel(rt, ch, why, state) {
  if (ch.stopped) return;
  const env = rt.env;
  env.clearTimeout(ch.timer);
  env.clearTimeout(ch.hiddenTimer);
  ch.timer = null;
  ch.paused = why;
  ch.abort?.abort();
  // A document that comes back does not trust what it held (seed §5.4).
  if (why !== "offline") for (const sub of ch.subs) sub.needSnapshot = true;
  rt.state(ch, state, {});
}

/** Visible again, or restored from the back/forward cache: a new generation from a snapshot. */
function resume(rt, why) {
  for (const ch of rt.channels()) {
    rt.env.clearTimeout(ch.hiddenTimer);
    if (ch.paused === why || (why === "pagehide" && ch.paused)) {
      for (const sub of ch.subs) sub.needSnapshot = true;
      rt.connect(ch);
    }
  }
  for (const sub of rt.subs) {
    if (sub.lease && (sub.paused === why || (why === "pagehide" && sub.paused)) && !rt.hidden()) rt.startPoll(sub);
  }
}

/** Online hint: after a jitter, one bounded check (not a flood). */
function online(rt) {
  const env = rt.env;
  for (const ch of rt.channels()) {
    // Refused (FORBIDDEN, ...) stays refused; a hidden or closed page waits for its own event.
    if (ch.running || ch.stopped || ch.paused === "hidden" || ch.paused === "pagehide") continue;
    ch.backoff.reset();
    env.clearTimeout(ch.timer);
    ch.timer = env.setTimeout(() => rt.connect(ch), Math.floor(env.random() * 1000));
  }
  for (const sub of rt.subs) {
    if (sub.lease && sub.paused === "offline") {
      if (rt.hidden()) sub.paused = "hidden"; // visible again starts it
      else rt.startPoll(sub);
    }
  }
}
