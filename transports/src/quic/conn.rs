//! One QUIC connection as the runtime sees it: quinn-proto's connection,
//! the one bidirectional stream that carries the byte stream, the bounded
//! queue of bytes the stream's flow control has not taken yet, and what
//! the user has been told.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use quinn_proto::{ConnectionError, ConnectionHandle, Dir, ReadError, StreamEvent, StreamId};

use crate::driver::{CloseReason, ConnId, ListenerId};
use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::slots::SlotId;
use crate::transport::Event;

/// Most bytes handed to the user in one [`Event::Received`]: the stream's
/// chunks (about a packet each) are gathered up to this.
const DELIVERY_MAX: usize = 64 * 1024;

/// The QUIC error code of a clean close (the application's "no error").
pub(super) const NO_ERROR: u32 = 0;

/// A QUIC connection of a [`Quic`](super::Quic) transport.
pub(super) struct QConn {
    pub(super) conn: quinn_proto::Connection,
    pub(super) handle: ConnectionHandle,
    /// Its endpoint (socket).
    pub(super) ep: SlotId,
    /// The listener that accepted it (`None`: outgoing).
    pub(super) listener: Option<ListenerId>,
    /// The byte stream: the client's first bidirectional stream.
    stream: Option<StreamId>,
    /// Reported `Accepted` / `Connected`.
    pub(super) up: bool,
    /// Reported `Closed`: the id is dead for the user; the connection
    /// lingers only until quinn-proto has drained it.
    pub(super) gone: bool,
    /// Bytes accepted from the user and not yet taken by the stream.
    out: VecDeque<Bytes>,
    queued: usize,
    /// A per-connection send limit below the transport's.
    pub(super) limit: usize,
    wants_writable: bool,
    pub(super) paused: bool,
    /// Data may be waiting in the stream (it said so while paused or
    /// before the connection was reported up).
    unread: bool,
    /// The user closed it: flush, send FIN, close once FIN is acknowledged.
    pub(super) close_requested: bool,
    fin_sent: bool,
    /// When quinn-proto wants `handle_timeout` next (as filed in the
    /// transport's timer set).
    pub(super) timer: Option<Instant>,
}

impl QConn {
    pub(super) fn new(
        conn: quinn_proto::Connection,
        handle: ConnectionHandle,
        ep: SlotId,
        listener: Option<ListenerId>,
        limit: usize,
    ) -> Self {
        Self {
            conn,
            handle,
            ep,
            listener,
            stream: None,
            up: false,
            gone: false,
            out: VecDeque::new(),
            queued: 0,
            limit,
            wants_writable: false,
            paused: false,
            unread: false,
            close_requested: false,
            fin_sent: false,
            timer: None,
        }
    }

    /// Bytes accepted and not yet taken by the stream.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// SPEC TRN-2: queues `bytes` (all or nothing) within the limit.
    pub(super) fn queue(&mut self, bytes: Bytes) -> Result<(), SendError> {
        if self.gone {
            return Err(SendError::UnknownConnection);
        }
        if self.close_requested {
            return Err(SendError::Closed);
        }
        if self.queued + bytes.len() > self.limit {
            self.wants_writable = true;
            return Err(SendError::BufferFull);
        }
        self.queued += bytes.len();
        if !bytes.is_empty() {
            self.out.push_back(bytes);
        }
        Ok(())
    }

    /// A producer asks to hear of room: at once if there is some.
    pub(super) fn want_writable(&mut self, id: ConnId, events: &mut Vec<Event>) {
        if self.gone {
            return;
        }
        if self.queued <= self.limit / 2 {
            events.push(Event::Writable { conn: id });
        } else {
            self.wants_writable = true;
        }
    }

    /// Reports the connection closed (once) and closes it in QUIC (a
    /// clean close once the user's bytes are acknowledged; `code` else).
    pub(super) fn end(
        &mut self,
        id: ConnId,
        reason: CloseReason,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        if !self.gone {
            self.gone = true;
            events.push(Event::Closed { conn: id, reason });
        }
        self.out.clear();
        self.queued = 0;
        let code = match reason {
            CloseReason::Local | CloseReason::PeerClosed => NO_ERROR,
            _ => 1,
        };
        if !self.conn.is_closed() {
            self.conn.close(now, code.into(), Bytes::new());
        }
    }

