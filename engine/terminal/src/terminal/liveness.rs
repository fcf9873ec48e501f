//! SPEC LIV-1 … LIV-6: connections, heartbeats and the dual judgment.
//!
//! Choices:
//! - **LIV-6, declared**: the aggregated heartbeat is supported — one
//!   Heartbeat may carry beats for many sessions; the HeartbeatAck carries
//!   the accepted ones, in order, and each refused beat gets its own
//!   [`crate::Output::Refused`]. The low-frequency option needs nothing
//!   here: any interval up to 60 s is accepted as long as the threshold is
//!   not crossed.
//! - **Binding**: a session is bound to the connection that created it. A
//!   heartbeat (or a release or transfer request) for it on another
//!   connection that speaks for the same Fay — learned from a verified
//!   AuthRequest or from [`crate::Terminal::identify`] — rebinds it there:
//!   the session follows its runtime's latest connection. A connection that
//!   does not speak for the Fay gets E_UNAUTHORIZED and changes nothing.
//! - **Dual judgment (LIV-4)**: a session dies only when its connection has
//!   been down longer than the threshold AND its last heartbeat is older
//!   than the threshold. A connection that stays up keeps a silent session
//!   alive: the seed's stuck-Fay case is left to the runtime and to admins
//!   (`force_terminate`), because LIV-4's MUST allows no other reading.
//! - **Equal sequence numbers** are accepted and acked again (a retransmit);
//!   only a lower one is a replay (LIV-3).

use dtp_codec::{Beat, ControlMessage, ErrorCode, Heartbeat, HeartbeatAck, SessionState};

use super::handover::{HandoverPhase, Origin};
use super::{Binding, Terminal, state_changed};
use crate::os_access::OsAccess;
use crate::output::{ConnKey, Refusal, RequestKind};
use crate::time::UnixMs;

/// SPEC LIV-4: dead iff the connection has been down longer than
/// `threshold` AND the last heartbeat is older than `threshold` (both
/// strictly).
pub(crate) fn is_dead(
    down_since: Option<UnixMs>,
    last_heartbeat_at: UnixMs,
    now: UnixMs,
    threshold: u64,
) -> bool {
    down_since.is_some_and(|d| now.since(d) > threshold) && now.since(last_heartbeat_at) > threshold
}

/// SPEC LIV-4: the first instant [`is_dead`] holds for a connection down
/// since `down_since` (no heartbeat arriving meanwhile).
pub(crate) fn dead_at(down_since: UnixMs, last_heartbeat_at: UnixMs, threshold: u64) -> UnixMs {
    down_since.max(last_heartbeat_at).plus(threshold).plus(1)
}

impl<A: OsAccess> Terminal<A> {
    /// SPEC LIV-1: a connection is down. Its sessions start their liveness
    /// clock (they do not end: LIV-1), and AuthRequest-started handovers
    /// whose target was on it are dropped while their policy decides
    /// (nobody is left to answer); one already in its OS steps goes on, its
    /// target session detached.
    pub fn connection_down(&mut self, conn: ConnKey, now: UnixMs) {
        self.begin(now);
        self.conns.remove(&conn);
        self.last_conn_of.retain(|_, c| *c != conn);
        let mut detached = Vec::new();
        for rec in self.sessions.values_mut() {
            if rec.binding == Binding::Conn(conn) {
                rec.binding = Binding::Detached(now);
                detached.push(rec.id);
            }
        }
        for id in detached {
            // Its liveness clock starts: a deadline earlier than any it had.
            self.arm(id);
        }
        let from_conn = |o: &Origin| matches!(o, Origin::Auth { conn: c, .. } if *c == conn);
        for queue in self.queues.values_mut() {
            queue.retain(|r| !from_conn(&r.origin));
        }
        let gone: Vec<String> = self
            .evaluations
            .iter()
            .filter(|(_, e)| from_conn(&e.request.origin) && e.phase == HandoverPhase::Deciding)
            .map(|(r, _)| r.clone())
            .collect();
        for resource in gone {
            self.fail_evaluation(
                &resource,
                ErrorCode::E_HANDOVER_INVALID_TARGET,
                None,
                "the target's connection closed".into(),
                true,
                now,
            );
        }
        self.end();
    }

