//! The gateway's service: what `dtp serve` runs on every core shard today.
//!
//! It speaks the benchmark protocol of `dtp_bench::workload` through the
//! very `Responder` the tokio peer uses, so a comparison measures the two
//! IO paths and not two implementations. The DTP protocol proper (CAP,
//! agreements, encryption, resume) plugs in here with issue 4.

use dtp_bench::workload::{Responder, WorkloadError};
use dtp_codec::{ErrorCode, Limits, LogicalFrame};
use dtp_engine::{Origin, Outbox, Service};
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
