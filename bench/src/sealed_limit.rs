//! The sealed-stream limit (DESIGN.md §4) as what two cores can do raw: one
//! thread seals [`FRAGMENT_LEN`]-byte fragments with AES-256-GCM (`ring`,
//! the algorithm and fragment size of `dtp-stream`) and writes them into a
//! loopback TCP connection; the other reads them and opens each one (the
//! tag verified). Nothing else is done: no framing beyond a fixed record
//! size, no acks, no runtime. `dtp bench` reports `dtp-stream` as a
//! fraction of it, measured in the same run; unlike one core's sealing
//! rate ([`crate::aead_limit`]) it includes the kernel's copy and the
//! opening on the other side, which every sealed stream pays too.
//!
//! How the two threads work:
//! - **Sender**: for each fragment, copies the plaintext into its place in
//!   the send buffer (the one copy a sealed stream makes in user space),
//!   seals it there with a nonce derived from the fragment's number and a
//!   24-byte associated data (as a sealed frame's header is), appends the
//!   tag; writes [`BATCH`] records at once (a gathered send of that many
//!   chunks in the engine), until the window ends, then shuts its side.
//! - **Receiver**: reads whole batches, opens every record in place with
//!   the nonce it expects next, counts the plaintext bytes that verified.
//!   Its time runs from its first read to end of stream.
//!
//! Both ends use the congestion control given (the load generator's, reno
//! by default, as [`crate::loopback`]). Plain `std::net`, blocking IO; the
//! module owns its two threads and its socket and leaves nothing running.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// Plaintext bytes per fragment: `dtp-stream`'s payload.
pub const FRAGMENT_LEN: usize = 16 * 1024;
/// Bytes of the associated data bound to each fragment (a sealed frame's
/// header and data fields, about).
const AAD_LEN: usize = 24;
/// AES-256-GCM's tag.
const TAG_LEN: usize = 16;
/// One record on the wire: the sealed fragment and its tag.
const RECORD_LEN: usize = FRAGMENT_LEN + TAG_LEN;
/// Records per write and per read.
pub const BATCH: usize = 16;

/// What one run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SealedLimit {
    /// Fragments the sender sealed and wrote.
    pub sent: u64,
    /// Fragments the receiver opened with a valid tag.
    pub verified: u64,
    /// Fragments whose tag did not verify (0 unless something is broken).
    pub failed: u64,
    /// The receiver's time from its first read to end of stream.
    pub elapsed: Duration,
    /// Plaintext bytes verified per second (`verified × FRAGMENT_LEN / elapsed`).
    pub bytes_per_s: f64,
}

/// Measures the sealed-stream limit for about `duration` on one loopback
/// connection, both ends using the TCP congestion control `congestion`
/// (`None`: the system's default).
pub fn measure(duration: Duration, congestion: Option<&str>) -> io::Result<SealedLimit> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    // Connect before accepting (the backlog takes it), so a failure on
    // either end is an error here, never a thread blocked in accept.
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    if let Some(cc) = congestion {
        for s in [&client, &server] {
            socket2::SockRef::from(s).set_tcp_congestion(cc.as_bytes())?;
        }
    }
    let key = [0x42u8; 32];
    let writer = thread::Builder::new()
        .name("sealed-writer".into())
        .spawn(move || seal_and_write(client, &key, duration))?;
    let read = read_and_open(server, &key);
    let sent = writer
        .join()
        .map_err(|_| io::Error::other("the sealed-stream writer panicked"))??;
    let (verified, failed, elapsed) = read?;
    if verified + failed != sent {
        return Err(io::Error::other(format!(
            "sealed stream: sent {sent} fragments, received {}",
            verified + failed
        )));
    }
    let secs = elapsed.as_secs_f64();
    Ok(SealedLimit {
        sent,
        verified,
        failed,
        elapsed,
        bytes_per_s: if secs > 0.0 {
            (verified * FRAGMENT_LEN as u64) as f64 / secs
        } else {
            0.0
        },
    })
}

fn aes_key(key: &[u8; 32]) -> io::Result<LessSafeKey> {
    UnboundKey::new(&AES_256_GCM, key)
        .map(LessSafeKey::new)
        .map_err(|_| io::Error::other("AES-256-GCM key rejected"))
}