    /// Handles quinn-proto's application events; appends what the user sees.
    pub(super) fn app_events(&mut self, id: ConnId, now: Instant, events: &mut Vec<Event>) -> bool {
        let mut any = false;
        while let Some(event) = self.conn.poll() {
            any = true;
            match event {
                quinn_proto::Event::Connected => {
                    if self.listener.is_none() {
                        // The client opens the stream and announces it at
                        // once with an empty STREAM frame, so that a
                        // server that speaks first can (see the module docs).
                        self.stream = self.conn.streams().open(Dir::Bi);
                        if let Some(s) = self.stream {
                            let _ = self.conn.send_stream(s).write(&[]);
                        }
                    } else {
                        self.accept_stream();
                    }
                    if !self.gone {
                        self.up = true;
                        events.push(match self.listener {
                            Some(listener) => Event::Accepted { listener, conn: id },
                            None => Event::Connected { conn: id },
                        });
                    }
                }
                quinn_proto::Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                    self.accept_stream();
                    self.unread = true;
                }
                quinn_proto::Event::Stream(StreamEvent::Readable { id: s })
                    if Some(s) == self.stream =>
                {
                    self.unread = true;
                }
                quinn_proto::Event::Stream(StreamEvent::Finished { id: s })
                    if Some(s) == self.stream && self.close_requested =>
                {
                    // Every byte and the FIN acknowledged: close cleanly.
                    self.end(id, CloseReason::Local, now, events);
                }
                quinn_proto::Event::Stream(StreamEvent::Stopped { id: s, .. })
                    if Some(s) == self.stream =>
                {
                    let reason = if self.close_requested {
                        CloseReason::Local
                    } else {
                        CloseReason::PeerClosed
                    };
                    self.end(id, reason, now, events);
                }
                quinn_proto::Event::ConnectionLost { reason } => {
                    // What arrived before the close is delivered first.
                    self.read(id, now, events, true);
                    let reason = self.lost(&reason);
                    self.end(id, reason, now, events);
                }
                _ => {}
            }
        }
        if self.unread {
            self.read(id, now, events, false);
        }
        any
    }

    /// The server takes the client's stream (the first bidirectional one).
    fn accept_stream(&mut self) {
        if self.stream.is_none() {
            self.stream = self.conn.streams().accept(Dir::Bi);
        }
    }

    /// Why the connection ended, as the user hears it.
    fn lost(&self, reason: &ConnectionError) -> CloseReason {
        if self.close_requested {
            return CloseReason::Local;
        }
        if !self.up {
            return CloseReason::ConnectFailed(match reason {
                ConnectionError::TimedOut => libc::ETIMEDOUT,
                _ => libc::ECONNREFUSED,
            });
        }
        match reason {
            ConnectionError::ApplicationClosed(c) if c.error_code == VarIntZero::ZERO => {
                CloseReason::PeerClosed
            }
            ConnectionError::LocallyClosed => CloseReason::Local,
            ConnectionError::TimedOut => CloseReason::Error(libc::ETIMEDOUT),
            ConnectionError::Reset | ConnectionError::ApplicationClosed(_) => {
                CloseReason::Error(libc::ECONNRESET)
            }
            _ => CloseReason::Error(libc::EPROTO),
        }
    }

    /// Reads what the stream holds (unless paused, or not yet reported
    /// up; `last`: the connection is ending, deliver whatever is there).
    fn read(&mut self, id: ConnId, now: Instant, events: &mut Vec<Event>, last: bool) {
        let Some(s) = self.stream else {
            return;
        };
        if self.gone || !self.up || (self.paused && !last) {
            return;
        }
        self.unread = false;
        let mut stream = self.conn.recv_stream(s);
        let Ok(mut chunks) = stream.read(true) else {
            return;
        };
        let discard = self.close_requested;
        // The chunks (about a packet each, pieces of the packets' buffers)
        // are gathered by reference and copied once into a buffer of
        // exactly their size: growing one buffer chunk by chunk
        // reallocated and copied it again and again (a tenth of a QUIC
        // server's time in the 16 KiB stream benchmark).
        let mut got = Gathered::default();
        let mut finished = false;
        let mut reset = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if !discard {
                        got.push(chunk.bytes);
                    }
                    if got.len >= DELIVERY_MAX {
                        events.push(Event::Received {
                            conn: id,
                            data: got.take(),
                        });
                    }
                }
                Ok(None) => {
                    finished = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    reset = true;
                    break;
                }
            }
        }
        // Flow-control credit goes back with the next transmit.
        let _ = chunks.finalize();
        if got.len > 0 {
            events.push(Event::Received {
                conn: id,
                data: got.take(),
            });
        }
        if finished && !last {
            let reason = if self.close_requested {
                CloseReason::Local
            } else {
                CloseReason::PeerClosed
            };
            self.end(id, reason, now, events);
        } else if reset && !last {
            self.end(id, CloseReason::Error(libc::ECONNRESET), now, events);
        }
    }

    /// Reads again after a pause.
    pub(super) fn resume(&mut self, id: ConnId, now: Instant, events: &mut Vec<Event>) {
        self.paused = false;
        self.unread = true;
        self.read(id, now, events, false);
    }

    /// Moves queued bytes into the stream as its flow control allows
    /// (queued by reference: no copy), sends the FIN after the last of them
    /// once the user closed, and tells a waiting producer of room. Returns
    /// whether bytes moved.
    pub(super) fn flush(&mut self, id: ConnId, now: Instant, events: &mut Vec<Event>) -> bool {
        let Some(s) = self.stream else {
            return false;
        };
        if self.gone {
            return false;
        }
        let mut moved = false;
        while let Some(front) = self.out.front_mut() {
            let mut one = [front.clone()];
            match self.conn.send_stream(s).write_chunks(&mut one) {
                Ok(w) if w.bytes > 0 => {
                    moved = true;
                    self.queued -= w.bytes;
                    front.advance(w.bytes);
                    if front.is_empty() {
                        self.out.pop_front();
                    } else {
                        break;
                    }
                }
                Ok(_) | Err(quinn_proto::WriteError::Blocked) => break,
                Err(_) => {
                    // Stopped or closed by the peer.
                    self.end(id, CloseReason::PeerClosed, now, events);
                    return moved;
                }
            }
        }
        if self.close_requested && self.out.is_empty() && !self.fin_sent {
            self.fin_sent = true;
            if self.conn.send_stream(s).finish().is_err() {
                self.end(id, CloseReason::Local, now, events);
            }
        }
        if self.wants_writable && self.queued <= self.limit / 2 && !self.close_requested {
            self.wants_writable = false;
            events.push(Event::Writable { conn: id });
        }
        moved
    }

    /// The user closes: at once when nothing can or need be sent, else
    /// after the flush and the FIN's acknowledgement.
    pub(super) fn close(&mut self, id: ConnId, now: Instant, events: &mut Vec<Event>) {
        if self.gone || self.close_requested {
            return;
        }
        self.close_requested = true;
        if !self.up || (self.stream.is_none() && self.out.is_empty()) {
            self.end(id, CloseReason::Local, now, events);
        }
    }
}

/// `VarInt`'s zero, by a name that reads in a pattern guard.
struct VarIntZero;

impl VarIntZero {
    const ZERO: quinn_proto::VarInt = quinn_proto::VarInt::from_u32(NO_ERROR);
}

/// Stream chunks gathered for one delivery, by reference.
#[derive(Default)]
struct Gathered {
    chunks: Vec<Bytes>,
    /// Their total length.
    len: usize,
}

impl Gathered {
    fn push(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        self.chunks.push(chunk);
    }

    /// The chunks copied into one buffer of their size; empties `self`.
    fn take(&mut self) -> RecvBuf {
        let mut out = BytesMut::with_capacity(self.len);
        for c in self.chunks.drain(..) {
            out.extend_from_slice(&c);
        }
        self.len = 0;
        RecvBuf::from(out)
    }
}
