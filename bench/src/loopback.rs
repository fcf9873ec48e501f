//! The machine's loopback limit for `stream`: how fast TCP connections on
//! 127.0.0.1 move bytes when nothing but the copy is done.
//!
//! Two threads and one connection: the writer writes 1 MiB buffers as fast as
//! it can for the given duration, then closes its side; the reader reads into
//! a 1 MiB buffer until end of stream. The figure is the bytes the reader got
//! divided by the reader's time from its first read call to end of stream. It bounds what
//! any server can do with `stream` on this machine (the server's own work,
//! decode and acks, only adds to the copy), so `dtp bench` reports our
//! `stream` goodput as a fraction of it, measured in the same run.
//!
//! Both ends use the congestion control the load generator uses (reno by
//! default, see `dtp load --help`): with the kernel's default on this
//! machine, BBR, pacing caps the copy at about half, which would understate
//! the limit.
//!
//! Plain `std::net` and blocking IO: the point is the kernel's copy cost, with
//! as little user-space work as possible. This module owns its two threads
//! and its socket and leaves nothing running when it returns.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// The size of each write and of the read buffer.
pub const BUF_LEN: usize = 1024 * 1024;

/// What one loopback run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopbackResult {
    /// Bytes the reader received.
    pub bytes: u64,
    /// The reader's time from its first read call to end of stream.
    pub elapsed: Duration,
    /// `bytes / elapsed`.
    pub bytes_per_s: f64,
}

/// Measures one connection on 127.0.0.1 for `duration` with [`BUF_LEN`]
/// buffers, both ends using the TCP congestion control `congestion`
/// (`None`: the system's default).
pub fn measure(duration: Duration, congestion: Option<&str>) -> io::Result<LoopbackResult> {
    measure_with(duration, BUF_LEN, congestion)
}

/// Measures one connection on 127.0.0.1 for `duration`, writing and reading
/// `buf_len` bytes at a time.
pub fn measure_with(
    duration: Duration,
    buf_len: usize,
    congestion: Option<&str>,
) -> io::Result<LoopbackResult> {
    let buf_len = buf_len.max(1);
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    // Connect before accepting (the backlog takes it), so a failure on
    // either end is an error here, never a thread blocked in accept.
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    if let Some(cc) = congestion {
        for s in [&client, &server] {
            socket2::SockRef::from(s).set_tcp_congestion(cc.as_bytes())?;
        }
    }
    let writer = thread::Builder::new()
        .name("loopback-writer".into())
        .spawn(move || -> io::Result<u64> {
            let buf = vec![0x5au8; buf_len];
            let deadline = Instant::now() + duration;
            let mut written = 0u64;
            while Instant::now() < deadline {
                client.write_all(&buf)?;
                written += buf_len as u64;
            }
            client.shutdown(Shutdown::Write)?;
            Ok(written)
        })?;
    let read = read_all(server, buf_len);
    let written = writer
        .join()
        .map_err(|_| io::Error::other("the loopback writer panicked"))?;
    let (bytes, elapsed) = read?;
    let written = written?;
    if written != bytes {
        return Err(io::Error::other(format!(
            "loopback: wrote {written} bytes, read {bytes}"
        )));
    }
    let secs = elapsed.as_secs_f64();
    Ok(LoopbackResult {
        bytes,
        elapsed,
        bytes_per_s: if secs > 0.0 { bytes as f64 / secs } else { 0.0 },
    })
}

/// Measures `connections` connections at once for `duration`, each as
/// [`measure`] does (its own writer and reader thread): the limit for a
/// workload that spreads its bytes over that many connections. The figure
/// is all the bytes read over the longest reader's time.
pub fn measure_parallel(
    duration: Duration,
    connections: usize,
    congestion: Option<&str>,
) -> io::Result<LoopbackResult> {
    if connections <= 1 {
        return measure(duration, congestion);
    }
    let runs: Vec<io::Result<LoopbackResult>> = thread::scope(|s| {
        let handles: Vec<_> = (0..connections)
            .map(|_| s.spawn(|| measure(duration, congestion)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a loopback run panicked")))
            })
            .collect()
    });
    let mut bytes = 0;
    let mut elapsed = Duration::ZERO;
    for r in runs {
        let r = r?;
        bytes += r.bytes;
        elapsed = elapsed.max(r.elapsed);
    }
    let secs = elapsed.as_secs_f64();
    Ok(LoopbackResult {
        bytes,
        elapsed,
        bytes_per_s: if secs > 0.0 { bytes as f64 / secs } else { 0.0 },
    })
}

fn read_all(mut sock: TcpStream, buf_len: usize) -> io::Result<(u64, Duration)> {
    let start = Instant::now();
    let mut buf = vec![0u8; buf_len];
    let mut bytes = 0u64;
    loop {
        match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((bytes, start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_moves_bytes() {
        let r = measure_with(Duration::from_millis(50), 64 * 1024, None).unwrap();
        assert!(r.bytes > 0);
        assert_eq!(r.bytes % (64 * 1024), 0);
        assert!(r.bytes_per_s > 0.0);
    }

    #[test]
    fn parallel_runs_add_up() {
        let r = measure_parallel(Duration::from_millis(50), 3, None).unwrap();
        assert!(r.bytes > 0);
        assert_eq!(r.bytes % BUF_LEN as u64, 0);
        assert!(r.elapsed >= Duration::from_millis(50));
    }
}
