//! A TCP proxy on loopback that forwards bytes both ways and resets
//! connections: the first `cuts` connections each get a byte budget drawn
//! from a seeded generator; when the bytes forwarded (both directions
//! together) reach it, the proxy forwards the part of the read that fits,
//! then closes both sockets with SO_LINGER 0 — an RST to each side, as a
//! middlebox or a crashed peer would send. Later connections are
//! forwarded untouched. Dropping the proxy stops it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::SockRef;

/// How long a pump waits on one direction before looking at the other.
const POLL: Duration = Duration::from_millis(1);

/// The proxy: its listening address, its stop flag and its reset count.
pub(crate) struct RstProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    resets: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

impl RstProxy {
    /// Listens on 127.0.0.1 and forwards each connection to `upstream`;
    /// the first `cuts` connections are reset after a budget drawn from
    /// `budget` (bytes, both directions) by a generator seeded with `seed`.
    pub(crate) fn start(
        upstream: SocketAddr,
        seed: u64,
        cuts: usize,
        budget: Range<usize>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let resets = Arc::new(AtomicUsize::new(0));
        let (stop2, resets2) = (stop.clone(), resets.clone());
        let accept = std::thread::spawn(move || {
            let mut rng = SplitMix(seed);
            let mut accepted = 0;
            let mut pumps = Vec::new();
            while !stop2.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let cut = (accepted < cuts).then(|| rng.in_range(&budget));
                        accepted += 1;
                        let (stop, resets) = (stop2.clone(), resets2.clone());
                        pumps.push(std::thread::spawn(move || {
                            pump(client, upstream, cut, &stop, &resets);
                        }));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => panic!("proxy accept: {e}"),
                }
            }
            for p in pumps {
                let _ = p.join();
            }
        });
        RstProxy {
            addr,
            stop,
            resets,
            accept: Some(accept),
        }
    }

    /// Where clients connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections reset so far.
    pub(crate) fn resets(&self) -> usize {
        self.resets.load(Ordering::Acquire)
    }
}

impl Drop for RstProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Forwards between `client` and a new connection to `upstream` until
/// either side closes, the proxy stops, or `cut` bytes went through (then
/// both sides are reset).
fn pump(
    client: TcpStream,
    upstream: SocketAddr,
    cut: Option<usize>,
    stop: &AtomicBool,
    resets: &AtomicUsize,
) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    for s in [&client, &server] {
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(POLL)).unwrap();
    }
    let mut forwarded = 0;
    let mut buf = vec![0u8; 16 * 1024];
    while !stop.load(Ordering::Acquire) {
        for (mut from, mut to) in [(&client, &server), (&server, &client)] {
            let n = match from.read(&mut buf) {
                Ok(0) => return, // one side closed: both sockets close (FIN)
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    continue;
                }
                Err(_) => return,
            };
            if let Some(budget) = cut
                && forwarded + n >= budget
            {
                let _ = to.write_all(&buf[..budget - forwarded]);
                reset(&client);
                reset(&server);
                resets.fetch_add(1, Ordering::AcqRel);
                return;
            }
            forwarded += n;
            if to.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    }
}

/// SO_LINGER 0: closing the socket (when the pump returns) sends an RST.
fn reset(s: &TcpStream) {
    SockRef::from(s).set_linger(Some(Duration::ZERO)).unwrap();
}

/// Seeded "random" numbers (splitmix64): a failing run can be repeated.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn in_range(&mut self, r: &Range<usize>) -> usize {
        r.start + (self.next() % (r.end - r.start) as u64) as usize
    }
}
