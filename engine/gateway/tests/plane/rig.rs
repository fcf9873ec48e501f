//! A [`TerminalPlane`] driven directly through the `ControlPlane` trait, in
//! virtual time: the test is the control thread. Time moves only when a
//! test moves it (an [`OffsetClock`] maps the instants passed in to Unix
//! time); model calls and admin commands come back on their own threads
//! and wake the test thread through the plane's waker.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage, Heartbeat, SessionId,
};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};
use dtp_engine::{ControlPlane, ControlWaker, Decision, Request};
use dtp_gateway::app::{GatewayDown, GatewayUp};
use dtp_gateway::plane::{AuditSection, FsyncPolicy, OffsetClock, PlaneConfig};
use dtp_gateway::{PlaneHandle, TerminalPlane};
use dtp_policy::{AiFallback, HumanDecision, PriorityScript};
use dtp_terminal::{
    DefaultAction, HandoverPolicyConfig, OsAccess, PolicyRef, ResourceConfig, ScriptedAccess,
    SeededRandom, TerminalConfig, UiChannel, UnixMs,
};
use dtp_transports::ConnId;

/// The virtual start (Unix ms).
pub(crate) const T0: u64 = 1_700_000_000_000;

/// The priority script: the target wins iff it is `params.winner`.
const PRIO: &str =
    "#{ source: 1, target: if input.target.fay_id == params.winner { 2 } else { 0 } }";

fn prio(winner: &str) -> PriorityScript {
    PriorityScript {
        script_id: "prio".into(),
        parameters: BTreeMap::from([("winner".to_owned(), winner.to_owned())]),
    }
}

/// A terminal `t1` with `arm` (priority script: fay-b wins), `cam` (AI
/// model at `model_port`; its fallback script lets fay-b win), `screen`
/// (a person decides within 5 s, default reject) and `lamp` (no policy).
/// Liveness: beats every 1 s, dead after 3 s.
pub(crate) fn config(model_port: u16) -> PlaneConfig {
    let mut c = TerminalConfig::new("t1");
    c.handover.min_retry_interval_ms = 0;
    c.liveness.heartbeat_interval_ms = 1_000;
    c.liveness.heartbeat_timeout_ms = 3_000;
    let script = PolicyRef::PriorityScript {
        script_id: "prio".into(),
        parameters: prio("fay-b").parameters,
    };
    let model = PolicyRef::AiModel {
        model_endpoint: format!("http://127.0.0.1:{model_port}/decide"),
        context_fields: vec!["source.fay_id".into(), "target.fay_id".into()],
        // Generous for a loaded machine: the call runs in real time.
        decision_timeout_ms: 2_500,
    };
    let human = PolicyRef::HumanDecision {
        ui_channel: UiChannel::ExternalPanel,
        decision_timeout_seconds: 5,
        default_action: DefaultAction::Reject,
    };
    for (name, policy) in [("prio", script), ("model", model), ("ask", human)] {
        c.policies
            .insert(name.into(), HandoverPolicyConfig::new(policy));
    }
    // SPEC HO-7: the model's own timeout must fit in the hard timeout.
    c.policies.get_mut("model").unwrap().hard_timeout_ms = Some(3_000);
    for (r, p) in [
        ("arm", Some("prio")),
        ("cam", Some("model")),
        ("screen", Some("ask")),
        ("lamp", None),
    ] {
        let mut rc = ResourceConfig::new(r);
        rc.handover_policy = p.map(str::to_owned);
        c.resources.push(rc);
    }
    let mut config = PlaneConfig::new(c);
    config.policy.scripts.insert("prio".into(), PRIO.into());
    config.policy.ai_fallback = Some(AiFallback {
        priority_script: prio("fay-b"),
        human_decision: HumanDecision {
            ui_channel: UiChannel::ExternalPanel,
            decision_timeout_seconds: 5,
            default_action: DefaultAction::Reject,
        },
    });
    config
}

/// An audit section writing `path`, synced on every record.
pub(crate) fn audit_at(path: PathBuf) -> AuditSection {
    AuditSection {
        path,
        fsync: FsyncPolicy::EveryRecord,
        fsync_interval_ms: 1000,
        rotation: None,
    }
}

