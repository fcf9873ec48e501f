//! The gateway's service: what `dtp serve` runs on every core shard today.
//!
//! It speaks the benchmark protocol of `dtp_bench::workload` through the
//! very `Responder` the tokio peer uses, so a comparison measures the two
//! IO paths and not two implementations. The DTP protocol proper (CAP,
//! agreements, encryption, resume) plugs in here with issue 4.

use std::time::Instant;

use dtp_bench::workload::{Responder, WorkloadError};
use dtp_codec::{ControlMessage, ErrorCode, HeartbeatAck, Limits, LogicalFrame};
use dtp_engine::{ControlPlane, Decision, Origin, Outbox, Request, Service};
use dtp_transports::ConnId;

/// One shard's gateway.
pub(crate) struct Gateway {
    pub(crate) limits: Limits,
}

impl Service for Gateway {
    type Conn = Responder;

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) -> Responder {
        Responder::new(self.limits)
    }

    fn frame(
        &mut self,
        r: &mut Responder,
        frame: LogicalFrame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        match r.handle(frame) {
            Ok(Some(reply)) => out.send(&reply),
            Ok(None) => Ok(()),
            Err(WorkloadError::Unexpected { .. }) => Err(ErrorCode::UNKNOWN_KIND),
            Err(_) => Err(ErrorCode::INVALID_VALUE),
        }
    }
}

/// The gateway's control plane when no terminal is configured: it
/// acknowledges heartbeats at once with the same session ids and sequence
/// numbers (the ack half of SPEC LIV-2) and refuses every other control
/// message with a close frame that says so.
pub(crate) struct MinimalControl;

impl ControlPlane for MinimalControl {
    fn handle(
        &mut self,
        shard: usize,
        request: Request,
        _now: Instant,
        out: &mut Vec<(usize, Decision)>,
    ) {
        let Request::Message { conn, msg } = request else {
            return;
        };
        let decision = match *msg {
            ControlMessage::Heartbeat(h) => Decision::Send {
                conn,
                msg: Box::new(ControlMessage::HeartbeatAck(HeartbeatAck {
                    beats: h.beats,
                })),
            },
            other => Decision::Close {
                conn,
                code: ErrorCode::UNKNOWN_KIND,
                reason: format!("{} is not served by this gateway yet", other.name()),
            },
        };
        out.push((shard, decision));
    }
}
