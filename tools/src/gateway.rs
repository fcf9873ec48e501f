//! The gateway's service: what `dtp serve` runs on every core shard today.
//!
//! It speaks the benchmark protocol of `dtp_workload::plain` through the
//! very `Responder` the tokio peer uses, so a comparison measures the two
//! IO paths and not two implementations. The DTP protocol proper (CAP,
//! agreements, encryption, resume) plugs in here with issue 4.

use std::time::Instant;

use dtp_codec::{Body, ControlMessage, ErrorCode, HeartbeatAck, Limits, LogicalFrame};
use dtp_engine::{
    Connections, ControlPlane, Decision, Frame, FrameService, Origin, Outbox, Request,
};
use dtp_gateway::app::{Decisions, GatewayDown, GatewayPlane, GatewayRequest, GatewayUp};
use dtp_transports::ConnId;
use dtp_workload::plain::{Responder, WorkloadError};

/// One shard's gateway.
pub(crate) struct Gateway {
    pub(crate) limits: Limits,
}

impl FrameService for Gateway {
    type Conn = (ConnId, Responder);
    type Up = GatewayUp;
    type Down = GatewayDown;

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_, GatewayUp>) -> Self::Conn {
        (conn, Responder::new(self.limits))
    }

    fn frame(
        &mut self,
        (conn, r): &mut Self::Conn,
        frame: Frame,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Result<(), ErrorCode> {
        let frame = frame.decode(out.limits()).map_err(|e| e.code())?;
        if let Body::Control(msg) = frame.body {
            // Control-plane messages (heartbeats) belong to the control
            // thread, which answers through `decision`.
            out.to_control(GatewayUp::Message {
                conn: *conn,
                msg: Box::new(msg),
            });
            return Ok(());
        }
        match r.handle(frame) {
            Ok(Some(reply)) => out.send(&reply),
            Ok(None) => Ok(()),
            Err(WorkloadError::Unexpected { .. }) => Err(ErrorCode::UNKNOWN_KIND),
            Err(_) => Err(ErrorCode::INVALID_VALUE),
        }
    }

    /// The control thread's messages go out as plain control frames.
    fn decision(
        &mut self,
        decision: GatewayDown,
        conns: &mut dyn Connections<Self::Conn, GatewayUp>,
    ) -> Option<GatewayDown> {
        let GatewayDown::Send { conn, msg } = decision else {
            return Some(decision);
        };
        let frame = LogicalFrame::plain(0, Body::Control(*msg));
        conns.visit(conn, &mut |_, out| {
            if let Err(code) = out.send(&frame) {
                tracing::warn!(?code, "a control message could not be queued");
            }
        });
        None
    }
}

/// The gateway's control plane when no terminal is configured: it
/// acknowledges heartbeats at once with the same session ids and sequence
/// numbers (the ack half of SPEC LIV-2) and refuses every other control
/// message with a close frame that says so.
pub(crate) struct MinimalControl;

impl GatewayPlane for MinimalControl {}

impl ControlPlane<GatewayUp, GatewayDown> for MinimalControl {
    fn handle(
        &mut self,
        shard: usize,
        request: GatewayRequest,
        _now: Instant,
        out: &mut Decisions,
    ) {
        let Request::Service(GatewayUp::Message { conn, msg }) = request else {
            return;
        };
        let decision = match *msg {
            ControlMessage::Heartbeat(h) => Decision::Service(GatewayDown::Send {
                conn,
                msg: Box::new(ControlMessage::HeartbeatAck(HeartbeatAck {
                    beats: h.beats,
                })),
            }),
            other => Decision::Close {
                conn,
                code: ErrorCode::UNKNOWN_KIND,
                reason: format!("{} is not served by this gateway yet", other.name()),
            },
        };
        out.push((shard, decision));
    }
}
