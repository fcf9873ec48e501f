//! The built-in `sessions` stream's snapshot is the whole live session
//! table (SPEC RT-2, RT-6): a dashboard that takes the snapshot and applies
//! the events after its checkpoint has exactly the terminal's table. The
//! terminal plane and the realtime plane run side by side as on the control
//! thread (`WithRealtime`), driven through the `ControlPlane` trait in virtual
//! time: the test is the control thread.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::realtime::{Envelope, JsonLimits};
use dtp_codec::{AccessMode, AuthOutcome, AuthRequest, ControlMessage, SessionId, SessionRelease};
use dtp_crypto::cred::IssuerKeyPair;
use dtp_engine::{ControlPlane, Decision, Request};
use dtp_gateway::TerminalPlane;
use dtp_gateway::app::{GatewayDown, GatewayUp, WithRealtime};
use dtp_gateway::plane::{OffsetClock, PlaneConfig, built_in_specs};
use dtp_gateway::realtime::{RealtimePlane, RtDecision, RtRequest};
use dtp_terminal::{ResourceConfig, ScriptedAccess, SeededRandom, TerminalConfig, UnixMs};
use dtp_test_kit::keys;
use dtp_transports::ConnId;
use serde_json::Value;

/// The virtual start (Unix ms).
const T0: u64 = 1_700_000_000_000;

/// One row of the table, as a dashboard keeps it: the latest
/// `session.state` payload of each session.
type Table = BTreeMap<String, Value>;

struct Rig {
    plane: WithRealtime<TerminalPlane<ScriptedAccess>>,
    issuer: IssuerKeyPair,
    now: Instant,
    origin: Instant,
    next: u64,
    /// Every `sessions` event published so far: (sequence, payload).
    events: Vec<(u64, Value)>,
}

