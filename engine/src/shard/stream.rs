//! A connection's input: the bytes go to the service as they arrive (a
//! framed service cuts them itself, through [`Framed`](crate::Framed)).

use std::sync::atomic::Ordering;

use dtp_transports::{ConnId, RecvBuf, Transport};

use super::Shard;
use crate::service::{Outbox, Service};

impl<T: Transport, S: Service, C: crate::clock::Clock> Shard<T, S, C> {
    /// Hands `data` (after any input held back by a pause) to the service.
    /// Reading pauses while the connection's send queue is at half its
    /// budget or more, until the driver reports it writable; an error of
    /// the service closes the connection after what is queued.
    pub(super) fn process_stream(&mut self, conn: ConnId, data: RecvBuf) {
        let core = &mut self.core;
        core.out.clear();
        let queued = core.driver.queued(conn);
        let Some(slot) = core.conns.get_mut(conn) else {
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
        // What waits in `pending` (refused by the driver) counts as queued.
        let room = core
            .max_send_queue
            .saturating_sub(queued + slot.pending.len());
        let mut outbox = Outbox::new(
            &mut core.out,
            &core.limits,
            room,
            core.max_send_queue,
            core.now,
        );
        let result = self.service.bytes(&mut slot.app, data, &mut outbox);
        let full = outbox.queued() >= core.max_send_queue / 2;
        let mut done = outbox.finish();
        if full && !slot.paused {
            slot.paused = true;
            core.driver.pause_reading(conn);
            core.metrics.paused.fetch_add(1, Ordering::Relaxed);
            done.wants_writable = true;
        }
        if let Err(code) = result {
            tracing::debug!(conn = conn.as_u64(), %code, "the service refused a connection's input");
            done.close = true;
        }
        core.after(conn, done);
    }
}
