//! The plaintext `stream` workload's sender, straight on the transports'
//! [`Driver`] (one per client thread) instead of an engine shard: each
//! frame's payload is copied once, into the connection's send chunks, and
//! the kernel reads it from there — no encode into a shard's outbox first.
//!
//! **Owns**: its threads, their drivers and connections, and one frame
//! buffer per thread whose payload is written once; per frame only the
//! header's fragment id and sequence are patched in place
//! ([`FrameTemplate`]) before the one copy into the send chunks (the
//! transports' `send` takes bytes and copies them; this is the least it
//! allows). **Never touches**: the protocol's rules (`dtp_bench::workload`:
//! the same frames the codec would encode, the same window and acks), the
//! other workloads (the engine client in `super`).
//!
//! Counting, the window's edges and the shared tallies are those of the
//! engine client: `super::run` drives the measuring loop for both.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_bench::workload::{self, StreamWindow};
use dtp_codec::{HEADER_LEN, Limits, decode_frame, peek_frame_len};
use dtp_transports::{CloseReason, ConnId, Driver, DriverConfig, Event, SendError};

use super::Tally;

/// A `stream` frame's bytes with the payload in place: the header is
/// patched per frame (fragment id and sequence), nothing else changes.
pub(super) struct FrameTemplate {
    bytes: Vec<u8>,
}

/// Where the data fields start: header, then flags (1 byte).
const FRAGMENT_ID_AT: usize = HEADER_LEN + 1;
const SEQUENCE_AT: usize = FRAGMENT_ID_AT + 8;

impl FrameTemplate {
    /// The frame of sequence 1 with `payload`, encoded once by the codec.
    pub(super) fn new(payload: &Bytes, limits: &Limits) -> Result<Self, String> {
        let frame = workload::stream_frame(1, payload, false);
        let mut buf = BytesMut::new();
        frame
            .encode(&mut buf, limits)
            .map_err(|e| format!("the stream frame cannot be encoded: {e}"))?;
        let t = Self {
            bytes: buf.to_vec(),
        };
        // The fields must be where this template patches them.
        if t.bytes.get(FRAGMENT_ID_AT..SEQUENCE_AT + 8)
            != Some(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1][..])
        {
            return Err("the stream frame's layout is not the one expected".to_owned());
        }
        Ok(t)
    }

    /// The wire bytes of the frame with `sequence` (fragment id = sequence).
    pub(super) fn frame(&mut self, sequence: u64) -> &[u8] {
        let be = sequence.to_be_bytes();
        self.bytes[FRAGMENT_ID_AT..SEQUENCE_AT].copy_from_slice(&be);
        self.bytes[SEQUENCE_AT..SEQUENCE_AT + 8].copy_from_slice(&be);
        &self.bytes
    }

    /// Bytes on the wire per frame.
    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// What one sender thread runs.
pub(super) struct StreamShard {
    pub(super) target: SocketAddr,
    pub(super) connections: usize,
    pub(super) window: u64,
    pub(super) payload: Bytes,
    pub(super) driver: DriverConfig,
    pub(super) measure_from: Instant,
    pub(super) end: Instant,
    pub(super) shared: Arc<Mutex<Tally>>,
    /// The backend's name, set by the first thread to start its driver.
    pub(super) backend: Arc<Mutex<Option<String>>>,
}

struct Conn {
    window: StreamWindow,
    /// Send times of the frames not yet acked, by sequence (bounded by the window).
    sent_at: std::collections::VecDeque<(u64, Instant)>,
    /// A sequence taken from the window whose send was refused: sent first.
    held: Option<u64>,
    rx: BytesMut,
}

impl StreamShard {
    /// Runs until the window's end plus a short drain; what it counts goes
    /// to `shared` about ten times a second, the last time with `done`.
    pub(super) fn run(self) {
        let mut local = Tally::new();
        if let Err(e) = self.drive(&mut local) {
            tracing::warn!(error = %e, "a stream sender stopped");
            local.errors += 1;
        }
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.merge(&local);
        shared.done = true;
    }