/// Fragment `n`'s nonce (derived from its number, as a frame's from its
/// sequence) and associated data.
fn nonce_and_aad(n: u64) -> (Nonce, [u8; AAD_LEN]) {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&n.to_be_bytes());
    let mut aad = [0u8; AAD_LEN];
    aad[..8].copy_from_slice(&n.to_be_bytes());
    (Nonce::assume_unique_for_key(nonce), aad)
}

/// The sender: seals fragments into the send buffer and writes them in
/// batches until `duration` has passed; returns the fragments written.
fn seal_and_write(mut sock: TcpStream, key: &[u8; 32], duration: Duration) -> io::Result<u64> {
    let key = aes_key(key)?;
    let plaintext: Vec<u8> = (0..FRAGMENT_LEN).map(|i| (i % 251) as u8).collect();
    let mut buf = vec![0u8; BATCH * RECORD_LEN];
    let deadline = Instant::now() + duration;
    let mut n = 0u64;
    while Instant::now() < deadline {
        for record in buf.chunks_exact_mut(RECORD_LEN) {
            n += 1;
            let (data, tag_room) = record.split_at_mut(FRAGMENT_LEN);
            data.copy_from_slice(&plaintext);
            let (nonce, aad) = nonce_and_aad(n);
            let tag = key
                .seal_in_place_separate_tag(nonce, Aad::from(aad), data)
                .map_err(|_| io::Error::other("sealing failed"))?;
            tag_room.copy_from_slice(tag.as_ref());
        }
        sock.write_all(&buf)?;
    }
    sock.shutdown(Shutdown::Write)?;
    Ok(n)
}

/// The receiver: reads whole batches and opens every record; returns the
/// fragments verified, those that failed, and its time.
fn read_and_open(mut sock: TcpStream, key: &[u8; 32]) -> io::Result<(u64, u64, Duration)> {
    let key = aes_key(key)?;
    let mut buf = vec![0u8; BATCH * RECORD_LEN];
    let start = Instant::now();
    let (mut n, mut verified, mut failed) = (0u64, 0u64, 0u64);
    loop {
        // The sender writes whole batches, so end of stream falls between two.
        if !read_batch(&mut sock, &mut buf)? {
            break;
        }
        for record in buf.chunks_exact_mut(RECORD_LEN) {
            n += 1;
            let (nonce, aad) = nonce_and_aad(n);
            match key.open_in_place(nonce, Aad::from(aad), record) {
                Ok(_) => verified += 1,
                Err(_) => failed += 1,
            }
        }
    }
    Ok((verified, failed, start.elapsed()))
}

/// Fills `buf`; false at end of stream before its first byte.
fn read_batch(sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match sock.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_delivers_verified_fragments() {
        let r = measure(Duration::from_millis(50), None).unwrap();
        assert!(r.sent > 0);
        assert_eq!(r.sent % BATCH as u64, 0);
        assert_eq!(r.verified, r.sent, "every fragment verified: {r:?}");
        assert_eq!(r.failed, 0);
        assert!(r.bytes_per_s > 0.0);
    }

    /// Prints the figure for a 2-second window: `cargo test --release -p
    /// dtp-bench --lib sealed_limit -- --ignored --nocapture` (alone on the
    /// machine).
    #[test]
    #[ignore = "a measurement, not a test: run it on purpose"]
    fn print_the_limit() {
        let r = measure(Duration::from_secs(2), Some("reno")).unwrap();
        println!(
            "sealed-stream limit: {:.2} GB/s ({} fragments verified, {} failed)",
            r.bytes_per_s / 1e9,
            r.verified,
            r.failed
        );
        assert_eq!(r.failed, 0);
    }

    #[test]
    fn a_tampered_record_fails_to_open() {
        let key = aes_key(&[0x42; 32]).unwrap();
        let mut record = vec![7u8; FRAGMENT_LEN];
        let (nonce, aad) = nonce_and_aad(1);
        let tag = key
            .seal_in_place_separate_tag(nonce, Aad::from(aad), &mut record)
            .unwrap();
        record.extend_from_slice(tag.as_ref());
        let mut bad = record.clone();
        bad[100] ^= 1;
        let (nonce, aad) = nonce_and_aad(1);
        assert!(key.open_in_place(nonce, Aad::from(aad), &mut bad).is_err());
        let (nonce, aad) = nonce_and_aad(1);
        let plain = key
            .open_in_place(nonce, Aad::from(aad), &mut record)
            .unwrap();
        assert_eq!(plain, &[7u8; FRAGMENT_LEN][..]);
    }
}
