//! SPEC HO-1, HO-4 across gateways: a handover whose source session is on
//! one gateway and whose target Fay asks on another.
//!
//! With a shared occupancy ([`OsAccess::shared`]), an AuthRequest whose
//! grant finds the resource held on another gateway does not end in
//! E_RESOURCE_BUSY when the resource's policy lets AuthRequests start
//! handovers: the target's gateway (here, "B") asks the holder's
//! ([`Output::AskRemote`]; the driver carries it), and waits, bounded by
//! the policy's hard timeout plus [`REMOTE_SLACK_MS`].
//!
//! The holder's gateway ("A") takes the question as an AuthRequest of its
//! own ([`Terminal::remote_handover`]): the same source rule, HO-6 queue,
//! HO-8 limits, target validation, policy and HO-7 deadline. After T2 — the
//! source revoked, its cluster entry turned into a reservation for the
//! target — it answers [`RemoteAnswer::Released`] instead of granting the
//! target itself (T3 … T5 are the target's gateway's); any failure answers
//! [`RemoteAnswer::Refused`] with the code its AuthResult would carry.
//!
//! Back on B ([`Terminal::remote_answered`]), `Released` runs the
//! AuthRequest again — its grant takes the reservation over — and
//! `Refused` answers the target's AuthRequest with that code. B never asks
//! twice for one AuthRequest, so a resource taken by someone else meanwhile
//! ends in E_RESOURCE_BUSY, as without a cluster.

use bytes::Bytes;
use dtp_codec::{AccessMode, AuthOutcome, AuthRequest, ErrorCode, Terms};
use uuid::Uuid;

use super::Terminal;
use super::handover::{HandoverRequest, Origin};
use crate::os_access::OsAccess;
use crate::output::{ConnKey, Output, Refusal, RequestKind};
use crate::time::{UnixMs, handover_id};

/// AuthRequests waiting for another gateway's answer, at most; more are
/// refused E_RESOURCE_BUSY at once.
pub const MAX_REMOTE_WAITS: usize = 1_024;
/// What a waiting AuthRequest allows beyond the policy's hard timeout for
/// the two gateways' messages, ms.
pub const REMOTE_SLACK_MS: u64 = 2_000;

/// SPEC HO-1 across gateways: a handover asked of the gateway that holds
/// the resource, for a target Fay connected to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteHandover {
    /// Names the question; the answer carries it back.
    pub id: Uuid,
    /// The resource.
    pub resource_id: String,
    /// The mode asked (the source must hold it in the same, exclusively).
    pub access_mode: AccessMode,
    /// The target Fay.
    pub target_fay_id: String,
    /// The target's credential, as its AuthRequest carried it (the holder's
    /// gateway verifies it: HO-2 (2)).
    pub target_credential: Bytes,
}

/// How the holder's gateway answered a [`RemoteHandover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteAnswer {
    /// T2 done: the source has ended and the resource is kept for the
    /// target, whose gateway grants it now (T3 … T5).
    Released,
    /// The handover did not happen; the target's AuthResult carries this.
    Refused {
        /// The E_* code.
        code: ErrorCode,
        /// Why, for people.
        message: String,
    },
}

/// An AuthRequest waiting for another gateway's answer.
#[derive(Clone, Debug)]
pub(crate) struct RemoteWait {
    pub(crate) conn: ConnKey,
    pub(crate) request: AuthRequest,
    pub(crate) deadline: UnixMs,
}

/// [`Terminal::remote_answered`] for a question not waiting (answered
/// already, timed out, or never asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no AuthRequest waits for that remote handover")]
pub struct UnknownRemote;

impl<A: OsAccess> Terminal<A> {
    /// On the target's gateway: the AuthRequest `req` found its resource
    /// held on another gateway; ask that one to hand it over.
    pub(crate) fn ask_remote(&mut self, conn: ConnKey, req: AuthRequest, now: UnixMs) {
        if self.remote_waits.len() >= MAX_REMOTE_WAITS {
            let message = format!(
                "resource {:?} is held on another gateway, and {MAX_REMOTE_WAITS} requests already wait for one",
                req.resource_id
            );
            let outcome = AuthOutcome::Refused {
                code: ErrorCode::E_RESOURCE_BUSY,
                message,
            };
            return self.auth_result(conn, req.request_id, outcome);
        }
        let id = handover_id(self.random.as_mut());
        let timeout = self
            .resources
            .get(req.resource_id.as_str())
            .and_then(|r| r.config().handover_policy.as_ref())
            .and_then(|p| self.config.policies.get(p))
            .map_or(0, crate::config::HandoverPolicyConfig::hard_timeout);
        self.out.push_back(Output::AskRemote(RemoteHandover {
            id,
            resource_id: req.resource_id.clone(),
            access_mode: req.access_mode,
            target_fay_id: req.fay_id.clone(),
            target_credential: req.credential.clone(),
        }));
        let deadline = now.plus(timeout + REMOTE_SLACK_MS);
        self.remote_waits.insert(
            id,
            RemoteWait {
                conn,
                request: req,
                deadline,
            },
        );
    }

