//! One WebSocket connection's state: where its handshake is, the bytes not
//! yet decoded, and which of the bytes queued on the inner connection are
//! the user's payload (so that [`crate::Transport::queued`] and the send
//! budget count payload, not frame headers).

use std::collections::VecDeque;
use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::ws::{FrameConfig, Role};

use super::inbound::Inbound;
use crate::driver::{CloseReason, ListenerId};

/// Where the connection is.
pub(crate) enum Phase {
    /// Accepted on a WebSocket listener, waiting for the request head.
    ServerHandshake { listener: ListenerId },
    /// Connected (or connecting), waiting for the 101; `key` is the one sent.
    ClientHandshake { key: String },
    /// Frames both ways.
    Open,
    /// A close frame went out (or the connection failed): nothing more is
    /// delivered; the inner connection is closing.
    Closing,
}

/// A WebSocket connection over one inner connection.
pub(crate) struct WsConn {
    pub(crate) role: Role,
    pub(crate) phase: Phase,
    /// When the handshake began (the handshake timeout counts from here).
    pub(crate) since: Instant,
    /// Received bytes of the opening handshake not yet read (a head not
    /// yet whole); frames go to `inbound`.
    pub(crate) rx: BytesMut,
    pub(crate) inbound: Inbound,
    /// A client's frames sent before the 101, held until it comes
    /// (RFC 6455 §4.1: no data before the server's response).
    pub(crate) held: Vec<u8>,
    /// Bytes handed to the inner connection (and held) so far.
    pub(crate) enqueued: u64,
    /// The user's payload in those bytes: `(start, end)` offsets in the
    /// enqueued stream, oldest first, of frames not yet wholly sent.
    pub(crate) frames: VecDeque<(u64, u64)>,
    /// Payload bytes of `frames`.
    pub(crate) payload: u64,
    /// The most payload bytes that may wait.
    pub(crate) limit: usize,
    /// The user was told the connection is up (Accepted or Connected).
    pub(crate) up: bool,
    /// What to report when the inner connection ends.
    pub(crate) ending: Option<CloseReason>,
}

impl WsConn {
    pub(crate) fn new(role: Role, phase: Phase, max_message: usize, limit: usize) -> Self {
        let cfg = match role {
            Role::Server => FrameConfig::server(max_message as u64),
            Role::Client => FrameConfig::client(max_message as u64),
        };
        Self {
            role,
            phase,
            since: Instant::now(),
            rx: BytesMut::new(),
            inbound: Inbound::new(cfg),
            held: Vec::new(),
            enqueued: 0,
            frames: VecDeque::new(),
            payload: 0,
            limit,
            up: false,
            ending: None,
        }
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
    pub(crate) fn settle(&mut self, inner_queued: usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_counted_without_headers_and_controls_through_partial_sends() {
        let mut c = WsConn::new(Role::Server, Phase::Open, 1024, 1024);
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
}
