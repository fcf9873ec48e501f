//! DTP over Bluetooth LE (SPEC TRN-4's BLE transport): L2CAP
//! connection-oriented channels through BlueZ's socket API, and the
//! simulated link that stands in for them where there is no controller.
//!
//! This module owns the addresses (`ble:ADDR/psm/N`, `ble-sim:PATH`), the
//! sockets behind them and the SDU sizes of a connection ([`Sdu`]). The
//! IO itself is the socket backends' (io_uring and epoll): a BLE
//! connection is one more socket kind of theirs, message-preserving where
//! TCP and Unix stream sockets are not. Nothing here reads or changes the
//! bytes DTP hands over (SPEC TRN-5).
//!
//! # How DTP's byte stream rides on SDUs
//!
//! * Both links are `SOCK_SEQPACKET` sockets: BlueZ's L2CAP socket
//!   (`AF_BLUETOOTH`, `BTPROTO_L2CAP`, bound with an LE address type, so
//!   the channel is the LE credit-based one BlueZ makes by default) for
//!   `ble:`, a Unix one for `ble-sim:`. One write is one SDU and one
//!   read returns one SDU, in order and reliably.
//! * Fragmentation: the backend sends a connection's queued bytes as
//!   separate messages of at most the MTU each (never more, never merged
//!   past it), cutting DTP frames wherever the MTU falls: non-blocking
//!   `sendmsg` calls while the socket takes them, on io_uring too (a ring
//!   round trip per SDU would cap a link at one SDU per poll), and an
//!   asynchronous send that waits for room when it does not. Reassembly: the
//!   receiver hands each SDU on as it came; the engine reads DTP frames out
//!   of the concatenation by their own length fields, as on TCP. No header
//!   of our own is needed because the channel neither loses, reorders nor
//!   merges SDUs. An empty SDU reads like the end of the connection and is
//!   taken as one (our own sends never make one).
//! * MTU handling: receive buffers (the core's pool chunks) must be larger
//!   than the MTU, so that a message longer than the MTU — the peer broke
//!   the agreed size, or a buffer would have cut it short — is seen for
//!   what it is: the connection closes with `EMSGSIZE`, and no byte is
//!   ever lost silently. The simulated link has one MTU for both
//!   directions, the one its endpoint names: both ends must name the same.
//!   On L2CAP the receive MTU is set with `BT_RCVMTU` before the channel
//!   opens, and the send side never exceeds the peer's (`BT_SNDMTU`, read
//!   once the channel is up). Each SDU takes one receive buffer until the engine has read it: small
//!   SDUs use the core's receive memory poorly, but never more of it.
//! * Flow control: L2CAP LE credit-based flow control lets a sender send
//!   only while it holds credits; without them the kernel makes the socket
//!   unwritable until the peer grants more. The simulated link does the
//!   same when its send buffer is full (some 160 SDUs of 247 bytes with
//!   the default `SO_SNDBUF`). Either way the backend stops sending, the
//!   connection's bounded send queue fills, and the producer is refused
//!   with `BufferFull` until `Writable` (SPEC TRN-2): the backpressure of
//!   every other transport.
//!
//! # What was tested where
//!
//! The machines this was written on have no Bluetooth controller and no
//! kernel support for `AF_BLUETOOTH`: the L2CAP path (the `sockaddr_l2`
//! layout, `BT_RCVMTU`/`BT_SNDMTU`, PSM binding) is written to BlueZ's
//! ABI and checked byte for byte in unit tests, but has never carried a
//! byte over the air. Opening it fails cleanly: `Bluetooth is not
//! available on this host (<the OS error>)`. Everything above the socket
//! — SDU cutting, the MTU checks, backpressure, the conformance suite and
//! DTP end to end — runs over the simulated link on both backends.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::socket::{get_option, set_option};

/// The MTU of an endpoint that names none: the common LE ATT MTU, the
/// payload one 251-byte LE data-length-extension PDU carries after the
/// L2CAP header.
pub const DEFAULT_MTU: u16 = 247;

/// The smallest MTU an L2CAP LE credit-based channel may use (the
/// Bluetooth Core specification's floor for its connection request).
pub const MIN_MTU: u16 = 23;

/// `BTPROTO_L2CAP` (`<bluetooth/bluetooth.h>`; libc does not carry it).
const BTPROTO_L2CAP: i32 = 0;
/// `SOL_BLUETOOTH`.
const SOL_BLUETOOTH: i32 = 274;
/// `BT_SNDMTU`: the peer's receive MTU, what this side may send (read only).
const BT_SNDMTU: i32 = 12;
/// `BT_RCVMTU`: this side's receive MTU, set before the channel opens.
const BT_RCVMTU: i32 = 13;
/// `BDADDR_LE_PUBLIC` and `BDADDR_LE_RANDOM`: the address types of LE.
const BDADDR_LE_PUBLIC: u8 = 0x01;
const BDADDR_LE_RANDOM: u8 = 0x02;

