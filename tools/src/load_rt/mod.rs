//! `dtp load --realtime sse|ws`: thousands of realtime subscribers on the
//! engine's own client shards, judged by the Rust client runtime, and one
//! publisher at a fixed rate (issue 6 item 9).
//!
//! Every subscriber starts from the same position: one publication before
//! the run gives the stream's epoch, sequence and cursor, and each
//! subscriber resumes from that cursor (SSE `?cursor=`, `realtime.v1`
//! SUBSCRIBE with the cursor), so from its first event on, every event is
//! judged by the RT-5 table (`dtp_realtime::Subscription`): applied in
//! order, or counted as a duplicate, stale, a gap or a conflict. Each
//! event carries its publication time; the publish → apply latency is
//! measured for the events of the measured window. An event of the window
//! that a client not given up on never applied counts as missing.
//!
//! Clients reconnect (SPEC RT-7): when a connection drops or is refused,
//! the client waits a full-jitter delay drawn by `dtp_realtime::Reconnect`
//! and resumes from its last cursor; when its attempt or elapsed budget
//! runs out it is DEGRADED, and after FORBIDDEN or PROTOCOL_MISMATCH it
//! never retries. With `--kick` the run ends every subscription halfway
//! through the window (a reconnect herd) and checks that every client came
//! back and saw every sequence exactly once.

mod herd;
mod publish;
mod sub;
mod tally;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtp_codec::http::{ResponseLimits, parse_closed_response};
use dtp_engine::{Engine, EngineConfig};
use dtp_realtime::ReconnectConfig;
use dtp_transports::DriverConfig;

pub(crate) use sub::Mode;
use sub::{Start, Subs, SubsSpec, Window};
pub(crate) use tally::Tally;

/// The realtime options of `dtp load`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RealtimeCli {
    /// Load the realtime front end instead: `sse` or `ws` subscribers
    /// (--connections of them) on the realtime address (--target), one
    /// publisher at --publish-rate. Reports delivered events, publish →
    /// apply latency, gaps, resets, duplicates and missing events, and
    /// the clients' reconnects (--reconnect-*): attempts, the spread of
    /// the delays drawn, clients degraded and clients refused for good.
    #[arg(long, value_name = "MODE")]
    pub(crate) realtime: Option<String>,
    /// With --realtime: the stream.
    #[arg(long, default_value = "demo", requires = "realtime")]
    pub(crate) stream: String,
    /// With --realtime: the event type published.
    #[arg(long, default_value = "demo.tick", requires = "realtime")]
    pub(crate) event_type: String,
    /// With --realtime: the client token (subscribe and publish).
    #[arg(long, default_value = "dtp-demo-token", requires = "realtime")]
    pub(crate) token: String,
    /// With --realtime: the token the subscribers present instead of
    /// --token (the publisher keeps --token), e.g. one that may not read
    /// the stream: every subscriber is then refused with FORBIDDEN and,
    /// as RT-7 says, never retries.
    #[arg(long, value_name = "TOKEN", requires = "realtime")]
    pub(crate) subscriber_token: Option<String>,
    /// With --realtime: events published per second.
    #[arg(long, default_value_t = 20.0, requires = "realtime")]
    pub(crate) publish_rate: f64,
    /// With --realtime: reconnects a client makes in one outage before it
    /// gives up and counts as DEGRADED (1-10). A client whose connection
    /// drops or is refused waits a full-jitter delay, random(0, min(max,
    /// base x 2^attempt)) and never less than the server's hint (SSE
    /// `retry`, `Retry-After`), then resumes from its last cursor. The
    /// budget starts again once a connection delivers an event. After
    /// FORBIDDEN or PROTOCOL_MISMATCH a client never retries.
    #[arg(long, default_value_t = 10, value_name = "N", requires = "realtime")]
    pub(crate) reconnect_attempts: u32,
    /// With --realtime: seconds from the first failure of an outage after
    /// which a client stops reconnecting (DEGRADED), at most 300; a delay
    /// that would overrun it is not shortened, the client gives up.
    #[arg(
        long,
        default_value_t = 300.0,
        value_name = "SECS",
        requires = "realtime"
    )]
    pub(crate) reconnect_budget: f64,
    /// With --realtime: the first reconnect delay ceiling in milliseconds,
    /// doubled per attempt up to --reconnect-max-delay.
    #[arg(long, default_value_t = 500, value_name = "MS", requires = "realtime")]
    pub(crate) reconnect_base_ms: u64,
    /// With --realtime: the largest reconnect delay in seconds, at most 60.
    #[arg(
        long,
        default_value_t = 60.0,
        value_name = "SECS",
        requires = "realtime"
    )]
    pub(crate) reconnect_max_delay: f64,
    /// With --realtime: halfway through the measured window, end every
    /// subscription of the stream through the operator API (`POST
    /// /v1/streams/ID/kick`; --token needs the admin grant), so that every
    /// client reconnects at once: a reconnect herd. The run fails unless
    /// every client came back and saw every event exactly once.
    #[arg(long, requires = "realtime")]
    pub(crate) kick: bool,
}

