//! The machine's UDP loopback limit for the QUIC stream workload: how fast
//! UDP datagrams of the size QUIC sends on 127.0.0.1 move from one socket
//! to another when nothing but the kernel's work is done.
//!
//! Each flow is a sender thread and a receiver thread with a UDP socket
//! each. The sender writes batches of [`DATAGRAM`]-byte datagrams, as many
//! in one `sendmsg` as our QUIC transport puts in one (UDP GSO,
//! [`BATCH_BYTES`] at most), for the given duration; the receiver reads
//! with UDP GRO into a 64 KiB buffer (several datagrams coalesced per
//! read) until the datagrams stop. The sockets come from `quinn-udp`, the
//! same socket layer the quinn peer uses, which turns GSO and GRO on where
//! the kernel has them (and falls back to one datagram per call where it
//! does not). The figure is the payload bytes the receivers got divided by
//! the longest receiver's time from its first datagram to its last.
//!
//! **A window, as QUIC keeps one.** Nothing in UDP slows a sender down to
//! what its receiver takes: a sender running flat out on the same two
//! cores takes CPU from its receiver and has most of its datagrams
//! dropped, and the figure then says more about the scheduler than about
//! the kernel's UDP path (it varied fivefold from run to run). So each
//! receiver tells its sender how many bytes it has received, in an 8-byte
//! datagram every [`ACK_EVERY`] bytes, and the sender keeps at most
//! [`WINDOW`] bytes (our QUIC receive window) beyond that in flight; a
//! window with no answer for `ACK_WAIT` is written off as dropped. This
//! is the least a QUIC sender does (flow control and acks, without the
//! encryption, the congestion control or the per-packet work), so the
//! figure bounds `dtp-stream-quic` the way the TCP loopback limit
//! ([`crate::loopback`]) bounds `dtp-stream`.
//!
//! Plain `std::net` sockets, blocking: the point is the kernel's cost.
//! This module owns its threads and sockets and leaves nothing running
//! when it returns.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};

/// The UDP payload of one datagram: quinn-proto's largest MTU by default
/// (its MTU discovery's upper bound), which QUIC reaches on loopback.
pub const DATAGRAM: usize = 1452;
/// Most UDP payload one send carries, as in our QUIC transport (a GSO
/// batch stays within one IP datagram's 64 KiB).
pub const BATCH_BYTES: usize = 65_000;
/// Socket buffers, as our QUIC transport sets them.
const SOCKET_BUFFER: usize = 2 << 20;
/// How long a receiver waits for more once its sender has stopped.
const DRAIN: Duration = Duration::from_millis(100);
/// The most bytes a sender has in flight beyond what its receiver said it
/// received: our QUIC transport's receive window.
pub const WINDOW: u64 = 1 << 20;
/// A receiver tells its sender what it has received every this many bytes.
pub const ACK_EVERY: u64 = 64 * 1024;
/// How long a sender with a full window waits for an answer before it
/// writes the window off as dropped.
const ACK_WAIT: Duration = Duration::from_millis(20);

/// What one UDP loopback run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpLoopbackResult {
    /// Payload bytes the receivers got.
    pub bytes: u64,
    /// Payload bytes the senders sent (the rest was dropped).
    pub sent: u64,
    /// The longest receiver's time from its first datagram to its last.
    pub elapsed: Duration,
    /// `bytes / elapsed`.
    pub bytes_per_s: f64,
    /// Datagrams per send (1 without GSO).
    pub segments: usize,
}

/// Measures `flows` sender–receiver pairs at once for `duration`.
pub fn measure(duration: Duration, flows: usize) -> io::Result<UdpLoopbackResult> {
    let runs: Vec<io::Result<UdpLoopbackResult>> = thread::scope(|s| {
        let handles: Vec<_> = (0..flows.max(1))
            .map(|_| s.spawn(|| flow(duration)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a UDP loopback flow panicked")))
            })
            .collect()
    });
    let mut total = UdpLoopbackResult {
        bytes: 0,
        sent: 0,
        elapsed: Duration::ZERO,
        bytes_per_s: 0.0,
        segments: usize::MAX,
    };
    for r in runs {
        let r = r?;
        total.bytes += r.bytes;
        total.sent += r.sent;
        total.elapsed = total.elapsed.max(r.elapsed);
        total.segments = total.segments.min(r.segments);
    }
    let secs = total.elapsed.as_secs_f64();
    total.bytes_per_s = if secs > 0.0 {
        total.bytes as f64 / secs
    } else {
        0.0
    };
    Ok(total)
}