impl Rig {
    fn new() -> Self {
        let mut c = TerminalConfig::new("t1");
        c.liveness.heartbeat_interval_ms = 1_000;
        c.liveness.heartbeat_timeout_ms = 3_000;
        for r in ["arm", "lamp", "screen"] {
            c.resources.push(ResourceConfig::new(r));
        }
        let issuer = IssuerKeyPair::from_seed(&[7; 32]).unwrap();
        let verifier = keys::verifier(&issuer);
        let origin = Instant::now();
        let (terminal, _handle) = TerminalPlane::with_parts(
            PlaneConfig::new(c),
            verifier,
            ScriptedAccess::new(),
            Box::new(OffsetClock::new(origin, UnixMs(T0))),
            Box::new(SeededRandom::new(42)),
        )
        .unwrap();
        let specs = built_in_specs("terminal");
        let mut seed = 9u64;
        let mut random = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            seed
        };
        let realtime = RealtimePlane::new(specs, 1, &mut random).unwrap();
        Rig {
            plane: WithRealtime::new(terminal, realtime),
            issuer,
            now: origin,
            origin,
            next: 0,
            events: Vec::new(),
        }
    }

    /// Hands `r` to the planes, then ticks as the control loop does after
    /// every batch (the events a request made are published then); keeps
    /// the `sessions` events they published.
    fn request(&mut self, r: Request<GatewayUp>) -> Vec<(usize, Decision<GatewayDown>)> {
        let mut out = Vec::new();
        self.plane.handle(0, r, self.now, &mut out);
        self.plane.tick(self.now, &mut out);
        self.keep_events(&out);
        out
    }

    fn keep_events(&mut self, out: &[(usize, Decision<GatewayDown>)]) {
        for (_, d) in out {
            if let Decision::Service(GatewayDown::RtEvent(ev)) = d {
                let env = Envelope::decode(ev.envelope(), &JsonLimits::default()).unwrap();
                if env.stream_id == "sessions" {
                    self.events.push((env.sequence, Value::Object(env.payload)));
                }
            }
        }
    }

    /// Moves virtual time on by `ms` and ticks.
    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        let mut out = Vec::new();
        self.plane.tick(self.now, &mut out);
        self.keep_events(&out);
    }

    fn send(&mut self, conn: u64, msg: ControlMessage) -> Vec<(usize, Decision<GatewayDown>)> {
        let (conn, msg) = (ConnId::from_u64(conn), Box::new(msg));
        self.request(Request::Service(GatewayUp::Message { conn, msg }))
    }

    /// A connection up and a session of `fay` on `resource` granted on it.
    fn session(&mut self, conn: u64, fay: &str, resource: &str) -> SessionId {
        self.request(Request::Up {
            conn: ConnId::from_u64(conn),
        });
        self.next += 1;
        let secs = (T0 + (self.now - self.origin).as_millis() as u64) / 1000;
        let both: &[AccessMode] = &[AccessMode::Read, AccessMode::Write];
        let credential = keys::issue(
            &self.issuer,
            fay,
            [1; 32],
            &[("arm", both), ("lamp", both), ("screen", both)],
            [self.next as u8; 16],
            secs - 10..secs + 3_600,
        );
        let req = AuthRequest {
            request_id: self.next,
            fay_id: fay.into(),
            resource_id: resource.into(),
            access_mode: AccessMode::Write,
            credential: credential.as_bytes().clone(),
        };
        let out = self.send(conn, ControlMessage::AuthRequest(req));
        out.iter()
            .find_map(|(_, d)| match d {
                Decision::Service(GatewayDown::Send { msg, .. }) => match &**msg {
                    ControlMessage::AuthResult(r) => match r.outcome {
                        AuthOutcome::Granted { session_id } => Some(session_id),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_else(|| panic!("{fay} on {resource}: not granted: {out:?}"))
    }

    /// The `sessions` snapshot: its checkpoint's last sequence and its rows.
    fn snapshot(&mut self) -> (u64, Table) {
        let r = RtRequest::Snapshot {
            conn: ConnId::from_u64(999),
            stream: "sessions".into(),
        };
        let out = self.request(Request::Service(GatewayUp::Realtime(Box::new(r))));
        let body: Bytes = out
            .into_iter()
            .find_map(|(_, d)| match d {
                Decision::Service(GatewayDown::Realtime(d)) => match *d {
                    RtDecision::Snapshot { body, .. } => Some(body),
                    _ => None,
                },
                _ => None,
            })
            .expect("a snapshot");
        let v: Value = serde_json::from_slice(&body).unwrap();
        let last = v["checkpoint"]["lastAppliedSequence"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let rows = v["state"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("no table in {v}"))
            .iter()
            .map(|row| (row["sessionId"].as_str().unwrap().to_owned(), row.clone()))
            .collect();
        (last, rows)
    }

    /// What a dashboard has: the snapshot's rows, then every event after
    /// its checkpoint applied in order.
    fn rebuild(&self, (last, mut rows): (u64, Table)) -> Table {
        for (seq, payload) in &self.events {
            if *seq <= last {
                continue;
            }
            let id = payload["sessionId"].as_str().unwrap().to_owned();
            if payload["to"] == "terminated" {
                rows.remove(&id);
            } else {
                rows.insert(id, payload.clone());
            }
        }
        rows
    }

    /// The terminal's own table, in the rows' terms.
    fn live(&self) -> BTreeMap<String, (String, String, String)> {
        self.plane
            .main
            .terminal()
            .sessions()
            .into_iter()
            .map(|s| {
                let row = (s.resource_id, wire(&s.access_mode), wire(&s.state));
                (s.session_id.to_string(), row)
            })
            .collect()
    }
}

/// A wire enum's JSON spelling (`"write"`, `"active"`).
fn wire<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// A table's rows in the terms of [`Rig::live`].
fn as_live(rows: &Table) -> BTreeMap<String, (String, String, String)> {
    rows.iter()
        .map(|(id, row)| {
            let s = |k: &str| row[k].as_str().unwrap().to_owned();
            (id.clone(), (s("resourceId"), s("accessMode"), s("to")))
        })
        .collect()
}

#[test]
fn the_sessions_snapshot_plus_later_events_is_the_live_session_table() {
    let mut rig = Rig::new();
    // Before any session: an empty table, not null.
    let (last, rows) = rig.snapshot();
    assert_eq!((last, rows.len()), (0, 0));

    let a = rig.session(1, "fay-a", "lamp");
    let b = rig.session(2, "fay-b", "arm");
    let first = rig.snapshot();
    assert_eq!(as_live(&first.1), rig.live(), "the snapshot is the table");
    assert_eq!(first.1.len(), 2);
    assert!(first.0 > 0);
    // No Fay id or credential in a row (SPEC RT-3).
    for row in first.1.values() {
        let text = row.to_string();
        assert!(!text.contains("fay-"), "{text}");
    }

    // Changes after the snapshot: a release, a new session, a connection
    // lost until its sessions time out.
    rig.send(
        1,
        ControlMessage::SessionRelease(SessionRelease { session_id: a }),
    );
    let c = rig.session(3, "fay-c", "screen");
    rig.request(Request::Down {
        conn: ConnId::from_u64(2),
    });
    for _ in 0..10 {
        rig.advance(1_000);
    }
    let live = rig.live();
    assert!(live.contains_key(&c.to_string()), "{live:?}");
    assert!(!live.contains_key(&a.to_string()), "{live:?}");
    assert!(!live.contains_key(&b.to_string()), "b timed out: {live:?}");
    assert_eq!(as_live(&rig.rebuild(first)), live);

    // And a snapshot now is that table too, with its rows exactly as the
    // updates made them.
    let now = rig.snapshot();
    assert_eq!(
        now.0,
        rig.events.last().unwrap().0,
        "checkpoint at the last event"
    );
    assert_eq!(rig.rebuild((0, Table::new())), now.1);
    assert_eq!(as_live(&now.1), live);
}
