//! What the UDP and QUIC tests share: running a test on both backends, a
//! small driver, and reading what a connection saw out of its events.

#![allow(dead_code, reason = "each test binary uses a part of it")]

use dtp_transports::{BackendPreference, CloseReason, ConnId, Driver, DriverConfig, Event};

/// Runs `$test(backend)` on io_uring and on epoll, one `#[test]` each.
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[test]
            fn uring() { super::$test(dtp_transports::BackendPreference::Uring) }
            #[test]
            fn epoll() { super::$test(dtp_transports::BackendPreference::Epoll) }
        }
    )*};
}
pub(crate) use on_both_backends;

/// A driver of `backend` with small receive chunks.
pub(crate) fn driver(backend: BackendPreference, chunk_size: u32) -> Driver {
    Driver::new(DriverConfig {
        backend,
        chunk_size,
        recv_buffers: 16,
        send_chunks: 64,
        ..DriverConfig::default()
    })
    .unwrap()
}

/// The bytes `id` received, in order.
pub(crate) fn received(events: &[Event], id: ConnId) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Received { conn, data } if *conn == id => Some(data.to_vec()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Why `id` closed, if it did.
pub(crate) fn closed(events: &[Event], id: ConnId) -> Option<CloseReason> {
    events.iter().find_map(|e| match e {
        Event::Closed { conn, reason } if *conn == id => Some(*reason),
        _ => None,
    })
}
