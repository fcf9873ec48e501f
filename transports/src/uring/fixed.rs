//! Direct descriptors: connections accepted straight into the ring's
//! registered file table. An operation on a direct descriptor names its
//! slot, so the kernel neither looks the file up in the process's
//! descriptor table nor takes and drops a reference to it per operation
//! (`fget`/`fput`, about 1.5 % of a `pingpong` round trip's server CPU in
//! perf/README.md), and an accepted connection installs no descriptor.
//!
//! The table is registered once per ring, sparse. Where the kernel lacks
//! direct descriptors (before 5.19), the registration fails (the open-file
//! limit bounds the table) or the configuration turns them off, there is
//! no table and every connection is an ordinary descriptor. A multishot
//! accept may take several connections in one kernel pass, and a direct
//! accept that finds the table full closes the connection it accepted; so
//! direct accepts stop while fewer than [`ACCEPT_HEADROOM`] slots are
//! free, and the listener accepts ordinary descriptors until its next
//! re-arm finds room again.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use io_uring::types::{CancelBuilder, Fd, Fixed};
use io_uring::{IoUring, squeue};

/// Free table slots a direct multishot accept keeps in reserve: more than
/// a listen backlog (4096) can hand it in one pass, so it never meets a
/// full table.
pub(super) const ACCEPT_HEADROOM: u32 = 4096 + 1024;

/// A connection's socket: an ordinary descriptor, or a slot of the ring's
/// registered file table.
pub(super) enum Sock {
    /// An ordinary descriptor (outgoing connections, message sockets,
    /// and every connection when there is no table).
    Fd(OwnedFd),
    /// A direct descriptor: closed through the ring ([`FixedTable`]).
    Fixed(u32),
}

impl Sock {
    /// The value of an entry's `fd` field for this socket, and whether the
    /// entry must carry `IOSQE_FIXED_FILE` ([`Sock::entry`]).
    pub(super) fn target(&self) -> (Fd, bool) {
        match self {
            Self::Fd(fd) => (Fd(fd.as_raw_fd()), false),
            Self::Fixed(slot) => (Fd(*slot as RawFd), true),
        }
    }

    /// Marks `entry`, built on [`Sock::target`]'s `fd`, as naming a table
    /// slot where it is one.
    pub(super) fn entry(fixed: bool, entry: squeue::Entry) -> squeue::Entry {
        if fixed {
            entry.flags(squeue::Flags::FIXED_FILE)
        } else {
            entry
        }
    }

    /// The ordinary descriptor, for the calls that need one (socket
    /// options, a message socket's immediate writes).
    pub(super) fn raw(&self) -> Option<RawFd> {
        match self {
            Self::Fd(fd) => Some(fd.as_raw_fd()),
            Self::Fixed(_) => None,
        }
    }

    /// A cancel of every operation on this socket.
    pub(super) fn cancel_all(&self) -> CancelBuilder {
        match self {
            Self::Fd(fd) => CancelBuilder::fd(Fd(fd.as_raw_fd())).all(),
            Self::Fixed(slot) => CancelBuilder::fd(Fixed(*slot)).all(),
        }
    }
}

/// The ring's registered file table and how many of its slots hold a
/// connection (or a close not yet completed).
pub(super) struct FixedTable {
    len: u32,
    used: u32,
}

impl FixedTable {
    /// Registers a sparse table for up to `max_connections` direct
    /// descriptors plus the accept headroom, within the open-file limit;
    /// `None` (ordinary descriptors only) where the kernel refuses it.
    pub(super) fn register(ring: &IoUring, max_connections: usize) -> Option<Self> {
        let want = u32::try_from(max_connections)
            .unwrap_or(u32::MAX)
            .saturating_add(ACCEPT_HEADROOM);
        let len = want.min(open_file_limit()).min(1 << 20);
        if len <= ACCEPT_HEADROOM {
            tracing::info!(
                slots = len,
                "io_uring: the open-file limit leaves no room for direct descriptors; accepting ordinary ones"
            );
            return None;
        }
        match ring.submitter().register_files_sparse(len) {
            Ok(()) => Some(Self { len, used: 0 }),
            Err(e) => {
                tracing::info!(error = %e, "io_uring: no direct descriptors (file table registration refused); accepting ordinary ones");
                None
            }
        }
    }

    /// Whether a (re-)armed accept may take direct descriptors now.
    pub(super) fn room_for_accept(&self) -> bool {
        direct_accept_ok(self.len, self.used)
    }

