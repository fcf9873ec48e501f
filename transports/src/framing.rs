//! What the wrappers that frame a byte stream on an inner transport
//! (WebSocket, RTSP-interleaved) share: the send budget of a connection,
//! which counts the user's payload and not frame headers or control
//! messages (SPEC TRN-2: the same budget on every transport), what the
//! user hears when an inner connection ends, and the `Transport` methods
//! a wrapper passes straight through.

use std::collections::VecDeque;
use std::time::Duration;

use crate::driver::{CloseReason, ConnId};
use crate::sendq::SendError;
use crate::transport::{Event, Transport};

/// A framed connection's send side: its payload limit, the frames a
/// client holds back until its handshake ends, and which queued bytes are
/// the user's payload.
#[derive(Debug)]
pub(crate) struct SendBudget {
    /// The most payload bytes that may wait.
    pub(crate) limit: usize,
    /// Frames sent before the handshake ended, held until it does.
    pub(crate) held: Vec<u8>,
    /// Bytes handed to the inner connection (and held back) so far.
    enqueued: u64,
    /// The user's payload in those bytes: `(start, end)` offsets in the
    /// enqueued stream, oldest first, of frames not yet wholly sent.
    frames: VecDeque<(u64, u64)>,
    /// Payload bytes of `frames`.
    payload: u64,
}

impl SendBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            held: Vec::new(),
            enqueued: 0,
            frames: VecDeque::new(),
            payload: 0,
        }
    }

    /// Whether `len` more payload bytes fit, given what the inner
    /// connection still has queued (forgetting the frames sent).
    pub(crate) fn admits(&mut self, inner_queued: usize, len: usize) -> bool {
        self.settle(inner_queued);
        self.unsent(inner_queued) + len <= self.limit
    }

    /// Refuses a send of `len` payload bytes that does not fit with
    /// [`SendError::BufferFull`], asking the inner connection to say when
    /// there is room (SPEC TRN-2).
    pub(crate) fn admit(
        &mut self,
        inner: &mut impl Transport,
        conn: ConnId,
        len: usize,
    ) -> Result<(), SendError> {
        if self.admits(inner.queued(conn), len) {
            Ok(())
        } else {
            inner.want_writable(conn);
            Err(SendError::BufferFull)
        }
    }

    /// Queues one send's frames, `wire`, on the inner connection (or holds
    /// them while `hold`: the handshake runs), all or nothing, and records
    /// each frame's `(header, payload)` lengths.
    pub(crate) fn commit(
        &mut self,
        inner: &mut impl Transport,
        conn: ConnId,
        wire: &[u8],
        hold: bool,
        frames: impl IntoIterator<Item = (usize, usize)>,
    ) -> Result<(), SendError> {
        if hold {
            self.held.extend_from_slice(wire);
        } else {
            inner.send(conn, wire)?;
        }
        for (header, payload) in frames {
            self.record(header, payload);
        }
        Ok(())
    }

    /// A data frame of `header` + `payload` bytes was queued.
    pub(crate) fn record(&mut self, header: usize, payload: usize) {
        let start = self.enqueued + header as u64;
        self.enqueued = start + payload as u64;
        self.frames.push_back((start, self.enqueued));
        self.payload += payload as u64;
    }

    /// Bytes that are not the user's (a head, a control frame) were queued.
    pub(crate) fn record_other(&mut self, len: usize) {
        self.enqueued += len as u64;
    }

    /// Offset in the enqueued stream up to which bytes have left, given
    /// what the inner connection still has queued.
    fn sent(&self, inner_queued: usize) -> u64 {
        self.enqueued
            .saturating_sub(self.held.len() as u64)
            .saturating_sub(inner_queued as u64)
    }

    /// Forgets the frames wholly sent.
    fn settle(&mut self, inner_queued: usize) {
        let sent = self.sent(inner_queued);
        while let Some(&(start, end)) = self.frames.front() {
            if end > sent {
                break;
            }
            self.payload -= end - start;
            self.frames.pop_front();
        }
    }

    /// The user's payload bytes not yet sent.
    pub(crate) fn unsent(&self, inner_queued: usize) -> usize {
        let sent = self.sent(inner_queued);
        let mut left = self.payload;
        for &(start, end) in &self.frames {
            if start >= sent {
                break;
            }
            left -= end.min(sent) - start;
        }
        left as usize
    }
}

