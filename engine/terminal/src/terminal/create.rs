//! SPEC TS-5 … TS-9, TS-17: AuthRequest handling and session creation.

use std::sync::Arc;

use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, ControlMessage, ErrorCode, SessionId,
    SessionState, Terms,
};

use super::handover::{HandoverRequest, Origin};
use super::os_ops::{Purpose, Wait};
use super::{Binding, Holder, SessionRecord, Terminal};
use crate::audit::{AuditRecord, SessionAudit};
use crate::config::HUMAN_PREFIX;
use crate::occupancy::{OccupancyError, is_exclusive};
use crate::os_access::OsAccess;
use crate::output::{ConnKey, Output, Refusal, RequestKind, StateChange};
use crate::session::{SessionEvent, TerminationReason};
use crate::time::{UnixMs, session_id};

/// How many fresh ids are tried before giving up on a colliding random
/// source.
const MINT_TRIES: usize = 4;

/// What a new session is for (SPEC TS-6 step 4).
pub(crate) struct NewSession {
    pub(crate) holder: Holder,
    pub(crate) resource_id: Arc<str>,
    pub(crate) mode: AccessMode,
    pub(crate) binding: Binding,
}

impl<A: OsAccess> Terminal<A> {
    /// SPEC TS-5: an AuthRequest. Answers with an AuthResult now, or — when
    /// it starts a handover (HO-1) — when the handover ends. `queued`: the
    /// request comes back from the HO-6 queue.
    pub(crate) fn on_auth_request(
        &mut self,
        conn: ConnKey,
        req: AuthRequest,
        now: UnixMs,
        queued: bool,
    ) {
        self.auth_request(conn, req, now, queued, true);
    }

    /// As [`Terminal::on_auth_request`]; `ask_remote`: a resource held on
    /// another gateway may be asked of it (module `remote`) — not for a
    /// request that already asked.
    pub(crate) fn auth_request(
        &mut self,
        conn: ConnKey,
        req: AuthRequest,
        now: UnixMs,
        queued: bool,
        ask_remote: bool,
    ) {
        let request_id = req.request_id;
        let outcome = match self.authorise(conn, req, now, (queued, ask_remote)) {
            Ok(Some(session_id)) => AuthOutcome::Granted { session_id },
            Ok(None) => return,
            Err(r) => AuthOutcome::Refused {
                code: r.code,
                message: r.message,
            },
        };
        let msg = ControlMessage::AuthResult(AuthResult {
            request_id,
            outcome,
        });
        self.send(Some(conn), msg);
    }