/// A fresh directory for one test's files.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtp-plane-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The plane, its handle, the virtual clock and a credential issuer; `A`
/// is the OS access control.
pub(crate) struct Rig<A: OsAccess + Clone + Send + 'static = ScriptedAccess> {
    pub(crate) plane: TerminalPlane<A>,
    pub(crate) handle: PlaneHandle,
    pub(crate) origin: Instant,
    pub(crate) now: Instant,
    issuer: IssuerKeyPair,
    next: u64,
    /// The descriptor id of the last credential [`Rig::cred`] issued.
    pub(crate) last_descriptor: uuid::Uuid,
}

impl Rig {
    pub(crate) fn new(config: PlaneConfig) -> Self {
        Rig::with_access(config, ScriptedAccess::new())
    }
}

impl<A: OsAccess + Clone + Send + 'static> Rig<A> {
    pub(crate) fn with_access(config: PlaneConfig, access: A) -> Self {
        let issuer = IssuerKeyPair::from_seed(&[7; 32]).unwrap();
        let mut verifier = Verifier::new();
        verifier.trust(*issuer.public_key()).unwrap();
        let origin = Instant::now();
        let (mut plane, handle) = TerminalPlane::with_parts(
            config,
            verifier,
            access,
            Box::new(OffsetClock::new(origin, UnixMs(T0))),
            Box::new(SeededRandom::new(42)),
        )
        .unwrap();
        // The test thread is the control thread: wakes unpark it.
        plane.attach(ControlWaker::new(std::thread::current()));
        Rig {
            plane,
            handle,
            origin,
            now: origin,
            issuer,
            next: 0,
            last_descriptor: uuid::Uuid::nil(),
        }
    }

    /// The virtual Unix time.
    pub(crate) fn unix(&self) -> u64 {
        T0 + (self.now - self.origin).as_millis() as u64
    }

    pub(crate) fn request(
        &mut self,
        shard: usize,
        r: Request<GatewayUp>,
    ) -> Vec<(usize, Decision<GatewayDown>)> {
        let mut out = Vec::new();
        self.plane.handle(shard, r, self.now, &mut out);
        out
    }

    pub(crate) fn up(&mut self, shard: usize, conn: u64) {
        let conn = ConnId::from_u64(conn);
        assert!(self.request(shard, Request::Up { conn }).is_empty());
    }

    pub(crate) fn down(&mut self, shard: usize, conn: u64) -> Vec<(usize, Decision<GatewayDown>)> {
        let conn = ConnId::from_u64(conn);
        self.request(shard, Request::Down { conn })
    }

    pub(crate) fn send(
        &mut self,
        shard: usize,
        conn: u64,
        msg: ControlMessage,
    ) -> Vec<(usize, Decision<GatewayDown>)> {
        let (conn, msg) = (ConnId::from_u64(conn), Box::new(msg));
        self.request(shard, Request::Service(GatewayUp::Message { conn, msg }))
    }

    /// Ticks the plane at the current time; its decisions and next deadline.
    pub(crate) fn tick(&mut self) -> (Vec<(usize, Decision<GatewayDown>)>, Option<Instant>) {
        let mut out = Vec::new();
        let next = self.plane.tick(self.now, &mut out);
        (out, next)
    }

    /// Moves virtual time on by `ms` and ticks.
    pub(crate) fn advance(&mut self, ms: u64) -> Vec<(usize, Decision<GatewayDown>)> {
        self.now += Duration::from_millis(ms);
        self.tick().0
    }

    /// Ticks (sleeping in between, woken by the plane's threads) until
    /// `done` holds on what the ticks decided; fails after 10 s of real time.
    pub(crate) fn tick_until(
        &mut self,
        what: &str,
        mut done: impl FnMut(&[(usize, Decision<GatewayDown>)]) -> bool,
    ) -> Vec<(usize, Decision<GatewayDown>)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut all = Vec::new();
        loop {
            all.extend(self.tick().0);
            if done(&all) {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within 10 s; decided {all:?}"
            );
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }

    /// Runs `call` with a clone of the handle on another thread (as the
    /// admin HTTP thread would) while this thread ticks the plane.
    pub(crate) fn admin<T: Send + 'static>(
        &mut self,
        call: impl FnOnce(&PlaneHandle) -> T + Send + 'static,
    ) -> (T, Vec<(usize, Decision<GatewayDown>)>) {
        let handle = self.handle.clone();
        let caller = std::thread::spawn(move || call(&handle));
        let out = self.tick_until("admin call", |_| caller.is_finished());
        (caller.join().unwrap(), out)
    }

    /// A credential for `fay` granting every mode on every resource.
    pub(crate) fn cred(&mut self, fay: &str) -> Bytes {
        self.next += 1;
        let modes = [
            AccessMode::Read,
            AccessMode::Write,
            AccessMode::Execute,
            AccessMode::Configure,
        ];
        let grants = ["arm", "cam", "screen", "lamp"]
            .iter()
            .map(|r| Grant {
                resource_id: (*r).into(),
                modes: modes.iter().copied().collect(),
            })
            .collect();
        let secs = self.unix() / 1000;
        let req = CredentialRequest {
            fay_id: fay.into(),
            noise_key: [1; 32],
            grants,
            not_before: secs - 10,
            not_after: secs + 3_600,
        };
        let credential = self.issuer.issue(req, [self.next as u8; 16]).unwrap();
        self.last_descriptor = uuid::Builder::from_random_bytes([self.next as u8; 16]).into_uuid();
        credential.as_bytes().clone()
    }

    /// Sends an AuthRequest for `resource` in write mode; returns its id
    /// and what the plane decided at once.
    pub(crate) fn auth(
        &mut self,
        shard: usize,
        conn: u64,
        fay: &str,
        resource: &str,
    ) -> (u64, Vec<(usize, Decision<GatewayDown>)>) {
        self.next += 1;
        let request_id = self.next;
        let credential = self.cred(fay);
        let req = AuthRequest {
            request_id,
            fay_id: fay.into(),
            resource_id: resource.into(),
            access_mode: AccessMode::Write,
            credential,
        };
        (
            request_id,
            self.send(shard, conn, ControlMessage::AuthRequest(req)),
        )
    }

    /// An AuthRequest that must be granted at once; the session.
    pub(crate) fn session(&mut self, shard: usize, conn: u64, fay: &str, res: &str) -> SessionId {
        let (id, out) = self.auth(shard, conn, fay, res);
        match auth_result(&out, shard, conn, id) {
            Some(AuthOutcome::Granted { session_id }) => session_id,
            other => panic!("{fay} on {res}: {other:?} in {out:?}"),
        }
    }

    pub(crate) fn heartbeat(
        &mut self,
        shard: usize,
        conn: u64,
        s: SessionId,
        seq: u64,
    ) -> Vec<(usize, Decision<GatewayDown>)> {
        let beats = vec![Beat {
            session_id: s,
            sequence_number: seq,
        }];
        self.send(shard, conn, ControlMessage::Heartbeat(Heartbeat { beats }))
    }
}

/// The messages sent to (shard, conn), in order.
pub(crate) fn sent_to(
    out: &[(usize, Decision<GatewayDown>)],
    shard: usize,
    conn: u64,
) -> Vec<ControlMessage> {
    out.iter()
        .filter_map(|(s, d)| match d {
            Decision::Service(GatewayDown::Send { conn: c, msg })
                if *s == shard && c.as_u64() == conn =>
            {
                Some((**msg).clone())
            }
            _ => None,
        })
        .collect()
}

/// The outcome of the AuthResult for `request_id` sent to (shard, conn).
pub(crate) fn auth_result(
    out: &[(usize, Decision<GatewayDown>)],
    shard: usize,
    conn: u64,
    request_id: u64,
) -> Option<AuthOutcome> {
    sent_to(out, shard, conn).into_iter().find_map(|m| match m {
        ControlMessage::AuthResult(AuthResult {
            request_id: id,
            outcome,
        }) if id == request_id => Some(outcome),
        _ => None,
    })
}