    /// A direct accept took a slot.
    pub(super) fn taken(&mut self) {
        self.used += 1;
    }

    /// A slot's close completed.
    pub(super) fn freed(&mut self) {
        self.used = self.used.saturating_sub(1);
    }
}

/// Whether a table of `len` slots with `used` taken keeps the accept
/// headroom free.
fn direct_accept_ok(len: u32, used: u32) -> bool {
    len.saturating_sub(used) > ACCEPT_HEADROOM
}

/// The soft open-file limit, which bounds a registered file table.
fn open_file_limit() -> u32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit the call fills in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    u32::try_from(lim.rlim_cur).unwrap_or(u32::MAX)
}

/// The close of table slot `slot`; its completion frees the slot in the
/// count ([`FixedTable::freed`]).
pub(super) fn close_entry(slot: u32) -> squeue::Entry {
    io_uring::opcode::Close::new(Fixed(slot)).build()
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "tests: a panic is the failure report"
    )]

    use std::time::{Duration, Instant};

    use super::*;
    use crate::{BackendPreference, Driver, DriverConfig, Endpoint, Event, Transport};

    /// Connects `n` clients to `server`,
    /// has each send one byte and the server echo it, and checks every
    /// client gets its byte back.
    fn echo_on_every_connection(server: &mut Driver, addr: &Endpoint, n: usize) {
        let mut client = Driver::new(DriverConfig {
            backend: BackendPreference::Uring,
            ..DriverConfig::default()
        })
        .unwrap();
        let conns: Vec<_> = (0..n).map(|_| client.connect(addr).unwrap()).collect();
        let mut events = Vec::new();
        let mut echoed = 0;
        let mut connected = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while echoed < n {
            assert!(Instant::now() < deadline, "no progress within 30 s");
            server
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            for e in events.drain(..) {
                if let Event::Received { conn, data } = e {
                    server.send(conn, &data).unwrap();
                }
            }
            client
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Connected { conn } => {
                        connected += 1;
                        client.send(conn, &[7]).unwrap();
                    }
                    Event::Received { conn, data } => {
                        assert!(conns.contains(&conn));
                        assert_eq!(&data[..], &[7]);
                        echoed += 1;
                    }
                    Event::Closed { reason, .. } => panic!("a connection closed: {reason:?}"),
                    _ => {}
                }
            }
        }
        assert_eq!(connected, n);
    }

    fn listen(server: &mut Driver) -> Endpoint {
        let any = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        server.listen(&any, false).unwrap().1
    }

    fn uring() -> DriverConfig {
        DriverConfig {
            backend: BackendPreference::Uring,
            ..DriverConfig::default()
        }
    }

    #[test]
    fn connections_work_with_and_without_direct_descriptors() {
        for config in [
            uring(),
            DriverConfig {
                fixed_files: false,
                ..uring()
            },
        ] {
            let mut server = Driver::new(config).unwrap();
            let addr = listen(&mut server);
            echo_on_every_connection(&mut server, &addr, 8);
        }
    }

    #[test]
    fn a_nearly_full_table_hands_over_to_ordinary_descriptors() {
        // The open-file limit bounds the table: set up with a limit that
        // leaves room for two direct accepts beyond the headroom, so the
        // other connections must come as ordinary descriptors, none lost.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a live, writable rlimit the call fills in.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        let low = libc::rlimit {
            rlim_cur: libc::rlim_t::from(ACCEPT_HEADROOM + 2).min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `low` is a valid rlimit within the hard limit.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let server = Driver::new(uring());
        // SAFETY: `lim` is the limit read above.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let mut server = server.unwrap();
        let addr = listen(&mut server);
        // The first wave takes the direct slots (and may take more in the
        // same kernel pass: the headroom is ours, not the kernel's); the
        // second comes after the direct accept was ended and re-armed.
        echo_on_every_connection(&mut server, &addr, 3);
        echo_on_every_connection(&mut server, &addr, 3);
    }

    #[test]
    fn direct_accepts_stop_before_the_table_could_overflow() {
        let len = 1000 + ACCEPT_HEADROOM;
        assert!(direct_accept_ok(len, 0));
        assert!(direct_accept_ok(len, 999));
        // One more and a burst of a whole backlog could find no slot.
        assert!(!direct_accept_ok(len, 1000));
        assert!(!direct_accept_ok(len, len));
        assert!(!direct_accept_ok(ACCEPT_HEADROOM, 0));
        // A count above the table (never made) is no room, not a wrap.
        assert!(!direct_accept_ok(len, len + 5));
    }
}