    /// SPEC TS-5 … TS-9: credential, grant, limits, occupancy; then a new
    /// session, or a handover of the held resource (`Ok(None)`).
    fn authorise(
        &mut self,
        conn: ConnKey,
        req: AuthRequest,
        now: UnixMs,
        (queued, ask_remote): (bool, bool),
    ) -> Result<Option<SessionId>, Refusal> {
        let refuse = |code, msg: String| Refusal::new(RequestKind::AuthRequest, None, code, msg);
        let Some(resource) = self.resources.get(req.resource_id.as_str()) else {
            return Err(refuse(
                ErrorCode::E_RESOURCE_UNKNOWN,
                format!("this terminal has no resource {:?}", req.resource_id),
            ));
        };
        if !resource.is_available() {
            return Err(refuse(
                ErrorCode::E_RESOURCE_UNAVAILABLE,
                format!("resource {:?} is unavailable (SPEC TS-10)", req.resource_id),
            ));
        }
        if req.fay_id.starts_with(HUMAN_PREFIX) {
            return Err(refuse(
                ErrorCode::E_UNAUTHORIZED,
                "a runtime cannot ask as the human user (SPEC HO-9)".into(),
            ));
        }
        let cred = self
            .signatures
            .verify_bytes(&self.verifier, &req.credential, now.secs())
            .map_err(|e| refuse(e.code(), e.to_string()))?;
        if cred.fay_id() != req.fay_id {
            return Err(refuse(
                ErrorCode::E_UNAUTHORIZED,
                format!(
                    "the credential names Fay {:?}, not {:?}",
                    cred.fay_id(),
                    req.fay_id
                ),
            ));
        }
        if !cred.permits(&req.resource_id, req.access_mode) {
            return Err(refuse(
                ErrorCode::E_UNAUTHORIZED,
                format!(
                    "the credential does not grant {} on {:?}",
                    req.access_mode.name(),
                    req.resource_id
                ),
            ));
        }
        self.learn(conn, &req.fay_id);
        self.check_limits(&req.fay_id)
            .map_err(|m| refuse(ErrorCode::E_SESSION_LIMIT_EXCEEDED, m))?;
        match self.admit(&req.resource_id, req.access_mode) {
            Ok(()) => {
                // Kept only where another gateway may be asked (a cluster).
                let remote = (ask_remote && self.may_ask_remote(&req.resource_id))
                    .then(|| Box::new(req.clone()));
                // The request's ids move into the session (no copies).
                let spec = NewSession {
                    holder: Holder::Fay(self.shared_fay_id(req.fay_id), cred),
                    // The configured resource's id, shared (it was admitted,
                    // so it is there).
                    resource_id: self
                        .resources
                        .get_key_value(req.resource_id.as_str())
                        .map_or_else(|| req.resource_id.as_str().into(), |(id, _)| id.clone()),
                    mode: req.access_mode,
                    binding: Binding::Conn(conn),
                };
                // The AuthResult follows the grant's answer (`os_ops`).
                let purpose = Purpose::Auth {
                    conn,
                    request_id: req.request_id,
                    remote,
                };
                self.create_session(spec, purpose, now)
                    .map(|()| None)
                    .map_err(|(code, m)| refuse(code, m))
            }
            Err(OccupancyError::Busy) => match self.handover_source(&req) {
                Some(source) => {
                    let request = HandoverRequest {
                        target_fay_id: req.fay_id.clone(),
                        target_credential: req.credential.clone(),
                        reason: "auth_request".into(),
                        metadata: Terms::new(),
                        source,
                        origin: Origin::Auth { conn, request: req },
                    };
                    self.request_handover(request, now, queued).map(|_| None)
                }
                None => Err(refuse(
                    ErrorCode::E_RESOURCE_BUSY,
                    format!(
                        "resource {:?} is held in a conflicting mode (SPEC TS-9)",
                        req.resource_id
                    ),
                )),
            },
            Err(e) => Err(refuse(e.code(), e.to_string())),
        }
    }

    /// SPEC HO-1: the session an AuthRequest for a busy resource would take
    /// over — when the resource's policy lets AuthRequests start handovers
    /// and one other Fay holds it exclusively, actively, in the same mode.
    fn handover_source(&self, req: &AuthRequest) -> Option<SessionId> {
        self.handover_source_of(&req.resource_id, req.access_mode, &req.fay_id)
    }

    /// As [`Terminal::handover_source`], for `fay_id` asking `resource_id`
    /// in `mode` (here, or on another gateway).
    pub(crate) fn handover_source_of(
        &self,
        resource_id: &str,
        mode: AccessMode,
        fay_id: &str,
    ) -> Option<SessionId> {
        let resource = self.resources.get(resource_id)?;
        let policy = resource.config().handover_policy.as_ref()?;
        if !self.config.policies.get(policy)?.on_auth_request {
            return None;
        }
        let mut occupants = resource.occupants().iter();
        let (id, held) = occupants.next()?;
        let rec = self.sessions.get(id)?;
        let only_one = occupants.next().is_none();
        (only_one
            && is_exclusive(*held)
            && *held == mode
            && rec.state == SessionState::Active
            && rec.holder.id() != fay_id)
            .then_some(*id)
    }

    /// SPEC TS-9, TS-17: may a session in `mode` join `resource_id` now?
    pub(crate) fn admit(&self, resource_id: &str, mode: AccessMode) -> Result<(), OccupancyError> {
        match self.resources.get(resource_id) {
            Some(r) => r.admit(mode, self.config.limits.reads_per_resource),
            None => Err(OccupancyError::Busy),
        }
    }

    /// SPEC TS-17: the per-terminal and per-Fay limits.
    pub(crate) fn check_limits(&self, holder: &str) -> Result<(), String> {
        let limits = self.config.limits;
        if self.sessions.len() >= limits.per_terminal {
            return Err(format!(
                "the terminal already has {} sessions (SPEC TS-17)",
                limits.per_terminal
            ));
        }
        let mine = self.per_holder.get(holder).map_or(0, |&n| n as usize);
        if mine >= limits.per_fay {
            return Err(format!(
                "{holder:?} already has {} sessions (SPEC TS-17)",
                limits.per_fay
            ));
        }
        Ok(())
    }