    /// SPEC HO-1 across gateways, on the target's gateway: the holder's
    /// gateway answered question `id`. `Released`: the AuthRequest runs
    /// again and takes the kept resource; `Refused`: its AuthResult
    /// carries the refusal.
    pub fn remote_answered(
        &mut self,
        id: Uuid,
        answer: RemoteAnswer,
        now: UnixMs,
    ) -> Result<(), UnknownRemote> {
        self.begin(now);
        let found = self.remote_waits.remove(&id);
        if let Some(w) = found.clone() {
            match answer {
                RemoteAnswer::Released if self.conns.contains_key(&w.conn) => {
                    self.auth_request(w.conn, w.request, now, false, false);
                }
                RemoteAnswer::Released => {
                    // The target's connection is gone: its AuthResult has
                    // nowhere to go, and the reservation runs out.
                }
                RemoteAnswer::Refused { code, message } => {
                    let outcome = AuthOutcome::Refused { code, message };
                    self.auth_result(w.conn, w.request.request_id, outcome);
                }
            }
        }
        self.end();
        found.map(|_| ()).ok_or(UnknownRemote)
    }

    /// SPEC HO-1 across gateways, on the holder's gateway: another
    /// gateway's target asks for a resource held here. Answered with
    /// [`Output::AnswerRemote`], now (refused) or when the handover ends.
    pub fn remote_handover(&mut self, ask: RemoteHandover, now: UnixMs) {
        self.begin(now);
        let source = self.handover_source_of(&ask.resource_id, ask.access_mode, &ask.target_fay_id);
        let result = match source {
            Some(source) => {
                let req = HandoverRequest {
                    origin: Origin::Remote { id: ask.id },
                    source,
                    target_fay_id: ask.target_fay_id,
                    target_credential: ask.target_credential,
                    reason: "auth_request".into(),
                    metadata: Terms::new(),
                };
                self.request_handover(req, now, false).map(|_| ())
            }
            None => Err(Refusal::new(
                RequestKind::AuthRequest,
                None,
                ErrorCode::E_RESOURCE_BUSY,
                format!(
                    "resource {:?} has no session here that this request may take over (SPEC HO-1)",
                    ask.resource_id
                ),
            )),
        };
        if let Err(r) = result {
            self.answer_remote(ask.id, r.code, r.message);
        }
        self.end();
    }

    /// Answers question `id` with a refusal.
    pub(crate) fn answer_remote(&mut self, id: Uuid, code: ErrorCode, message: String) {
        let answer = RemoteAnswer::Refused { code, message };
        self.out.push_back(Output::AnswerRemote { id, answer });
    }

    /// SPEC HO-7 for the waits: an AuthRequest whose question was not
    /// answered in time is refused.
    pub(crate) fn expire_remote_waits(&mut self, now: UnixMs) {
        let late: Vec<Uuid> = self
            .remote_waits
            .iter()
            .filter(|(_, w)| w.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            if let Some(w) = self.remote_waits.remove(&id) {
                let outcome = AuthOutcome::Refused {
                    code: ErrorCode::E_HANDOVER_TIMEOUT,
                    message: "the gateway holding the resource did not answer in time (SPEC HO-7)"
                        .into(),
                };
                self.auth_result(w.conn, w.request.request_id, outcome);
            }
        }
    }

    /// The earliest deadline of a waiting AuthRequest.
    pub(crate) fn next_remote_deadline(&self) -> Option<UnixMs> {
        self.remote_waits.values().map(|w| w.deadline).min()
    }

    /// Whether an AuthRequest for `resource_id` refused for a holder on
    /// another gateway should ask that gateway to hand it over.
    pub(crate) fn may_ask_remote(&self, resource_id: &str) -> bool {
        self.access.shared()
            && self
                .resources
                .get(resource_id)
                .and_then(|r| r.config().handover_policy.as_ref())
                .and_then(|p| self.config.policies.get(p))
                .is_some_and(|p| p.on_auth_request)
    }
}
