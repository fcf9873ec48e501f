//! The virtual-time harness that drives a [`Terminal`] in tests, and the
//! tests that need a whole terminal. Time only moves when a test moves it;
//! [`Harness::advance`] jumps from deadline to deadline as the control
//! thread would.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod auth;
mod handover;
mod handover_failures;
mod handover_limits;
mod liveness;
mod os_deferred;
mod prop;
mod reconcile;
mod remote;
mod termination;

use std::collections::BTreeMap;

use bytes::Bytes;
use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, Beat, ControlMessage, Heartbeat, SessionId,
    SessionRelease, SessionState, SessionTransferRequest,
};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};

use crate::occupancy::is_exclusive;
use crate::{
    ConnKey, HandoverPolicyConfig, Output, PolicyRef, ResourceConfig, ScriptedAccess, SeededRandom,
    Terminal, TerminalConfig, UnixMs,
};

/// The harness's start time (Unix ms).
pub(crate) const T0: u64 = 1_700_000_000_000;

pub(crate) const A: ConnKey = ConnKey(1);
pub(crate) const B: ConnKey = ConnKey(2);
pub(crate) const C: ConnKey = ConnKey(3);

/// A terminal with three resources: `arm` (priority-script policy), `cam`
/// (no policy), `screen` (human-decision policy).
pub(crate) fn config() -> TerminalConfig {
    let mut c = TerminalConfig::new("t1");
    c.handover.min_retry_interval_ms = 0;
    let script = PolicyRef::PriorityScript {
        script_id: "prio".into(),
        parameters: BTreeMap::new(),
    };
    let human = PolicyRef::HumanDecision {
        ui_channel: crate::UiChannel::ExternalPanel,
        decision_timeout_seconds: 30,
        default_action: crate::DefaultAction::Reject,
    };
    c.policies
        .insert("prio".into(), HandoverPolicyConfig::new(script));
    c.policies
        .insert("ask".into(), HandoverPolicyConfig::new(human));
    for (r, p) in [
        ("arm", Some("prio")),
        ("cam", None),
        ("screen", Some("ask")),
    ] {
        let mut rc = ResourceConfig::new(r);
        rc.handover_policy = p.map(str::to_owned);
        rc.metadata.insert("kind".into(), r.into());
        c.resources.push(rc);
    }
    c
}

/// Every grant a test credential carries.
pub(crate) fn all_grants() -> Vec<Grant> {
    let all = [
        AccessMode::Read,
        AccessMode::Write,
        AccessMode::Execute,
        AccessMode::Configure,
    ];
    ["arm", "cam", "screen"]
        .iter()
        .map(|r| Grant {
            resource_id: (*r).into(),
            modes: all.iter().copied().collect(),
        })
        .collect()
}

/// A terminal, its virtual clock and a credential issuer.
pub(crate) struct Harness {
    pub(crate) t: Terminal<ScriptedAccess>,
    pub(crate) now: UnixMs,
    pub(crate) issuer: IssuerKeyPair,
    /// Every output drained so far.
    pub(crate) log: Vec<Output>,
    /// Observer mirror: session → (resource, mode, state), from the
    /// StateChanged stream (HO-4 is checked on it after every event).
    pub(crate) mirror: BTreeMap<SessionId, (String, AccessMode, SessionState)>,
    next_cred: u8,
    next_request: u64,
}

impl Harness {
    pub(crate) fn new() -> Self {
        Self::with(config())
    }

    pub(crate) fn with(config: TerminalConfig) -> Self {
        let issuer = IssuerKeyPair::from_seed(&[7; 32]).unwrap();
        let mut verifier = Verifier::new();
        verifier.trust(*issuer.public_key()).unwrap();
        let t = Terminal::new(
            config,
            verifier,
            ScriptedAccess::new(),
            Box::new(SeededRandom::new(42)),
        )
        .unwrap();
        let mut h = Harness {
            t,
            now: UnixMs(T0),
            issuer,
            log: Vec::new(),
            mirror: BTreeMap::new(),
            next_cred: 0,
            next_request: 0,
        };
        for c in [A, B, C] {
            h.t.connection_up(c, h.now);
        }
        h
    }

    /// A credential for `fay` with every grant, valid for an hour.
    pub(crate) fn cred(&mut self, fay: &str) -> Bytes {
        self.cred_with(fay, all_grants(), 3_600)
    }

    pub(crate) fn cred_with(&mut self, fay: &str, grants: Vec<Grant>, valid_secs: u64) -> Bytes {
        self.next_cred += 1;
        let now = self.now.secs();
        let req = CredentialRequest {
            fay_id: fay.into(),
            noise_key: [1; 32],
            grants,
            not_before: now - 10,
            not_after: now + valid_secs,
        };
        self.issuer
            .issue(req, [self.next_cred; 16])
            .unwrap()
            .as_bytes()
            .clone()
    }

    /// Sends a message on `conn` and returns the outputs it caused.
    pub(crate) fn send(&mut self, conn: ConnKey, msg: ControlMessage) -> Vec<Output> {
        self.t.handle_message(conn, msg, self.now);
        self.drain()
    }

    pub(crate) fn auth_request(
        &mut self,
        fay: &str,
        resource: &str,
        mode: AccessMode,
        credential: Bytes,
    ) -> AuthRequest {
        self.next_request += 1;
        AuthRequest {
            request_id: self.next_request,
            fay_id: fay.into(),
            resource_id: resource.into(),
            access_mode: mode,
            credential,
        }
    }

    /// An AuthRequest with a fresh full credential; the AuthResult's outcome
    /// (`None` if a handover started instead).
    pub(crate) fn auth(
        &mut self,
        conn: ConnKey,
        fay: &str,
        resource: &str,
        mode: AccessMode,
    ) -> Option<AuthOutcome> {
        let cred = self.cred(fay);
        let req = self.auth_request(fay, resource, mode, cred);
        self.auth_with(conn, req)
    }

