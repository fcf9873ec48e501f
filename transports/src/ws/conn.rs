//! One WebSocket connection's state: where its handshake is, the bytes not
//! yet decoded, and which of the bytes queued on the inner connection are
//! the user's payload ([`SendBudget`]).

use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::ws::{FrameConfig, Role};

use super::inbound::Inbound;
use crate::driver::{CloseReason, ListenerId};
use crate::framing::SendBudget;

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
    /// The payload limit, the frames a client holds until the 101
    /// (RFC 6455 §4.1: no data before the server's response), and which
    /// queued bytes are payload.
    pub(crate) send: SendBudget,
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
            send: SendBudget::new(limit),
            up: false,
            ending: None,
        }
    }
}