/// The facts about a framed connection that decide how its end is told:
/// whether the user heard it was up, whether this side connected, and the
/// reason the wrapper set aside for it.
pub(crate) type Ended = (bool, bool, Option<CloseReason>);

/// What the user hears when an inner connection closes with `reason`:
/// `wrapped` is the framed connection's [`Ended`] if it was one. `None`
/// for a listener's connection that was never reported (its handshake
/// did not finish).
pub(crate) fn closed_event(
    conn: ConnId,
    reason: CloseReason,
    wrapped: Option<Ended>,
) -> Option<Event> {
    let reason = match wrapped {
        None => reason,
        Some((true, _, ending)) => ending.unwrap_or(reason),
        Some((false, false, _)) => return None,
        // An outgoing connection that never came up failed to connect.
        Some((false, true, ending)) => match (ending, reason) {
            (Some(r @ CloseReason::ConnectFailed(_)), _) => r,
            (_, CloseReason::ConnectFailed(e) | CloseReason::Error(e)) => {
                CloseReason::ConnectFailed(e)
            }
            (Some(CloseReason::Local), _) => CloseReason::Local,
            _ => CloseReason::ConnectFailed(libc::ECONNREFUSED),
        },
    };
    Some(Event::Closed { conn, reason })
}

/// xorshift64*, seeded from the process's hash seed: masking keys,
/// handshake nonces and session ids that a peer cannot guess in advance
/// (none of them is a secret).
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self(seed | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A wrapper's own state for `conn`, or `None` when the connection is
/// not one it frames (it belongs to the inner transport: a TCP connection
/// beside WebSocket or RTSP ones). No lookup while the wrapper has no
/// connection at all, the common case of a TCP-only gateway.
pub(crate) fn own_conn<C>(
    conns: &mut std::collections::HashMap<ConnId, C>,
    conn: ConnId,
) -> Option<&mut C> {
    if conns.is_empty() {
        return None;
    }
    conns.get_mut(&conn)
}

/// The earlier of the caller's poll timeout and a wrapper's next timer.
pub(crate) fn earlier(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The `Transport` methods of a framing wrapper that follow from its
/// [`SendBudget`]s or pass straight to the inner transport. Expects
/// `self.inner`, `self.conns` (a map from [`ConnId`](crate::ConnId) to a
/// connection with a `send: SendBudget`), `self.config.max_send_queue`
/// and a `with_headers(limit)` giving the inner connection's limit.
macro_rules! framing_forwards {
    () => {
        fn backend(&self) -> &BackendChoice {
            self.inner.backend()
        }

        /// A framed connection's bytes need a header in front: copied,
        /// as by `send`.
        fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
            if !self.conns.is_empty() && self.conns.contains_key(&conn) {
                self.send(conn, bytes)
            } else {
                self.inner.send_shared(conn, bytes)
            }
        }

        fn queued(&self, conn: ConnId) -> usize {
            let inner = self.inner.queued(conn);
            if self.conns.is_empty() {
                return inner;
            }
            self.conns
                .get(&conn)
                .map_or(inner, |c| c.send.unsent(inner))
        }

        fn want_writable(&mut self, conn: ConnId) {
            self.inner.want_writable(conn);
        }

        fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
            match self.conns.get_mut(&conn) {
                Some(c) => {
                    c.send.limit = max.min(self.config.max_send_queue);
                    let inner = with_headers(c.send.limit);
                    self.inner.limit_send_queue(conn, inner);
                }
                None => self.inner.limit_send_queue(conn, max),
            }
        }

        fn waker(&self) -> Waker {
            self.inner.waker()
        }

        fn receive_pressure(&self, untaken: usize) -> bool {
            self.inner.receive_pressure(untaken)
        }

        fn stats(&self) -> DriverStats {
            self.inner.stats()
        }

        fn region(&self) -> Option<&dtp_pool::Region> {
            self.inner.region()
        }
    };
}

