//! The socket transport a core runs: every scheme of [`Endpoint`] that
//! reaches another process, on one core's backend.
//!
//! [`Sockets`] stacks the wrappers that add a scheme of their own on the
//! [`Driver`] (TCP and Unix sockets on io_uring or epoll): [`WebSocket`]
//! for `ws:` and [`Rtsp`] for `rtsp:` always, and [`Quic`] for `quic:`
//! when the engine is given a QUIC configuration. Each wrapper passes
//! every other endpoint through. The WebSocket and RTSP wrappers cost
//! nothing per event while they have no listener and no connection of
//! their own; QUIC renumbers the inner transport's
//! connections (see [`Quic`]), so an engine that has no QUIC endpoint runs
//! without it rather than pay that on every event.

use std::io;
use std::time::Duration;

use bytes::Bytes;

use crate::driver::{BackendChoice, ConnId, Driver, DriverConfig, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::quic::{Quic, QuicConfig};
use crate::rtsp::{self, Rtsp, RtspConfig};
use crate::sendq::SendError;
use crate::transport::{Event, Transport, TransportError};
use crate::ws::{self, WebSocket, WsConfig};

/// The stream stack: TCP and Unix sockets, WebSocket and RTSP-interleaved.
type Streams = Rtsp<WebSocket<Driver>>;

/// SPEC TRN-1: the transport of every scheme a core's sockets speak
/// (`tcp:`, `unix:`, `ws:`, `rtsp:`, and `quic:` when configured), behind one
/// [`Transport`].
#[allow(
    clippy::large_enum_variant,
    reason = "the stream stack is the hot path and stays inline; the QUIC one is boxed"
)]
pub enum Sockets {
    /// TCP, Unix, WebSocket and RTSP-interleaved.
    Streams(Streams),
    /// The same, and QUIC.
    WithQuic(Box<Quic<Streams>>),
}

/// The core's [`Sockets`] on `config`, with QUIC when `quic` is given: a
/// WebSocket or RTSP connection may queue as many payload bytes as its
/// frames with their headers fit in the driver's `max_send_queue`. Fails when
/// the driver cannot start or the QUIC configuration is refused (the
/// error says which setting).
pub fn sockets(config: DriverConfig, quic: Option<&QuicConfig>) -> io::Result<Sockets> {
    let wire = config.max_send_queue;
    let ws = WsConfig {
        max_send_queue: payload_limit(wire, ws::with_headers),
        ..WsConfig::default()
    };
    let rtsp = RtspConfig {
        max_send_queue: payload_limit(wire, rtsp::with_headers),
        ..RtspConfig::default()
    };
    let streams = Rtsp::new(WebSocket::new(Driver::new(config)?, ws), rtsp);
    Ok(match quic {
        None => Sockets::Streams(streams),
        Some(q) => Sockets::WithQuic(Box::new(Quic::new(streams, q.clone())?)),
    })
}

/// The most payload bytes whose frames, headers counted by the wrapper's
/// `with_headers` (`l + l/16 + a constant`, monotonic), fit in `wire`
/// bytes.
fn payload_limit(wire: usize, with_headers: fn(usize) -> usize) -> usize {
    // The largest l lies at or just below wire * 16 / 17, less the
    // constant's share.
    let mut l = wire.saturating_mul(16) / 17;
    while l > 0 && with_headers(l) > wire {
        l = l.saturating_sub(1 + (with_headers(l) - wire) * 16 / 17);
    }
    while with_headers(l + 1) <= wire {
        l += 1;
    }
    l
}

/// Calls `$call` on whichever stack this is.
macro_rules! each {
    ($self:expr, $t:ident => $call:expr) => {
        match $self {
            Sockets::Streams($t) => $call,
            Sockets::WithQuic($t) => $call,
        }
    };
}

impl Transport for Sockets {
    fn backend(&self) -> &BackendChoice {
        each!(self, t => t.backend())
    }

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        if matches!((&*self, at), (Self::Streams(_), Endpoint::Quic(_))) {
            return Err(quic_not_configured(at));
        }
        each!(self, t => t.listen(at, shared))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        if matches!((&*self, to), (Self::Streams(_), Endpoint::Quic(_))) {
            return Err(quic_not_configured(to));
        }
        each!(self, t => t.connect(to))
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        each!(self, t => t.send(conn, bytes))
    }

    fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        each!(self, t => t.send_shared(conn, bytes))
    }

    fn queued(&self, conn: ConnId) -> usize {
        each!(self, t => t.queued(conn))
    }

    fn want_writable(&mut self, conn: ConnId) {
        each!(self, t => t.want_writable(conn))
    }

    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        each!(self, t => t.limit_send_queue(conn, max))
    }

    fn pause_reading(&mut self, conn: ConnId) {
        each!(self, t => t.pause_reading(conn))
    }

    fn resume_reading(&mut self, conn: ConnId) {
        each!(self, t => t.resume_reading(conn))
    }

    fn close(&mut self, conn: ConnId) {
        each!(self, t => t.close(conn))
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        each!(self, t => t.poll(events, timeout))
    }

    fn waker(&self) -> Waker {
        each!(self, t => t.waker())
    }

    fn receive_pressure(&self, untaken: usize) -> bool {
        each!(self, t => t.receive_pressure(untaken))
    }

    fn stats(&self) -> DriverStats {
        each!(self, t => t.stats())
    }

    fn region(&self) -> Option<&dtp_pool::Region> {
        each!(self, t => t.region())
    }
}

/// A `quic:` endpoint on sockets made without a QUIC configuration.
fn quic_not_configured(at: &Endpoint) -> TransportError {
    TransportError::Io(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{at}: QUIC is not configured on this engine (give it a QUIC configuration)"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_payload_limit_fits_the_wire_limit_exactly() {
        for with_headers in [ws::with_headers, rtsp::with_headers] {
            for wire in [5000, 8192, 1 << 20, 4 << 20, 4_194_303] {
                let l = payload_limit(wire, with_headers);
                assert!(with_headers(l) <= wire, "{wire}: {l}");
                assert!(with_headers(l + 1) > wire, "{wire}: {l}");
            }
            assert_eq!(payload_limit(10, with_headers), 0);
        }
    }
}