/// A Bluetooth device address, written `00:11:22:33:44:55` (most
/// significant byte first, as the device shows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BdAddr(pub [u8; 6]);

impl BdAddr {
    /// `00:00:00:00:00:00`: listen on every adapter.
    pub const ANY: Self = Self([0; 6]);
}

impl fmt::Display for BdAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02X}:{b:02X}:{c:02X}:{d:02X}:{e:02X}:{g:02X}")
    }
}

impl std::str::FromStr for BdAddr {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHY: &str = "a Bluetooth address is six hex bytes like 00:11:22:33:44:55";
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or(WHY)?;
            if part.len() != 2 {
                return Err(WHY);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| WHY)?;
        }
        if parts.next().is_some() {
            return Err(WHY);
        }
        Ok(Self(out))
    }
}

/// SPEC TRN-4: where a BLE channel goes or listens (`ble:ADDR/psm/N`):
/// the device, its address type, the L2CAP PSM and the MTU this side
/// receives (and at most sends).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BleAddr {
    /// The peer to connect to, or the local adapter to listen on
    /// ([`BdAddr::ANY`]: every adapter).
    pub device: BdAddr,
    /// A random (rather than public) LE address (`?type=random`).
    pub random: bool,
    /// The L2CAP PSM: 0x01–0x7F are assigned by the Bluetooth SIG, 0x80–0xFF
    /// are free for applications (LE dynamic range).
    pub psm: u16,
    /// The SDU size this side receives, and sends at most (`?mtu=N`).
    pub mtu: u16,
}

impl fmt::Display for BleAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ble:{}/psm/{}?mtu={}", self.device, self.psm, self.mtu)?;
        if self.random {
            f.write_str("&type=random")?;
        }
        Ok(())
    }
}

/// Reads the part of a `ble:` endpoint after the scheme:
/// `ADDR/psm/N[?mtu=M][&type=public|random]`, PSM in decimal or `0x` hex.
pub(crate) fn parse_ble(rest: &str) -> Result<BleAddr, &'static str> {
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let Some((device, psm)) = main.split_once("/psm/") else {
        return Err("expected ble:ADDR/psm/N (e.g. ble:00:11:22:33:44:55/psm/128)");
    };
    let device = device.parse()?;
    let psm = match psm.strip_prefix("0x").or_else(|| psm.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16),
        None => psm.parse(),
    }
    .ok()
    .filter(|p| (0x01..=0xff).contains(p))
    .ok_or("a BLE PSM is 1 to 255 (0x80 to 0xFF for applications)")?;
    let (mtu, random) = options(query, true)?;
    Ok(BleAddr {
        device,
        random,
        psm,
        mtu,
    })
}

/// Reads the part of a `ble-sim:` endpoint after the scheme:
/// `PATH[?mtu=M]`.
pub(crate) fn parse_sim(rest: &str) -> Result<(PathBuf, u16), &'static str> {
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err("a ble-sim: endpoint needs a path (ble-sim:PATH?mtu=N)");
    }
    crate::endpoint::check_unix_path(path)?;
    let (mtu, _) = options(query, false)?;
    Ok((PathBuf::from(path), mtu))
}

/// The `key=value` options after `?`, joined by `&`: `mtu` (both kinds),
/// `type` (`ble:` only). Returns the MTU and whether the address is random.
fn options(query: Option<&str>, ble: bool) -> Result<(u16, bool), &'static str> {
    let mut mtu = DEFAULT_MTU;
    let mut random = false;
    for option in query.into_iter().flat_map(|q| q.split('&')) {
        match option.split_once('=') {
            Some(("mtu", n)) => {
                mtu = n
                    .parse()
                    .ok()
                    .filter(|m| *m >= MIN_MTU)
                    .ok_or("mtu is an SDU size of 23 to 65535 bytes")?;
            }
            Some(("type", "public")) if ble => random = false,
            Some(("type", "random")) if ble => random = true,
            Some(("type", _)) if ble => return Err("type is public or random"),
            _ if ble => return Err("the options of ble: are mtu=N and type=public|random"),
            _ => return Err("the option of ble-sim: is mtu=N"),
        }
    }
    Ok((mtu, random))
}

/// The SDU sizes of a message-preserving (BLE) connection: what the
/// backends cut sends to and check receives against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sdu {
    /// The largest message sent.
    pub(crate) send: usize,
    /// The largest message accepted: a longer one ends the connection.
    pub(crate) recv: usize,
    /// An L2CAP channel: the peer's receive MTU may lower `send` once the
    /// channel is up ([`Sdu::settle`]).
    l2cap: bool,
}