    fn drive(&self, local: &mut Tally) -> Result<(), String> {
        let limits = Limits::default();
        let mut driver =
            Driver::new(self.driver.clone()).map_err(|e| format!("no IO driver: {e}"))?;
        if let Ok(mut b) = self.backend.lock() {
            b.get_or_insert_with(|| driver.backend().kind.name().to_owned());
        }
        let mut template = FrameTemplate::new(&self.payload, &limits)?;
        let mut conns: HashMap<ConnId, Conn> = HashMap::with_capacity(self.connections);
        for _ in 0..self.connections {
            if let Err(e) = driver.connect(self.target) {
                local.failed += 1;
                local.last_errno = e.raw_os_error().unwrap_or(0);
            }
        }
        let stop_at = self.end + Duration::from_millis(200);
        let mut events = Vec::new();
        let mut last_flush = Instant::now();
        while Instant::now() < stop_at {
            driver
                .poll(&mut events, Some(Duration::from_millis(10)))
                .map_err(|e| format!("poll: {e}"))?;
            for ev in events.drain(..) {
                match ev {
                    Event::Connected { conn } => {
                        local.connected += 1;
                        let window = StreamWindow::new(self.window)
                            .map_err(|e| format!("stream window: {e}"))?;
                        conns.insert(
                            conn,
                            Conn {
                                window,
                                sent_at: Default::default(),
                                held: None,
                                rx: BytesMut::new(),
                            },
                        );
                        self.fill(&mut driver, conn, &mut conns, &mut template, local);
                    }
                    Event::Received { conn, chunk } => {
                        if let Some(c) = conns.get_mut(&conn) {
                            c.rx.extend_from_slice(driver.recv_data(&chunk));
                        }
                        driver.recycle(chunk);
                        if self.acks(conn, &mut conns, &limits, local).is_err() {
                            local.errors += 1;
                            conns.remove(&conn);
                            driver.close(conn);
                            continue;
                        }
                        self.fill(&mut driver, conn, &mut conns, &mut template, local);
                    }
                    Event::Writable { conn } => {
                        self.fill(&mut driver, conn, &mut conns, &mut template, local);
                    }
                    Event::Closed { conn, reason } => {
                        conns.remove(&conn);
                        match reason {
                            CloseReason::ConnectFailed(errno) => {
                                local.failed += 1;
                                local.last_errno = errno;
                            }
                            CloseReason::Local => {}
                            CloseReason::PeerClosed | CloseReason::Error(_) => local.errors += 1,
                        }
                    }
                    Event::Accepted { .. } | Event::Woken => {}
                }
            }
            let now = Instant::now();
            if now.duration_since(last_flush) >= Duration::from_millis(100) {
                last_flush = now;
                let delta = std::mem::replace(local, Tally::new());
                if let Ok(mut shared) = self.shared.lock() {
                    shared.merge(&delta);
                }
            }
        }
        for conn in conns.keys() {
            driver.close(*conn);
        }
        // Let the closes go out (bounded: a few polls).
        for _ in 0..10 {
            driver
                .poll(&mut events, Some(Duration::from_millis(1)))
                .map_err(|e| format!("poll: {e}"))?;
            for ev in events.drain(..) {
                if let Event::Received { chunk, .. } = ev {
                    driver.recycle(chunk);
                }
            }
        }
        Ok(())
    }

    /// Sends frames while the window and the connection's queue have room.
    fn fill(
        &self,
        driver: &mut Driver,
        conn: ConnId,
        conns: &mut HashMap<ConnId, Conn>,
        template: &mut FrameTemplate,
        local: &mut Tally,
    ) {
        let Some(c) = conns.get_mut(&conn) else {
            return;
        };
        let now = Instant::now();
        if now >= self.end {
            return;
        }
        let max = self.driver.max_send_queue;
        loop {
            if driver.queued(conn) + template.len() > max {
                driver.want_writable(conn);
                return;
            }
            let Some(seq) = c.held.take().or_else(|| c.window.next_sequence()) else {
                return;
            };
            match driver.send(conn, template.frame(seq)) {
                Ok(()) => c.sent_at.push_back((seq, now)),
                Err(SendError::BufferFull) => {
                    // The core's send chunks ran out for now: this
                    // sequence goes first when there is room again.
                    c.held = Some(seq);
                    driver.want_writable(conn);
                    return;
                }
                Err(_) => {
                    local.errors += 1;
                    return;
                }
            }
        }
    }

    /// Takes the acks that arrived; an unexpected frame is an error.
    fn acks(
        &self,
        conn: ConnId,
        conns: &mut HashMap<ConnId, Conn>,
        limits: &Limits,
        local: &mut Tally,
    ) -> Result<(), ()> {
        let Some(c) = conns.get_mut(&conn) else {
            return Ok(());
        };
        let frame_len = (HEADER_LEN + workload::DATA_FIELDS_LEN + self.payload.len()) as u64;
        loop {
            let len = match peek_frame_len(&c.rx, limits) {
                Ok(len) if len <= c.rx.len() => len,
                Ok(_) => return Ok(()),
                Err(e) if e.code() == dtp_codec::ErrorCode::TRUNCATED => return Ok(()),
                Err(_) => return Err(()),
            };
            let bytes = c.rx.split_to(len).freeze();
            let (frame, _) = decode_frame(&bytes, limits).map_err(|_| ())?;
            let cumulative = workload::parse_ack(&frame).map_err(|_| ())?;
            let newly = c.window.on_ack(cumulative).map_err(|_| ())?;
            let now = Instant::now();
            let mut first = None;
            while let Some(&(seq, t)) = c.sent_at.front() {
                if seq > cumulative {
                    break;
                }
                first.get_or_insert(t);
                c.sent_at.pop_front();
            }
            if let Some(t) = first
                && now >= self.measure_from
                && now < self.end
            {
                local.ops += newly;
                local.bytes += newly * frame_len;
                local.latency.record(now - t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patched_template_is_the_codec_s_frame() {
        let payload = workload::stream_payload();
        let limits = Limits::default();
        let mut t = FrameTemplate::new(&payload, &limits).unwrap();
        for seq in [1u64, 2, 255, 256, 1 << 40, u64::MAX - 1] {
            let mut want = BytesMut::new();
            workload::stream_frame(seq, &payload, false)
                .encode(&mut want, &limits)
                .unwrap();
            assert_eq!(t.frame(seq), &want[..], "sequence {seq}");
        }
        assert_eq!(t.len(), workload::STREAM_FRAME_LEN);
    }
}