impl RealtimeCli {
    /// The reconnect policy the options ask for, checked against the
    /// RT-13 ceilings.
    pub(crate) fn policy(&self) -> Result<ReconnectConfig, String> {
        let secs = |name: &str, v: f64, max: f64| {
            if v.is_finite() && v > 0.0 && v <= max {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(format!("--{name} must be in (0, {max}] seconds"))
            }
        };
        let p = ReconnectConfig {
            base: Duration::from_millis(self.reconnect_base_ms),
            max_delay: secs("reconnect-max-delay", self.reconnect_max_delay, 60.0)?,
            max_attempts: self.reconnect_attempts,
            max_elapsed: secs("reconnect-budget", self.reconnect_budget, 300.0)?,
            ..ReconnectConfig::default()
        };
        if !(1..=10).contains(&p.max_attempts) {
            return Err("--reconnect-attempts must be 1-10".into());
        }
        if p.base.is_zero() || p.base > p.max_delay {
            return Err(
                "--reconnect-base-ms must be at least 1 and at most --reconnect-max-delay".into(),
            );
        }
        p.validate().map_err(|e| e.to_string())?;
        Ok(p)
    }
}

/// One realtime load run.
#[derive(Clone, Debug)]
pub(crate) struct RtSpec {
    pub(crate) target: SocketAddr,
    /// Where the publisher publishes; `None`: `target`. Another gateway of
    /// `target`'s cluster (the stream's ledger shared through JetStream).
    pub(crate) publish_to: Option<SocketAddr>,
    pub(crate) mode: Mode,
    pub(crate) subscribers: usize,
    pub(crate) stream: String,
    pub(crate) event_type: String,
    pub(crate) token: String,
    /// The subscribers' token; `None`: `token`.
    pub(crate) subscriber_token: Option<String>,
    /// The stream's scope binding; `None`: read from its snapshot.
    pub(crate) scope: Option<String>,
    pub(crate) rate: f64,
    pub(crate) payload: usize,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    pub(crate) shards: usize,
    pub(crate) driver: DriverConfig,
    /// Every client's reconnect policy (SPEC RT-7).
    pub(crate) policy: ReconnectConfig,
    /// End every subscription halfway through the window (a herd).
    pub(crate) kick: bool,
}

/// What a realtime load run measured.
#[derive(Debug)]
pub(crate) struct RtResult {
    pub(crate) tally: Tally,
    /// Events published in the measured window.
    pub(crate) window_events: u64,
    /// Subscribers subscribed when the window began.
    pub(crate) subscribed: u64,
    pub(crate) elapsed: Duration,
}