    pub(crate) fn auth_with(&mut self, conn: ConnKey, req: AuthRequest) -> Option<AuthOutcome> {
        let id = req.request_id;
        let out = self.send(conn, ControlMessage::AuthRequest(req));
        auth_result(&out, conn, id)
    }

    /// Like [`Harness::auth`], but the session must be granted.
    pub(crate) fn session(
        &mut self,
        conn: ConnKey,
        fay: &str,
        resource: &str,
        mode: AccessMode,
    ) -> SessionId {
        match self.auth(conn, fay, resource, mode) {
            Some(AuthOutcome::Granted { session_id }) => session_id,
            other => panic!("{fay} on {resource}: {other:?}"),
        }
    }

    pub(crate) fn heartbeat(&mut self, conn: ConnKey, beats: &[(SessionId, u64)]) -> Vec<Output> {
        let beats = beats
            .iter()
            .map(|(s, n)| Beat {
                session_id: *s,
                sequence_number: *n,
            })
            .collect();
        self.send(conn, ControlMessage::Heartbeat(Heartbeat { beats }))
    }

    pub(crate) fn release(&mut self, conn: ConnKey, id: SessionId) -> Vec<Output> {
        self.send(
            conn,
            ControlMessage::SessionRelease(SessionRelease { session_id: id }),
        )
    }

    pub(crate) fn transfer(
        &mut self,
        conn: ConnKey,
        source: SessionId,
        target: &str,
        credential: Bytes,
    ) -> Vec<Output> {
        self.send(
            conn,
            ControlMessage::SessionTransferRequest(SessionTransferRequest {
                source_session_id: source,
                target_fay_id: target.into(),
                target_credential: credential,
                handover_reason: "test".into(),
                handover_metadata: BTreeMap::new(),
            }),
        )
    }

    /// Moves virtual time forward by `ms`, stopping at every deadline the
    /// terminal announces on the way (as the control thread would).
    pub(crate) fn advance(&mut self, ms: u64) -> Vec<Output> {
        let target = self.now.plus(ms);
        let mut out = Vec::new();
        while let Some(t) = self.t.poll_timeout().filter(|t| *t <= target) {
            self.now = self.now.max(t);
            self.t.handle_timeout(self.now);
            out.extend(self.drain());
        }
        self.now = target;
        out
    }

    /// Drains the outputs, checking SPEC HO-4 on the observer stream after
    /// every state change.
    pub(crate) fn drain(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        while let Some(o) = self.t.poll_output() {
            if let Output::StateChanged(c) = &o {
                if c.to == SessionState::Terminated {
                    self.mirror.remove(&c.session_id);
                } else {
                    self.mirror.insert(
                        c.session_id,
                        (c.resource_id.to_string(), c.access_mode, c.to),
                    );
                }
                self.check_observed();
            }
            out.push(o);
        }
        self.log.extend(out.iter().cloned());
        out
    }

    fn check_observed(&self) {
        let mut per: BTreeMap<&str, Vec<AccessMode>> = BTreeMap::new();
        for (r, m, s) in self.mirror.values() {
            if crate::session::is_controlling(*s) {
                per.entry(r.as_str()).or_default().push(*m);
            }
        }
        for (r, modes) in per {
            let exclusive = modes.iter().filter(|m| is_exclusive(**m)).count();
            assert!(
                exclusive == 0 || modes.len() == 1,
                "HO-4: {r} observed with controllers {modes:?}"
            );
        }
    }

    /// The messages sent to `conn` among `out`.
    pub(crate) fn sent(out: &[Output], conn: ConnKey) -> Vec<ControlMessage> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send { conn: c, msg } if *c == conn => Some(msg.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn state(&self, id: SessionId) -> Option<SessionState> {
        self.t.session(id).map(|s| s.state)
    }
}

/// The control thread owns the terminal: it must be `Send`.
#[test]
fn terminal_is_send() {
    fn send<T: Send>() {}
    send::<Terminal<ScriptedAccess>>();
    send::<Terminal<crate::NoopAccess>>();
}

/// The outcome of the AuthResult for `request_id` sent to `conn`.
pub(crate) fn auth_result(out: &[Output], conn: ConnKey, request_id: u64) -> Option<AuthOutcome> {
    Harness::sent(out, conn).into_iter().find_map(|m| match m {
        ControlMessage::AuthResult(r) if r.request_id == request_id => Some(r.outcome),
        _ => None,
    })
}

/// The codes of the refusals among `out`.
pub(crate) fn refusals(out: &[Output]) -> Vec<dtp_codec::ErrorCode> {
    out.iter()
        .filter_map(|o| match o {
            Output::Refused { refusal, .. } => Some(refusal.code),
            _ => None,
        })
        .collect()
}

/// The code of a refused AuthResult.
pub(crate) fn refused_code(outcome: Option<AuthOutcome>) -> dtp_codec::ErrorCode {
    match outcome {
        Some(AuthOutcome::Refused { code, .. }) => code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The (new_state, reason) of every SessionStateChanged among `msgs`.
pub(crate) fn state_changes(msgs: &[ControlMessage]) -> Vec<(SessionState, Option<String>)> {
    msgs.iter()
        .filter_map(|m| match m {
            ControlMessage::SessionStateChanged(c) => Some((c.new_state, c.reason.clone())),
            _ => None,
        })
        .collect()
}

/// The audit records among `out`.
pub(crate) fn audits(out: &[Output]) -> Vec<crate::AuditRecord> {
    out.iter()
        .filter_map(|o| match o {
            Output::Audit(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}
