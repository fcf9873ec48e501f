//! Checks on the messages the terminal sends to runtimes: SessionStateChanged
//! (TS-15, LIV-5, HO-10), AuthResult (TS-5, TS-6, SEQ-1) and the rest.

use dtp_codec::{AuthOutcome, ControlMessage, SessionId, SessionState};
use dtp_terminal::{ConnKey, Output, ResourceInfo};

use super::notify::{CallLog, Ctx, ts15_listed};
use super::world::World;

impl World {
    /// One message to a runtime.
    pub(super) fn on_send(
        &mut self,
        ctx: &Ctx,
        conn: ConnKey,
        msg: &ControlMessage,
        prev: Option<&Output>,
        resources: Option<&[ResourceInfo]>,
        log: &mut CallLog,
    ) {
        let Some(fay) = self.fay_on(conn) else {
            self.violation(format!(
                "{} sent to connection {}, which is down",
                msg.name(),
                conn.0
            ));
            return;
        };
        match msg {
            ControlMessage::SessionStateChanged(m) => {
                self.on_state_message(ctx, conn, fay, m, prev)
            }
            ControlMessage::AuthResult(r) => {
                self.on_auth_result(ctx, conn, fay, r.request_id, &r.outcome, resources, log);
            }
            ControlMessage::HeartbeatAck(_) => {
                if !matches!(ctx, Ctx::Heartbeat { conn: c, .. } if *c == conn) {
                    self.violation("LIV-2: HeartbeatAck without a heartbeat".into());
                }
            }
            ControlMessage::HandoverFailedNotification(h) => {
                let open = self.watch.handovers.get(&h.handover_id);
                let matches = open.is_some_and(|o| {
                    o.source == h.source_session_id && o.target == h.target_fay_id
                });
                if !matches {
                    self.violation(format!(
                        "HO-7: HandoverFailedNotification for {} matches no open handover",
                        h.handover_id
                    ));
                }
            }
            other => self.violation(format!(
                "the terminal sent {}, which only runtimes send",
                other.name()
            )),
        }
    }

    /// SPEC TS-15, LIV-5, HO-10: a SessionStateChanged.
    fn on_state_message(
        &mut self,
        ctx: &Ctx,
        conn: ConnKey,
        fay: usize,
        m: &dtp_codec::SessionStateChanged,
        prev: Option<&Output>,
    ) {
        let id = m.session_id;
        let fay_id = self.fays.get(fay).map(|f| f.id.clone()).unwrap_or_default();
        let holder = self
            .watch
            .mirror
            .get(&id)
            .map(|m| m.fay.clone())
            .or_else(|| self.watch.ended.get(&id).map(|e| e.0.clone()));
        if holder.as_deref() != Some(fay_id.as_str()) {
            self.violation(format!(
                "TS-15: SessionStateChanged for {id} (held by {holder:?}) sent to {fay_id}'s connection"
            ));
        }
        match prev {
            Some(Output::StateChanged(c)) if c.session_id == id && c.to == m.new_state => {
                if !ts15_listed(c.from, c.to) {
                    self.violation(format!(
                        "TS-15: SessionStateChanged sent on {:?} -> {} of {id}",
                        c.from,
                        c.to.name()
                    ));
                }
                if m.reason.as_deref() != c.reason.map(|r| r.as_str()) {
                    self.violation(format!(
                        "TS-15: SessionStateChanged for {id} says reason {:?}, observers {:?}",
                        m.reason, c.reason
                    ));
                }
            }
            Some(Output::Send {
                conn: c,
                msg: ControlMessage::AuthResult(r),
            }) if *c == conn
                && r.outcome == (AuthOutcome::Granted { session_id: id })
                && m.new_state == SessionState::Active => {}
            _ => self.check_state_reply(ctx, conn, m),
        }
        if m.new_state == SessionState::Terminated
            && let Some(f) = self.fays.get_mut(fay)
        {
            f.forget(id);
        }
    }