impl RtResult {
    /// Events applied per second in the window, over all subscribers.
    pub(crate) fn delivered_per_sec(&self) -> f64 {
        self.tally.in_window as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Parses `sse` / `ws`.
pub(crate) fn mode(s: &str) -> Result<Mode, String> {
    match s {
        "sse" => Ok(Mode::Sse),
        "ws" => Ok(Mode::Ws),
        _ => Err(format!("--realtime {s:?}: sse or ws")),
    }
}

/// The stream's snapshot from `target`, as JSON.
fn snapshot(target: SocketAddr, stream: &str, token: &str) -> Result<serde_json::Value, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(target).map_err(|e| format!("snapshot: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let req = format!(
        "GET /v1/streams/{stream}/snapshot HTTP/1.1\r\nHost: {target}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("snapshot: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .map_err(|e| format!("snapshot: {e}"))?;
    let (_, body) = parse_closed_response(&buf, &ResponseLimits::default())
        .map_err(|e| format!("snapshot: {e}"))?;
    serde_json::from_slice(body)
        .map_err(|e| format!("snapshot: not JSON ({e}): is --target the realtime address?"))
}

/// The stream's scope binding, from a snapshot (a `realtime.v1` SUBSCRIBE
/// presents it).
fn scope_of(target: SocketAddr, stream: &str, token: &str) -> Result<String, String> {
    snapshot(target, stream, token)?["scopeBinding"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "snapshot: no scopeBinding".to_owned())
}

/// Waits until the subscribers' gateway has applied `sequence`, published
/// through another gateway of its cluster: a cursor beyond what it holds
/// would be refused as ahead of the stream.
fn wait_applied(
    target: SocketAddr,
    stream: &str,
    token: &str,
    sequence: u64,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = snapshot(target, stream, token)?;
        // A decimal string (sequences may exceed JSON's exact integers).
        let last = v["checkpoint"]["lastAppliedSequence"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        if last >= sequence {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the subscribers' gateway has applied up to {last}, not the first publication's {sequence}, after 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The moments of a run at which a harness samples the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RtPhase {
    /// The publisher is connected, no subscriber yet.
    Idle,
    /// Every subscriber is subscribed (or failed).
    Subscribed,
    /// The measured window begins (after the warm-up).
    WindowStart,
    /// The window's events are all delivered (or the drain gave up).
    WindowEnd,
}

/// Runs the load; `say` gets progress lines, `phase` the moments to
/// sample the server at.
pub(crate) fn run(
    spec: &RtSpec,
    mut say: impl FnMut(&str),
    phase: &mut dyn FnMut(RtPhase),
) -> Result<RtResult, String> {
    let clock = Instant::now();
    let now_ns = move || u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut publisher = publish::Publisher::connect(
        spec.publish_to.unwrap_or(spec.target),
        &spec.stream,
        &spec.token,
        &spec.event_type,
        spec.payload,
    )?;
    let first = publisher.publish(now_ns())?;
    let first_seq = first.sequence;
    if spec.publish_to.is_some_and(|p| p != spec.target) {
        wait_applied(spec.target, &spec.stream, &spec.token, first_seq)?;
    }
    let start = Start {
        epoch: first.epoch.clone(),
        last: first.sequence,
        cursor: first.cursor.clone(),
        scope: match &spec.scope {
            Some(s) => s.clone(),
            None => scope_of(spec.target, &spec.stream, &spec.token)?,
        },
    };
    phase(RtPhase::Idle);
    let shards = spec.shards.max(1).min(spec.subscribers.max(1));
    let window = Arc::new(Window::new());
    let shared: Vec<Arc<Mutex<Tally>>> = (0..shards)
        .map(|_| Arc::new(Mutex::new(Tally::new())))
        .collect();
    let config = EngineConfig {
        shards,
        pin: false,
        listen: Vec::new(),
        driver: spec.driver.clone(),
        limits: dtp_codec::Limits::default(),
        drain: Duration::from_secs(2),
        control_ring: 64,
        quic: None,
    };
    let (s2, w2, st) = (spec.clone(), window.clone(), shared.clone());
    // The policy is checked once here; each client builds its own.
    dtp_realtime::Reconnect::new(spec.policy).map_err(|e| e.to_string())?;
    let engine = Engine::start(config, move |i| {
        Subs::new(SubsSpec {
            target: s2.target,
            mode: s2.mode,
            stream: s2.stream.clone(),
            token: s2
                .subscriber_token
                .clone()
                .unwrap_or_else(|| s2.token.clone()),
            start: start.clone(),
            share: s2.subscribers / shards + usize::from(i < s2.subscribers % shards),
            policy: s2.policy,
            clock,
            window: w2.clone(),
            shared: st[i].clone(),
            shard: i,
        })
    })
    .map_err(|e| format!("could not start the load generator: {e}"))?;
    let sum = || {
        let mut t = Tally::new();
        for s in &shared {
            if let Ok(s) = s.lock() {
                t.merge(&s);
            }
        }
        t
    };
    // Ramp up: every client subscribed (or given up on), within a deadline.
    let ramp_deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = sum();
        let settled = t.subscribed + t.given_up() >= spec.subscribers as u64;
        if settled || Instant::now() > ramp_deadline {
            say(&format!(
                "{} subscribed, {} failed connections, {} given up",
                crate::text::plural(t.subscribed, "subscriber"),
                t.failed,
                t.given_up()
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let subscribed = sum().subscribed;
    phase(RtPhase::Subscribed);
    let result = (|| {
        let warm_until = Instant::now() + spec.warmup;
        let warm = publish::run(&mut publisher, spec.rate, warm_until, now_ns)?;
        let before = warm.last().map_or(first_seq, |p| p.sequence);
        // The window opens with the next publication; its sequence is set
        // before it is published (the only publisher of the stream), since
        // subscribers may apply it before its 201 comes back.
        window.from.store(before + 1, Relaxed);
        phase(RtPhase::WindowStart);
        let began = Instant::now();
        let mut window_until = began + spec.duration;
        let mut published = Vec::new();
        if spec.kick {
            let half = began + spec.duration / 2;
            published = publish::run(&mut publisher, spec.rate, half, now_ns)?;
            let asked = Instant::now();
            publish::kick(spec.target, &spec.stream, &spec.token)?;
            say(&format!(
                "every subscription ended (kick, answered in {} ms): the clients reconnect",
                asked.elapsed().as_millis()
            ));
            // The second half is published after the answer, however
            // long the server took, so the herd comes back to new events.
            window_until = Instant::now() + spec.duration / 2;
        }
        published.extend(publish::run(
            &mut publisher,
            spec.rate,
            window_until,
            now_ns,
        )?);
        if published.first().is_some_and(|p| p.sequence != before + 1) {
            return Err("another publisher is publishing on the stream".to_owned());
        }
        let elapsed = began.elapsed();
        let last = published.last().map_or(0, |p| p.sequence);
        window.to.store(last, Relaxed);
        let window_events = published.len() as u64;
        // Drain: until every client applied every window event (after a
        // kick: and every client came back or gave up), or 5 s without
        // progress (a herd may still be coming back).
        let (mut seen, mut progress) = ((0, 0), Instant::now());
        loop {
            let t = sum();
            let alive = subscribed.saturating_sub(t.given_up());
            let back = !spec.kick || t.resumed + t.given_up() >= subscribed;
            if (back && t.in_window >= window_events * alive)
                || progress.elapsed() > Duration::from_secs(5)
            {
                break;
            }
            if (t.in_window, t.resumed) != seen {
                (seen, progress) = ((t.in_window, t.resumed), Instant::now());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        phase(RtPhase::WindowEnd);
        Ok::<_, String>((window_events, elapsed))
    })();
    window.finished.store(true, Relaxed);
    engine.stop();
    engine
        .join()
        .map_err(|e| format!("load generator failed: {e}"))?;
    let (window_events, elapsed) = result?;
    Ok(RtResult {
        tally: sum(),
        window_events,
        subscribed,
        elapsed,
    })
}

/// The result as text.
pub(crate) fn report(spec: &RtSpec, r: &RtResult) -> String {
    let t = &r.tally;
    let q = |p: f64| t.latency.value_at_quantile(p);
    let d = t.spread();
    format!(
        "realtime {:?}: {} subscribers ({} failed connections), {} events in {:.1} s at {:.0}/s\n\
         delivered {} ({:.0}/s), received {}, missing {}, duplicates {}, stale {}, gaps {}, resets {}, conflicts {}\n\
         publish -> apply latency: p50 {} us, p99 {} us, p99.9 {} us, max {} us\n\
         reconnects {} (resumed {}, still waiting {}), delays drawn: min {} ms, p50 {} ms, p99 {} ms, max {} ms, {} distinct ms, at most {} on one ms\n\
         clients degraded {}, refused for good {} (forbidden {}, protocol mismatch {}, other {})",
        spec.mode,
        r.subscribed,
        t.failed,
        r.window_events,
        r.elapsed.as_secs_f64(),
        spec.rate,
        t.in_window,
        r.delivered_per_sec(),
        t.received,
        t.missing,
        t.duplicates,
        t.stale,
        t.gaps,
        t.resets,
        t.conflicts,
        q(0.5),
        q(0.99),
        q(0.999),
        t.latency.max(),
        t.reconnects,
        t.resumed,
        t.unresumed,
        d.min,
        d.p50,
        d.p99,
        d.max,
        d.distinct,
        d.most_in_one_ms,
        t.degraded,
        t.forbidden + t.protocol + t.refused_other,
        t.forbidden,
        t.protocol,
        t.refused_other,
    )
}

/// The result as JSON (`dtp load --json`).
pub(crate) fn json(spec: &RtSpec, r: &RtResult) -> serde_json::Value {
    let t = &r.tally;
    let d = t.spread();
    let q = |p: f64| t.latency.value_at_quantile(p);
    serde_json::json!({
        "mode": format!("{:?}", spec.mode).to_lowercase(),
        "clients": spec.subscribers,
        "subscribed": r.subscribed,
        "failed_connections": t.failed,
        "window_events": r.window_events,
        "elapsed_s": r.elapsed.as_secs_f64(),
        "delivered": t.in_window,
        "received": t.received,
        "applied": t.applied,
        "missing": t.missing,
        "duplicates": t.duplicates,
        "stale": t.stale,
        "gaps": t.gaps,
        "resets": t.resets,
        "conflicts": t.conflicts,
        "latency_us": {"p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": t.latency.max()},
        "reconnect": {
            "attempts": t.reconnects,
            "resumed": t.resumed,
            "unresumed": t.unresumed,
            "degraded": t.degraded,
            "refused": {
                "forbidden": t.forbidden,
                "protocol_mismatch": t.protocol,
                "other": t.refused_other,
            },
            "delay_ms": {
                "count": d.count,
                "min": d.min,
                "p50": d.p50,
                "p99": d.p99,
                "max": d.max,
                "distinct": d.distinct,
                "most_in_one_ms": d.most_in_one_ms,
            },
        },
    })
}

/// Whether the run worked: nothing missing, duplicated, out of order or
/// conflicting; with --kick also every client came back.
pub(crate) fn verdict(spec: &RtSpec, r: &RtResult) -> Result<(), String> {
    let t = &r.tally;
    let mut wrong = Vec::new();
    for (n, what) in [
        (t.missing, "missing event"),
        (t.duplicates + t.stale, "duplicate"),
        (t.gaps, "gap"),
        (t.conflicts, "conflict"),
    ] {
        if n > 0 {
            wrong.push(crate::text::plural(n, what).to_string());
        }
    }
    if r.subscribed == 0 {
        wrong.push(format!(
            "no subscriber subscribed ({} degraded, {} refused for good)",
            t.degraded,
            t.forbidden + t.protocol + t.refused_other
        ));
    }
    if spec.kick {
        let back = t.resumed;
        if back < r.subscribed {
            wrong.push(format!(
                "{back} of {} clients resumed after the kick",
                r.subscribed
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join(", "))
    }
}
