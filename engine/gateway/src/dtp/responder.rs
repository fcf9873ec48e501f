//! The benchmark workloads' server application ([`DtpResponder`], sans-IO
//! in `dtp-workload`) as a [`DtpApp`]: what `dtp serve --dtp` runs in its
//! [`DtpGateway`](super::DtpGateway).

use std::time::Instant;

use dtp_workload::dtp::{DtpResponder, ResponderSession};

use super::{DtpApp, DtpEndpoint, DtpEvent};

impl DtpApp for DtpResponder {
    type Session = ResponderSession;

    fn event(
        &mut self,
        session: &mut ResponderSession,
        endpoint: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
    ) {
        DtpResponder::event(self, session, endpoint, event, now);
    }
}
