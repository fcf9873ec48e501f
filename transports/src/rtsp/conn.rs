//! One RTSP-interleaved connection's state: where its control exchange
//! is, the bytes not yet decoded, the session, its timers, and which
//! queued bytes are the user's payload.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::rtsp::{InterleavedDecoder, RtspLimits};

use crate::driver::{CloseReason, ListenerId};
use crate::framing::SendBudget;

use super::client::Step;

/// Where the connection is.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Accepted on an RTSP listener: answering OPTIONS, DESCRIBE, SETUP
    /// until a RECORD or PLAY.
    Server { listener: ListenerId },
    /// Connecting: waiting for the answer to this step's request.
    Client { step: Step },
    /// `$` packets both ways (and keep-alives between them).
    Open,
    /// Going away: nothing more is delivered; the inner connection is
    /// closing.
    Closing,
}

/// An RTSP connection over one inner connection.
pub(crate) struct RtspConn {
    pub(crate) phase: Phase,
    /// Whether this side connected (the client).
    pub(crate) client: bool,
    /// When the connection began (the handshake timeout counts from here).
    pub(crate) since: Instant,
    /// Received bytes not yet decoded.
    pub(crate) rx: BytesMut,
    pub(crate) decoder: InterleavedDecoder,
    /// The payload limit, the packets a client holds until RECORD's
    /// answer, and which queued bytes are payload.
    pub(crate) send: SendBudget,
    /// The user was told the connection is up (Accepted or Connected).
    pub(crate) up: bool,
    /// What to report when the inner connection ends.
    pub(crate) ending: Option<CloseReason>,
    /// The URI a client's requests name (empty on a server).
    pub(crate) uri: String,
    /// The session id: ours on a server, the server's on a client.
    pub(crate) session: Option<String>,
    /// The session timeout: the one a server announces and enforces, or
    /// the one a client was told.
    pub(crate) timeout: Duration,
    /// A server's SETUP was answered.
    pub(crate) set_up: bool,
    /// A client's next CSeq.
    pub(crate) cseq: u32,
    /// Server: when the peer was last heard from. Client: when this side
    /// last sent anything.
    pub(crate) last: Instant,
    /// Reading is paused by the user: a server does not time the peer out
    /// while it is not listening.
    pub(crate) paused: bool,
}

impl RtspConn {
    pub(crate) fn new(phase: Phase, now: Instant, limits: RtspLimits, limit: usize) -> Self {
        Self {
            client: matches!(phase, Phase::Client { .. }),
            phase,
            since: now,
            rx: BytesMut::new(),
            decoder: InterleavedDecoder::new(limits),
            send: SendBudget::new(limit),
            up: false,
            ending: None,
            uri: String::new(),
            session: None,
            timeout: Duration::from_secs(60),
            set_up: false,
            cseq: 1,
            last: now,
            paused: false,
        }
    }

    /// Whether the control exchange is still running.
    pub(crate) fn handshaking(&self) -> bool {
        matches!(self.phase, Phase::Server { .. } | Phase::Client { .. })
    }

    /// When this connection's timer is due: the end of the handshake, a
    /// server's session timeout, a client's next keep-alive (half the
    /// session timeout after it last sent); `None` when no timer runs.
    pub(crate) fn due(&self, handshake_timeout: Duration) -> Option<Instant> {
        match self.phase {
            Phase::Server { .. } | Phase::Client { .. } => Some(self.since + handshake_timeout),
            Phase::Open if self.client => Some(self.last + self.timeout / 2),
            Phase::Open if !self.paused => Some(self.last + self.timeout),
            Phase::Open | Phase::Closing => None,
        }
    }

    /// The next CSeq to send.
    pub(crate) fn next_cseq(&mut self) -> u32 {
        let n = self.cseq;
        self.cseq = self.cseq.wrapping_add(1);
        n
    }
}
