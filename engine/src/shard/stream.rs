//! A connection's input: the bytes go to the service as they arrive (a
//! framed service cuts them itself, through [`Framed`](crate::Framed)).

use std::sync::atomic::Ordering;

use dtp_transports::{ConnId, RecvBuf, Transport};

use super::{Conns, Shard};
use crate::service::Service;

impl<T: Transport, S: Service, C: crate::clock::Clock> Shard<T, S, C> {
    /// Hands `data` (after any input held back by a pause) to the service.
    /// Reading pauses while the connection's send queue is at half its
    /// budget or more, until the driver reports it writable; an error of
    /// the service closes the connection after what is queued.
    pub(super) fn process_stream(&mut self, conn: ConnId, data: RecvBuf) {
        let Some(slot) = self.core.conns.get_mut(conn) else {
            return;
        };
        let data = if slot.rx.is_empty() {
            data
        } else {
            let mut held = slot.rx.take();
            held.extend_from_slice(&data);
            RecvBuf::from(held)
        };
        if data.is_empty() {
            return;
        }
        let service = &mut self.service;
        let full = Conns {
            core: &mut self.core,
        }
        .with(conn, |app, out| {
            if let Err(code) = service.bytes(app, data, out) {
                tracing::debug!(conn = conn.as_u64(), %code, "the service refused a connection's input");
                out.close();
            }
            let full = out.queued() >= out.budget() / 2;
            if full {
                out.want_writable();
            }
            full
        });
        if full == Some(true)
            && let Some(slot) = self.core.conns.get_mut(conn)
            && !slot.paused
            && !slot.closing
        {
            slot.paused = true;
            self.core.driver.pause_reading(conn);
            self.core.metrics.paused.fetch_add(1, Ordering::Relaxed);
        }
    }
}
