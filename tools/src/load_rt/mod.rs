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
//! that a subscriber alive at the end never applied counts as missing.

mod publish;
mod sub;

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtp_codec::http::{ResponseLimits, parse_closed_response};
use dtp_engine::{Engine, EngineConfig};
use dtp_transports::DriverConfig;

pub(crate) use sub::Mode;
use sub::{Start, Subs, Tally, Window};

/// The realtime options of `dtp load`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RealtimeCli {
    /// Load the realtime front end instead: `sse` or `ws` subscribers
    /// (--connections of them) on the realtime address (--target), one
    /// publisher at --publish-rate. Reports delivered events, publish →
    /// apply latency, gaps, resets, duplicates and missing events.
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
    /// With --realtime: events published per second.
    #[arg(long, default_value_t = 20.0, requires = "realtime")]
    pub(crate) publish_rate: f64,
}

/// One realtime load run.
#[derive(Clone, Debug)]
pub(crate) struct RtSpec {
    pub(crate) target: SocketAddr,
    pub(crate) mode: Mode,
    pub(crate) subscribers: usize,
    pub(crate) stream: String,
    pub(crate) event_type: String,
    pub(crate) token: String,
    /// The stream's scope binding; `None`: read from its snapshot.
    pub(crate) scope: Option<String>,
    pub(crate) rate: f64,
    pub(crate) payload: usize,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    pub(crate) shards: usize,
    pub(crate) driver: DriverConfig,
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

/// The stream's scope binding, from a snapshot (a `realtime.v1` SUBSCRIBE
/// presents it).
fn scope_of(target: SocketAddr, stream: &str, token: &str) -> Result<String, String> {
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
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("snapshot: not JSON ({e}): is --target the realtime address?"))?;
    v["scopeBinding"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "snapshot: no scopeBinding".to_owned())
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
        spec.target,
        &spec.stream,
        &spec.token,
        &spec.event_type,
        spec.payload,
    )?;
    let first = publisher.publish(now_ns())?;
    let first_seq = first.sequence;
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
    };
    let (s2, w2, st) = (spec.clone(), window.clone(), shared.clone());
    let engine = Engine::start(config, move |i| Subs {
        target: s2.target,
        mode: s2.mode,
        stream: s2.stream.clone(),
        token: s2.token.clone(),
        start: start.clone(),
        share: s2.subscribers / shards + usize::from(i < s2.subscribers % shards),
        opened: 0,
        pending: 0,
        clock,
        window: w2.clone(),
        local: Tally::new(),
        shared: st[i].clone(),
        last_flush: Instant::now(),
        masks: i as u32,
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
    // Ramp up: every subscriber subscribed (or failed), within a deadline.
    let ramp_deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = sum();
        if t.subscribed + t.failed >= spec.subscribers as u64 || Instant::now() > ramp_deadline {
            say(&format!(
                "{} subscribed, {} failed",
                crate::text::plural(t.subscribed, "subscriber"),
                t.failed
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
        let window_until = began + spec.duration;
        let published = publish::run(&mut publisher, spec.rate, window_until, now_ns)?;
        if published.first().is_some_and(|p| p.sequence != before + 1) {
            return Err("another publisher is publishing on the stream".to_owned());
        }
        let elapsed = began.elapsed();
        let last = published.last().map_or(0, |p| p.sequence);
        window.to.store(last, Relaxed);
        let window_events = published.len() as u64;
        // Drain: until every subscriber applied every window event, or 5 s.
        let drain_deadline = Instant::now() + Duration::from_secs(5);
        while sum().in_window < window_events * subscribed && Instant::now() < drain_deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        phase(RtPhase::WindowEnd);
        Ok::<_, String>((window_events, elapsed))
    })();
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
    format!(
        "realtime {:?}: {} subscribers ({} failed), {} events in {:.1} s at {:.0}/s\n\
         delivered {} ({:.0}/s), missing {}, duplicates {}, stale {}, gaps {}, resets {}, conflicts {}\n\
         publish -> apply latency: p50 {} us, p99 {} us, p99.9 {} us, max {} us",
        spec.mode,
        r.subscribed,
        t.failed,
        r.window_events,
        r.elapsed.as_secs_f64(),
        spec.rate,
        t.in_window,
        r.delivered_per_sec(),
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
    )
}
