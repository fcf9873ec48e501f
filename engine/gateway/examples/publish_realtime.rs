//! Publishing into a realtime stream from your own Rust code (SPEC RT-6):
//! a control plane of yours publishes events, the gateway's realtime plane
//! commits them to the stream's ledger and every shard's realtime front end
//! delivers them to browsers over SSE, WebSocket and polling.
//!
//! `Ticker` is the plane of yours: on the control thread, sans-IO, it
//! publishes a `clock.tick` event every 100 ms (its `tick` asks to be
//! called again then) and hands them over through
//! `GatewayPlane::drain_events`. `WithRealtime` runs it beside the
//! realtime plane on one control thread. The example then reads three
//! events over SSE as a browser's `EventSource` would, and stops.
//!
//! ```text
//! cargo run -p dtp-gateway --example publish_realtime
//! ```

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dtp_codec::Limits;
use dtp_engine::{ControlPlane, Engine, EngineConfig};
use dtp_gateway::app::{Decisions, GatewayPlane, GatewayRequest, PlaneEvent, WithRealtime};
use dtp_gateway::realtime::{
    FrontMetrics, LoginKey, RealtimeFront, RealtimePlane, RtClient, RtConfig, RtLimits,
};
use dtp_realtime::{RecoveryMode, Retention, StreamSpec};
use dtp_transports::DriverConfig;

/// The one client of this example (a real deployment reads its tokens
/// from configuration).
const TOKEN: &str = "example-token-1";

/// Your plane: publishes `{"n": N}` on `clock` every 100 ms.
struct Ticker {
    next: Option<Instant>,
    n: u64,
    events: Vec<PlaneEvent>,
}

impl ControlPlane<dtp_gateway::app::GatewayUp, dtp_gateway::app::GatewayDown> for Ticker {
    fn handle(&mut self, _: usize, _: GatewayRequest, _: Instant, _: &mut Decisions) {}

    fn tick(&mut self, now: Instant, _: &mut Decisions) -> Option<Instant> {
        let due = *self.next.get_or_insert(now);
        if now >= due {
            self.n += 1;
            self.events.push(PlaneEvent {
                stream: "clock",
                event_type: "clock.tick",
                payload: format!("{{\"n\":{}}}", self.n).into_bytes(),
            });
            self.next = Some(now + Duration::from_millis(100));
        }
        self.next
    }
}

impl GatewayPlane for Ticker {
    fn drain_events(&mut self, out: &mut Vec<PlaneEvent>) {
        out.append(&mut self.events);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = StreamSpec {
        id: "clock".into(),
        recovery: RecoveryMode::Cursor,
        event_types: vec!["clock.tick".into()],
        retention: Retention::default(),
        scope: "example".into(),
    };
    let config = Arc::new(RtConfig {
        clients: vec![RtClient {
            token: TOKEN.into(),
            streams: vec!["clock".into()],
            publish: false,
            admin: false,
        }],
        cookie: "dtp_session".into(),
        login: LoginKey::new(random_key(), Instant::now()),
        origins: Vec::new(),
        own_origins: Default::default(),
        echo_max_message: None,
        scopes: HashMap::from([("clock".to_owned(), "example".to_owned())]),
        limits: RtLimits::default(),
    });
    config.validate()?;
    let shards = 2;
    let mut seed = u64::from_le_bytes(random_key()[..8].try_into()?);
    let mut random = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        seed
    };
    let realtime = RealtimePlane::new(vec![clock], shards, &mut random)?;
    let ticker = Ticker {
        next: None,
        n: 0,
        events: Vec::new(),
    };
    let metrics = Arc::new(FrontMetrics::default());
    let engine = Engine::start_with_control(
        EngineConfig {
            shards,
            pin: false,
            listen: vec!["127.0.0.1:0".parse()?],
            driver: DriverConfig::default(),
            limits: Limits::default(),
            drain: Duration::from_secs(1),
            control_ring: 1024,
            quic: None,
        },
        move |shard| RealtimeFront::new(config.clone(), shard, metrics.clone()),
        Box::new(WithRealtime::new(ticker, realtime)),
    )?;
    let addr = engine.local_addrs()[0].tcp().ok_or("no TCP address")?;
    println!("realtime on http://{addr}/v1 — stream `clock`");

    // What a browser's EventSource does: one GET, then events as they come.
    let mut sse = TcpStream::connect(addr)?;
    sse.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        sse,
        "GET /v1/streams/clock/sse HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    )?;
    let mut seen = 0;
    for line in BufReader::new(sse).lines() {
        let line = line?;
        if let Some(data) = line.strip_prefix("data: ") {
            println!("event: {data}");
            seen += 1;
            if seen == 3 {
                break;
            }
        }
    }
    engine.stop();
    engine.join()?;
    println!("stopped after {seen} events");
    Ok(())
}

/// 32 bytes from the operating system.
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    // An example: a failing system generator is not worth a branch here.
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key);
    key
}