    /// SPEC LIV-2, LIV-3, LIV-6: one (possibly aggregated) heartbeat.
    pub(crate) fn on_heartbeat(&mut self, conn: ConnKey, hb: Heartbeat, now: UnixMs) {
        let mut acked = Vec::with_capacity(hb.beats.len());
        for beat in hb.beats {
            match self.beat(conn, beat, now) {
                Ok(()) => acked.push(beat),
                Err(r) => self.refuse(conn, r),
            }
        }
        if !acked.is_empty() {
            let ack = ControlMessage::HeartbeatAck(HeartbeatAck { beats: acked });
            self.send(Some(conn), ack);
        }
    }

    fn beat(&mut self, conn: ConnKey, beat: Beat, now: UnixMs) -> Result<(), Refusal> {
        let id = beat.session_id;
        let refuse = |code, m: String| Refusal::new(RequestKind::Heartbeat, Some(id), code, m);
        if let Some(rec) = self.sessions.get(&id) {
            if !self.may_act(conn, rec.holder.id(), rec.conn()) {
                return Err(refuse(
                    ErrorCode::E_UNAUTHORIZED,
                    "this connection does not speak for the session's Fay".into(),
                ));
            }
            if !matches!(
                rec.state,
                SessionState::Active | SessionState::HandoverPending
            ) {
                return Err(refuse(
                    ErrorCode::E_SESSION_TERMINATED,
                    "the session is terminating (SPEC LIV-5)".into(),
                ));
            }
            if let Some(max) = rec.max_seq
                && beat.sequence_number < max
            {
                return Err(refuse(
                    ErrorCode::E_HEARTBEAT_REPLAY,
                    format!(
                        "sequence number {} is below {max} (SPEC LIV-3)",
                        beat.sequence_number
                    ),
                ));
            }
            if let Some(rec) = self.sessions.get_mut(&id) {
                rec.max_seq = Some(beat.sequence_number);
                rec.last_heartbeat_at = now;
                rec.binding = Binding::Conn(conn);
            }
            return Ok(());
        }
        if let Some(t) = self.tombstones.get(&id) {
            // LIV-5: the session stays dead; its runtime may hear why, once.
            if !t.notified && self.speaks_for(conn, &t.fay_id) {
                let msg = state_changed(id, SessionState::Terminated, Some(t.reason));
                if let Some(t) = self.tombstones.get_mut(&id) {
                    t.notified = true;
                }
                self.send(Some(conn), ControlMessage::SessionStateChanged(msg));
            }
            return Err(refuse(
                ErrorCode::E_SESSION_TERMINATED,
                "the session has ended (SPEC LIV-5)".into(),
            ));
        }
        Err(refuse(
            ErrorCode::E_SESSION_NOT_FOUND,
            "no such session".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const T: u64 = 30_000;

    /// LIV-4's four combinations, just past the threshold and just at it.
    #[test]
    fn dual_judgment_truth_table() {
        let now = UnixMs(1_000_000);
        let old = UnixMs(now.0 - T - 1);
        let fresh = UnixMs(now.0 - T);
        for (down, hb, dead) in [
            (None, fresh, false),      // connection up, heartbeat fresh
            (None, old, false),        // connection up, heartbeat old
            (Some(old), fresh, false), // connection down long, heartbeat fresh
            (Some(old), old, true),    // both: dead
            (Some(fresh), old, false), // down exactly the threshold: not longer
        ] {
            assert_eq!(is_dead(down, hb, now, T), dead, "{down:?} {hb:?}");
        }
    }

    proptest! {
        #[test]
        fn dead_at_is_the_first_dead_instant(
            down in 0u64..1_000_000, hb in 0u64..1_000_000, now in 0u64..2_000_000,
        ) {
            let at = dead_at(UnixMs(down), UnixMs(hb), T);
            prop_assert_eq!(is_dead(Some(UnixMs(down)), UnixMs(hb), UnixMs(now), T), now >= at.0);
        }
    }
}
