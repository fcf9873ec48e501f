//! The socket transport a core runs: every scheme of [`Endpoint`] that
//! reaches another process, on one core's backend.
//!
//! [`Sockets`] stacks the wrappers that add a scheme of their own on the
//! [`Driver`] (TCP and Unix sockets on io_uring or epoll): today
//! [`WebSocket`] for `ws:`. Each wrapper passes every other endpoint
//! through, and costs nothing per event while it has no listener and no
//! connection of its own, so an engine that serves only TCP pays nothing
//! for the schemes it does not use.

use std::io;

use crate::driver::{Driver, DriverConfig};
use crate::ws::{WebSocket, WsConfig, with_headers};

/// SPEC TRN-1: the transport of every scheme a core's sockets speak
/// (`tcp:`, `unix:`, `ws:`), behind one [`Transport`](crate::Transport).
pub type Sockets = WebSocket<Driver>;

/// The core's [`Sockets`] on `config`: a WebSocket connection may queue
/// as many payload bytes as its frames with their headers fit in the
/// driver's `max_send_queue`.
pub fn sockets(config: DriverConfig) -> io::Result<Sockets> {
    let ws = WsConfig {
        max_send_queue: payload_limit(config.max_send_queue),
        ..WsConfig::default()
    };
    Ok(WebSocket::new(Driver::new(config)?, ws))
}

/// The most payload bytes whose frames, headers counted as [`WebSocket`]
/// counts them, fit in `wire` bytes.
fn payload_limit(wire: usize) -> usize {
    // with_headers(l) = l + l/16 + 64 is monotonic: the largest l with
    // with_headers(l) <= wire lies at or just below (wire - 64) * 16 / 17.
    let mut l = wire.saturating_sub(64).saturating_mul(16) / 17;
    while l > 0 && with_headers(l) > wire {
        l -= 1;
    }
    while with_headers(l + 1) <= wire {
        l += 1;
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_websocket_payload_limit_fits_the_wire_limit_exactly() {
        for wire in [64, 65, 100, 4096, 1 << 20, 4 << 20, 4_194_303] {
            let l = payload_limit(wire);
            assert!(with_headers(l) <= wire, "{wire}: {l}");
            assert!(with_headers(l + 1) > wire, "{wire}: {l}");
        }
        assert_eq!(payload_limit(10), 0);
    }
}