    /// A SessionStateChanged that is no transition: the answer to a
    /// release of an ended session (TS-13) or LIV-5's one message.
    fn check_state_reply(&mut self, ctx: &Ctx, conn: ConnKey, m: &dtp_codec::SessionStateChanged) {
        let id = m.session_id;
        let current = match self.watch.mirror.get(&id) {
            Some(s) => Some(s.state),
            None => self
                .watch
                .ended
                .contains_key(&id)
                .then_some(SessionState::Terminated),
        };
        match ctx {
            Ctx::Release { conn: c, id: s } if *c == conn && *s == id => {
                let ok = current == Some(m.new_state)
                    && matches!(
                        m.new_state,
                        SessionState::Terminating | SessionState::Terminated
                    );
                if !ok {
                    self.violation(format!(
                        "TS-13: release of {id} answered {} while it is {current:?}",
                        m.new_state.name()
                    ));
                }
            }
            Ctx::Heartbeat { conn: c, beats }
                if *c == conn && beats.iter().any(|b| b.session_id == id) =>
            {
                let first = self.watch.liv5_told.insert(id);
                if !first
                    || m.new_state != SessionState::Terminated
                    || current != m.new_state.into()
                {
                    self.violation(format!(
                        "LIV-5: SessionStateChanged {} for {id} after a heartbeat (first: {first})",
                        m.new_state.name()
                    ));
                }
            }
            _ => self.violation(format!(
                "TS-15: SessionStateChanged {} for {id} on no transition (input {ctx:?})",
                m.new_state.name()
            )),
        }
    }

    /// SPEC TS-5, TS-6, SEQ-1: an AuthResult answers an outstanding
    /// request of that connection; a bad credential is never granted.
    #[allow(clippy::too_many_arguments, reason = "one call site, all needed")]
    fn on_auth_result(
        &mut self,
        ctx: &Ctx,
        conn: ConnKey,
        fay: usize,
        request_id: u64,
        outcome: &AuthOutcome,
        resources: Option<&[ResourceInfo]>,
        log: &mut CallLog,
    ) {
        if request_id == 0 {
            match outcome {
                AuthOutcome::Granted { session_id } => {
                    log.unsolicited.push(*session_id);
                    self.learn_session(fay, *session_id);
                }
                AuthOutcome::Refused { .. } => {
                    self.violation("AuthResult refused with request_id 0".into());
                }
            }
            return;
        }
        let Some(req) = self.watch.outstanding.remove(&(conn, request_id)) else {
            self.violation(format!(
                "AuthResult for request {request_id} on connection {}, which is not outstanding",
                conn.0
            ));
            return;
        };
        let now = self.now;
        let bad = self
            .creds
            .get(req.cred)
            .and_then(|c| c.refusal(req.fay, &req.resource, req.mode, now));
        match outcome {
            AuthOutcome::Granted { session_id } => {
                self.report.bump("auth.granted");
                let live = self.watch.mirror.get(session_id);
                let fine = live.is_some_and(|m| {
                    m.state == SessionState::Active
                        && m.resource == req.resource
                        && m.mode == req.mode
                        && self.fays.get(fay).is_some_and(|f| f.id == m.fay)
                });
                if !fine || req.fay != fay {
                    self.violation(format!(
                        "TS-6: AuthResult grants {session_id}, which is not an active session of the request"
                    ));
                }
                if let Some(code) = bad {
                    self.violation(format!(
                        "SEQ-1/TS-16: {session_id} granted on a credential that must be refused with {code}"
                    ));
                }
                self.watch.session_creds.insert(*session_id, vec![req.cred]);
                self.learn_session(fay, *session_id);
            }
            AuthOutcome::Refused { code, .. } => {
                self.report.bump("auth.refused");
                self.report.bump(&format!("auth.refused.{code}"));
                let immediate = matches!(ctx, Ctx::Auth { request_id: r, .. } if *r == request_id);
                let Some(view) = resources.filter(|_| immediate) else {
                    return;
                };
                let Some(res) = view.iter().find(|r| r.resource_id == req.resource) else {
                    return;
                };
                if !res.available {
                    return;
                }
                if let Some(want) = bad
                    && *code != want
                {
                    self.violation(format!(
                        "SEQ-1: a credential that must be refused with {want} was refused with {code}"
                    ));
                }
                let reads = self.config.limits.reads_per_resource;
                if bad.is_none()
                    && *code == dtp_codec::ErrorCode::E_RESOURCE_BUSY
                    && super::checks::admits(res, req.mode, reads)
                {
                    self.violation(format!(
                        "TS-8/TS-9: {} refused busy for {} though its occupancy {:?} admits it (occupancy without a live session?)",
                        req.resource,
                        req.mode.name(),
                        res.occupancy
                    ));
                }
            }
        }
    }

    /// A runtime learns a session it was granted.
    fn learn_session(&mut self, fay: usize, id: SessionId) {
        if let Some(f) = self.fays.get_mut(fay) {
            f.known.insert(id, super::world::Known::default());
        }
    }
}