/// One sender–receiver pair.
fn flow(duration: Duration) -> io::Result<UdpLoopbackResult> {
    let (rx, rx_state) = socket()?;
    let (tx, tx_state) = socket()?;
    let to = rx.local_addr()?;
    let from = tx.local_addr()?;
    let segments = tx_state.max_gso_segments().clamp(1, BATCH_BYTES / DATAGRAM);
    rx.set_read_timeout(Some(DRAIN))?;
    let stopped = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stopped = Arc::clone(&stopped);
        thread::Builder::new()
            .name("udp-loopback-rx".into())
            .spawn(move || receive(&rx, &rx_state, from, &stopped))?
    };
    let sent = send(&tx, &tx_state, to, segments, duration);
    stopped.store(true, Ordering::Release);
    let received = receiver
        .join()
        .map_err(|_| io::Error::other("the UDP loopback receiver panicked"))?;
    let sent = sent?;
    let (bytes, elapsed) = received?;
    let secs = elapsed.as_secs_f64();
    Ok(UdpLoopbackResult {
        bytes,
        sent,
        elapsed,
        bytes_per_s: if secs > 0.0 { bytes as f64 / secs } else { 0.0 },
        segments,
    })
}

/// A blocking UDP socket on 127.0.0.1 with quinn-udp's offloads and our
/// transport's buffer sizes.
fn socket() -> io::Result<(UdpSocket, UdpSocketState)> {
    let sock = UdpSocket::bind(("127.0.0.1", 0))?;
    let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
    // Best effort, as in our transport (the system's ceiling may be lower).
    let _ = state.set_recv_buffer_size(UdpSockRef::from(&sock), SOCKET_BUFFER);
    let _ = state.set_send_buffer_size(UdpSockRef::from(&sock), SOCKET_BUFFER);
    Ok((sock, state))
}

/// Sends batches of `segments` datagrams to `to` for `duration`, keeping
/// at most [`WINDOW`] bytes in flight; the payload bytes sent.
fn send(
    sock: &UdpSocket,
    state: &UdpSocketState,
    to: SocketAddr,
    segments: usize,
    duration: Duration,
) -> io::Result<u64> {
    let batch = vec![0x5au8; DATAGRAM * segments];
    let transmit = Transmit {
        destination: to,
        ecn: None,
        contents: &batch,
        segment_size: (segments > 1).then_some(DATAGRAM),
        src_ip: None,
    };
    let deadline = Instant::now() + duration;
    let mut sent = 0u64;
    // What the receiver said it got, plus what was written off as dropped.
    let mut settled = 0u64;
    let mut acked = 0u64;
    let mut answer = [0u8; 8];
    while Instant::now() < deadline {
        // Take every answer waiting; with a full window, wait for one.
        let full = sent.saturating_sub(settled) >= WINDOW;
        sock.set_nonblocking(!full)?;
        if full {
            sock.set_read_timeout(Some(ACK_WAIT))?;
        }
        loop {
            match sock.recv(&mut answer) {
                Ok(8) => {
                    let got = u64::from_le_bytes(answer);
                    settled += got.saturating_sub(acked);
                    acked = acked.max(got);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if full && sent.saturating_sub(settled) >= WINDOW {
                        // No answer: what is in flight was dropped.
                        settled = sent;
                    }
                    break;
                }
                Err(e) => return Err(e),
            }
            if sock.set_nonblocking(true).is_err() {
                break;
            }
        }
        if sent.saturating_sub(settled) >= WINDOW {
            continue;
        }
        match state.try_send(UdpSockRef::from(sock), &transmit) {
            Ok(()) => sent += batch.len() as u64,
            // The receiver's queue is full: the kernel dropped the batch
            // or has no room just now. Either way the sender goes on.
            Err(e)
                if e.raw_os_error() == Some(ENOBUFS) || e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// `ENOBUFS` on Linux: a send the kernel had no buffer for.
const ENOBUFS: i32 = 105;

/// Reads until no datagram has come for [`DRAIN`] after `stopped`,
/// telling `sender` what it has received every [`ACK_EVERY`] bytes; the
/// payload bytes and the time from the first datagram to the last.
fn receive(
    sock: &UdpSocket,
    state: &UdpSocketState,
    sender: SocketAddr,
    stopped: &AtomicBool,
) -> io::Result<(u64, Duration)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut meta = [RecvMeta::default()];
    let mut bytes = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut told = 0u64;
    loop {
        let mut bufs = [IoSliceMut::new(&mut buf)];
        match state.recv(UdpSockRef::from(sock), &mut bufs, &mut meta) {
            Ok(n) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                bytes += meta[..n].iter().map(|m| m.len as u64).sum::<u64>();
                if bytes - told >= ACK_EVERY {
                    // A lost answer is made good by the next one.
                    let _ = sock.send_to(&bytes.to_le_bytes(), sender);
                    told = bytes;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stopped.load(Ordering::Acquire) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((bytes, first.map_or(Duration::ZERO, |f| last - f)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_short_run_moves_datagrams() {
        let r = measure(Duration::from_millis(100), 2).unwrap();
        assert!(r.bytes > 0 && r.bytes <= r.sent);
        assert!(r.bytes_per_s > 0.0);
        assert!(r.segments >= 1);
    }
}