    /// SPEC TS-6, TS-7: limits and occupancy → id (UUID v7) → creating →
    /// OS grant → active. A failure before the grant returns its code;
    /// the grant's answer continues in `os_ops` (active, or rolled back:
    /// creating → terminating → terminated), which tells `purpose`.
    pub(crate) fn create_session(
        &mut self,
        spec: NewSession,
        purpose: Purpose,
        now: UnixMs,
    ) -> Result<(), (ErrorCode, String)> {
        self.check_limits(spec.holder.id())
            .map_err(|m| (ErrorCode::E_SESSION_LIMIT_EXCEEDED, m))?;
        self.admit(&spec.resource_id, spec.mode)
            .map_err(|e| (e.code(), e.to_string()))?;
        let id = self.mint(now)?;
        let rec = SessionRecord {
            id,
            holder: spec.holder,
            resource_id: spec.resource_id,
            mode: spec.mode,
            state: SessionState::Creating,
            binding: spec.binding,
            created_at: now,
            fencing: None,
            active_until: None,
            last_heartbeat_at: now,
            max_seq: None,
            reason: None,
            revoke_retry_at: None,
            announced: false,
        };
        let grant = rec.grant();
        self.out.push_back(Output::StateChanged(StateChange {
            session_id: id,
            fay_id: rec.holder.shared_id().clone(),
            resource_id: rec.resource_id.clone(),
            access_mode: rec.mode,
            from: None,
            to: SessionState::Creating,
            reason: None,
            at: now,
        }));
        if let Some(r) = self.resources.get_mut(&*rec.resource_id) {
            r.occupy(id, rec.mode);
        }
        self.count_holder(rec.holder.id(), true);
        self.sessions.insert(id, rec);
        let wait = Wait::Create {
            session: id,
            purpose: Some(purpose),
        };
        self.start_op(wait, grant, now);
        Ok(())
    }

    /// One session more (`added`) or fewer for `holder` in
    /// [`Terminal::per_holder`].
    fn count_holder(&mut self, holder: &str, added: bool) {
        match (self.per_holder.get_mut(holder), added) {
            (Some(n), true) => *n += 1,
            (Some(n), false) => *n = n.saturating_sub(1),
            (None, true) => {
                self.per_holder.insert(holder.to_owned(), 1);
            }
            (None, false) => {}
        }
        if self.per_holder.len() > 2 * self.sessions.len() + 1024 {
            self.per_holder.retain(|_, n| *n > 0);
        }
    }

    /// A fresh session id that no live or remembered session has.
    fn mint(&mut self, now: UnixMs) -> Result<SessionId, (ErrorCode, String)> {
        for _ in 0..MINT_TRIES {
            let id = session_id(now, self.random.as_mut());
            if !self.sessions.contains_key(&id) && !self.tombstones.contains_key(&id) {
                return Ok(id);
            }
        }
        Err((
            ErrorCode::INTERNAL,
            "the random source keeps repeating session ids".into(),
        ))
    }

    /// SPEC TS-12 steps 3, 5, 6 for a terminating session whose OS access is
    /// gone: leave the occupancy, reach terminated, write the audit record,
    /// and remember the session (LIV-5).
    pub(crate) fn release_records(&mut self, id: SessionId, now: UnixMs) {
        let Some(resource_id) = self.sessions.get(&id).map(|r| r.resource_id.clone()) else {
            return;
        };
        if let Some(r) = self.resources.get_mut(&*resource_id) {
            r.vacate(&id);
        }
        self.step(id, SessionEvent::ResourcesReleased, now);
        let Some(rec) = self.sessions.remove(&id) else {
            return;
        };
        self.count_holder(rec.holder.id(), false);
        let reason = rec.reason.unwrap_or(TerminationReason::Forced);
        self.out
            .push_back(Output::Audit(AuditRecord::SessionTerminated(
                SessionAudit {
                    session_id: id,
                    fay_id: rec.holder.shared_id().clone(),
                    resource_id: rec.resource_id.clone(),
                    access_mode: rec.mode,
                    reason,
                    created_at: rec.created_at,
                    terminated_at: now,
                    fencing: rec.fencing,
                    active_until: rec.active_until,
                },
            )));
        self.attempts.retain(|(source, _), _| *source != id);
        if rec.announced {
            self.remember(id, rec.holder.shared_id().clone(), reason);
        }
    }
}