impl Sdu {
    /// One MTU both ways.
    pub(crate) fn new(mtu: u16, l2cap: bool) -> Self {
        Self {
            send: mtu.into(),
            recv: mtu.into(),
            l2cap,
        }
    }

    /// Once a channel is up: an L2CAP channel never sends more than the
    /// peer takes (`BT_SNDMTU`). Untested on hardware (see the module docs).
    pub(crate) fn settle(&mut self, fd: RawFd) {
        if self.l2cap
            && let Some(peer) = get_option(&Raw(fd), SOL_BLUETOOTH, BT_SNDMTU, 0u16)
            && peer > 0
        {
            self.send = self.send.min(peer.into());
        }
    }

    /// Whether a message of `len` bytes breaks the MTU (or was cut short by
    /// the receive buffer, which is longer than the MTU).
    pub(crate) fn refuses(&self, len: usize) -> bool {
        len > self.recv
    }
}

/// A connection's descriptor, borrowed for one option call.
struct Raw(RawFd);

impl AsRawFd for Raw {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A new L2CAP `SOCK_SEQPACKET` socket (close-on-exec, non-blocking when
/// asked), or the error that says Bluetooth cannot be used here.
fn l2cap_socket(nonblocking: bool) -> io::Result<Socket> {
    let ty = if nonblocking {
        Type::SEQPACKET.cloexec().nonblocking()
    } else {
        Type::SEQPACKET.cloexec()
    };
    Socket::new(
        Domain::from(libc::AF_BLUETOOTH),
        ty,
        Some(Protocol::from(BTPROTO_L2CAP)),
    )
    .map_err(unavailable)
}

/// What a host without Bluetooth (no controller, or a kernel without
/// `AF_BLUETOOTH`) answers, in words a user can act on.
fn unavailable(e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("Bluetooth is not available on this host ({e})"),
    )
}

/// Whether this host can open a Bluetooth L2CAP socket: `Ok`, or the
/// error (`Bluetooth is not available on this host (…)`) a `ble:`
/// endpoint would meet. For a gateway to refuse such a listener before it
/// starts.
pub fn probe_ble() -> io::Result<()> {
    l2cap_socket(false).map(drop)
}

/// A listening L2CAP socket on `at`'s adapter and PSM, receiving SDUs of
/// up to its MTU. A PSM below 0x80 needs `CAP_NET_BIND_SERVICE`.
pub(crate) fn l2cap_listener(at: &BleAddr) -> io::Result<Socket> {
    let socket = l2cap_socket(false)?;
    socket.bind(&sockaddr_l2(at.device, at.psm, at.random))?;
    set_option(&socket, SOL_BLUETOOTH, BT_RCVMTU, at.mtu)?;
    socket.listen(128)?;
    Ok(socket)
}

/// An outgoing L2CAP socket for `to` (bound to any local adapter with an
/// LE public address, its receive MTU set) and the address to connect to.
pub(crate) fn l2cap_connect_socket(
    to: &BleAddr,
    nonblocking: bool,
) -> io::Result<(Socket, SockAddr)> {
    let socket = l2cap_socket(nonblocking)?;
    // The bind makes the channel an LE one (its source address type), which
    // BT_RCVMTU requires.
    socket.bind(&sockaddr_l2(BdAddr::ANY, 0, false))?;
    set_option(&socket, SOL_BLUETOOTH, BT_RCVMTU, to.mtu)?;
    Ok((socket, sockaddr_l2(to.device, to.psm, to.random)))
}

/// `struct sockaddr_l2` of `<bluetooth/l2cap.h>`.
#[repr(C)]
struct SockaddrL2 {
    family: libc::sa_family_t,
    /// Little-endian.
    psm: u16,
    /// Least significant byte first (the reverse of how it is written).
    bdaddr: [u8; 6],
    /// Little-endian; 0 for a channel by PSM.
    cid: u16,
    bdaddr_type: u8,
}

/// The socket address of an LE channel to `device`'s `psm`.
fn sockaddr_l2(device: BdAddr, psm: u16, random: bool) -> SockAddr {
    let mut bdaddr = device.0;
    bdaddr.reverse();
    let l2 = SockaddrL2 {
        family: libc::AF_BLUETOOTH as libc::sa_family_t,
        psm: psm.to_le(),
        bdaddr,
        cid: 0,
        bdaddr_type: if random {
            BDADDR_LE_RANDOM
        } else {
            BDADDR_LE_PUBLIC
        },
    };
    let len = std::mem::size_of::<SockaddrL2>() as libc::socklen_t;
    let mut storage = socket2::SockAddrStorage::zeroed();
    // SAFETY: the storage (a sockaddr_storage) is larger than SockaddrL2
    // and at least as aligned (8 against 2), so the write stays inside it.
    unsafe { std::ptr::write((&raw mut storage).cast::<SockaddrL2>(), l2) };
    // SAFETY: `storage` holds an initialised sockaddr_l2 of `len` bytes
    // whose family field says so; the rest is zeroes.
    unsafe { SockAddr::new(storage, len) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn sockaddr_l2_is_laid_out_as_bluez_reads_it() {
        let device = "00:11:22:33:44:55".parse().unwrap();
        let sa = sockaddr_l2(device, 0x0080, true);
        assert_eq!(sa.len(), 14, "sizeof(struct sockaddr_l2)");
        // SAFETY: `sa` holds `len` initialised bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts(sa.as_ptr().cast::<u8>(), sa.len() as usize) };
        let family = (libc::AF_BLUETOOTH as u16).to_ne_bytes();
        assert_eq!(
            bytes,
            [
                family[0], family[1], // l2_family
                0x80, 0x00, // l2_psm, little-endian
                0x55, 0x44, 0x33, 0x22, 0x11, 0x00, // l2_bdaddr, reversed
                0x00, 0x00, // l2_cid
                0x02, // l2_bdaddr_type: LE random
                0x00, // padding
            ]
        );
        let public = sockaddr_l2(BdAddr::ANY, 0x00f1, false);
        // SAFETY: as above.
        let bytes = unsafe {
            std::slice::from_raw_parts(public.as_ptr().cast::<u8>(), public.len() as usize)
        };
        assert_eq!(&bytes[2..4], [0xf1, 0x00]);
        assert_eq!(bytes[12], BDADDR_LE_PUBLIC);
    }

    #[test]
    fn ble_addresses_read_psm_mtu_and_type() {
        let a = parse_ble("00:11:22:33:44:55/psm/0x81?mtu=512&type=random").unwrap();
        assert_eq!(a.device.0, [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!((a.psm, a.mtu, a.random), (0x81, 512, true));
        let b = parse_ble("aa:bb:cc:dd:ee:ff/psm/128").unwrap();
        assert_eq!((b.psm, b.mtu, b.random), (128, DEFAULT_MTU, false));
        assert_eq!(b.to_string(), "ble:AA:BB:CC:DD:EE:FF/psm/128?mtu=247");
        for (bad, why) in [
            ("00:11:22:33:44/psm/128", "six hex bytes"),
            ("00:11:22:33:44:5g/psm/128", "six hex bytes"),
            ("00:11:22:33:44:55", "ble:ADDR/psm/N"),
            ("00:11:22:33:44:55/psm/0", "1 to 255"),
            ("00:11:22:33:44:55/psm/256", "1 to 255"),
            ("00:11:22:33:44:55/psm/x", "1 to 255"),
            ("00:11:22:33:44:55/psm/128?mtu=22", "23 to 65535"),
            ("00:11:22:33:44:55/psm/128?mtu=65536", "23 to 65535"),
            ("00:11:22:33:44:55/psm/128?type=static", "public or random"),
            ("00:11:22:33:44:55/psm/128?speed=1", "mtu=N and type"),
        ] {
            let e = parse_ble(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn simulated_links_read_a_path_and_an_mtu() {
        assert_eq!(
            parse_sim("/tmp/a.sock?mtu=23").unwrap(),
            (PathBuf::from("/tmp/a.sock"), 23)
        );
        assert_eq!(parse_sim("a.sock").unwrap().1, DEFAULT_MTU);
        assert!(parse_sim("").is_err());
        assert!(parse_sim("?mtu=30").is_err());
        assert!(parse_sim("a?type=random").unwrap_err().contains("mtu=N"));
    }

    #[test]
    fn an_mtu_must_stay_below_the_receive_buffer() {
        let at = crate::Endpoint::BleSim {
            path: "a".into(),
            mtu: 4096,
        };
        assert!(at.fits_receive_buffers(8192).is_ok());
        let e = at.fits_receive_buffers(4096).unwrap_err();
        assert!(e.to_string().contains("io.chunk_size"), "{e}");
        let sdu = Sdu::new(4096, false);
        assert!(!sdu.refuses(4096) && sdu.refuses(4097));
    }

    #[test]
    fn a_host_without_bluetooth_says_so() {
        match probe_ble() {
            Ok(()) => {} // a host with Bluetooth: nothing to check here
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported);
                assert!(
                    e.to_string()
                        .starts_with("Bluetooth is not available on this host ("),
                    "{e}"
                );
            }
        }
    }
}