pub(crate) use framing_forwards;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_counted_without_headers_and_controls_through_partial_sends() {
        let mut c = SendBudget::new(1000);
        c.record_other(10); // a control frame
        c.record(2, 100);
        c.record(4, 200);
        // Nothing left yet: everything is queued inside.
        let inner = 316;
        assert_eq!(c.unsent(inner), 300);
        // The control, the first header and 50 payload bytes went out.
        assert_eq!(c.unsent(inner - 62), 250);
        c.settle(inner - 62);
        assert_eq!(c.frames.len(), 2);
        // The first frame and the second's header went out.
        c.settle(200);
        assert_eq!(c.frames.len(), 1);
        assert_eq!(c.unsent(200), 200);
        assert_eq!(c.unsent(0), 0);
        c.settle(0);
        assert!(c.frames.is_empty() && c.payload == 0);
    }

    #[test]
    fn held_bytes_count_as_not_sent() {
        let mut c = SendBudget::new(1000);
        c.record_other(50); // a handshake request, sent
        c.record(4, 100); // held until the handshake ends
        c.held = vec![0; 104];
        assert_eq!(c.unsent(0), 100);
        assert!(c.admits(0, 900) && !c.admits(0, 901));
        c.held.clear(); // the handshake ended: all of it went inside
        assert_eq!(c.unsent(104), 100);
        assert_eq!(c.unsent(50), 50);
    }
}

#[cfg(test)]
mod close_tests {
    use super::*;

    #[test]
    fn an_outgoing_connection_that_never_came_up_failed_to_connect() {
        use CloseReason::*;
        let conn = ConnId(crate::slots::SlotId::from_parts(1, 1));
        let told = |wrapped, reason| match closed_event(conn, reason, wrapped) {
            Some(Event::Closed { reason, .. }) => Some(reason),
            _ => None,
        };
        assert_eq!(told(None, PeerClosed), Some(PeerClosed));
        assert_eq!(
            told(Some((true, true, Some(Local))), PeerClosed),
            Some(Local)
        );
        assert_eq!(
            told(Some((true, false, None)), PeerClosed),
            Some(PeerClosed)
        );
        assert_eq!(told(Some((false, false, None)), PeerClosed), None);
        let refused = Some(ConnectFailed(libc::ECONNREFUSED));
        assert_eq!(told(Some((false, true, None)), PeerClosed), refused);
        assert_eq!(
            told(Some((false, true, Some(Local))), PeerClosed),
            Some(Local)
        );
        let timeout = Some(ConnectFailed(libc::ETIMEDOUT));
        assert_eq!(told(Some((false, true, timeout)), Local), timeout);
        let reset = Some(ConnectFailed(libc::ECONNRESET));
        assert_eq!(
            told(Some((false, true, None)), Error(libc::ECONNRESET)),
            reset
        );
    }
}

/// A framing wrapper over a transport with UDP sockets has them too (its
/// own connections are TCP), so that QUIC stacks on it
/// (`Quic<Rtsp<WebSocket<Driver>>>`).
macro_rules! datagrams_through {
    ($wrapper:ident) => {
        impl<T: Transport + crate::udp::Datagrams> crate::udp::Datagrams for $wrapper<T> {
            fn bind_udp(
                &mut self,
                at: std::net::SocketAddr,
                peer: Option<std::net::SocketAddr>,
                shared: bool,
            ) -> Result<(crate::udp::UdpId, std::net::SocketAddr), TransportError> {
                self.inner.bind_udp(at, peer, shared)
            }

            fn send_to(
                &mut self,
                socket: crate::udp::UdpId,
                to: std::net::SocketAddr,
                data: &[u8],
                segment: usize,
            ) -> Result<(), SendError> {
                self.inner.send_to(socket, to, data, segment)
            }

            fn max_segments(&self, socket: crate::udp::UdpId) -> usize {
                self.inner.max_segments(socket)
            }

            fn udp_room(&self, socket: crate::udp::UdpId) -> bool {
                self.inner.udp_room(socket)
            }

            fn close_udp(&mut self, socket: crate::udp::UdpId) {
                self.inner.close_udp(socket);
            }

            fn take_udp_events(&mut self, out: &mut Vec<crate::udp::UdpEvent>) {
                self.inner.take_udp_events(out);
            }
        }
    };
}

pub(crate) use datagrams_through;
