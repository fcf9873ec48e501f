//! Where a connection goes or a listener listens (SPEC TRN-1's `endpoint`):
//! one address type for every transport, written `SCHEME:ADDRESS`.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use crate::ble::BleAddr;

/// SPEC TRN-1/TRN-4: an address of one transport. Each transport speaks some
/// kinds and refuses the others with
/// [`TransportError::UnsupportedEndpoint`](crate::TransportError).
///
/// Written `tcp:HOST:PORT`, `unix:PATH`, `ws:HOST:PORT/PATH`,
/// `quic:HOST:PORT`, `rtsp:HOST:PORT`, `ble:ADDR/psm/N?mtu=M`,
/// `ble-sim:PATH?mtu=M`, `mem:NAME` by [`fmt::Display`] and read back by
/// [`FromStr`], which also takes the URL-like `tcp://…`, `ws://…`,
/// `quic://…` and `rtsp://…` forms, BLE endpoints without their options
/// (MTU [`DEFAULT_MTU`](crate::BLE_DEFAULT_MTU)) and a bare `HOST:PORT`
/// (TCP). More kinds may join as their transports do, hence
/// `non_exhaustive`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Endpoint {
    /// A TCP address; port 0 in a listen picks a free port.
    Tcp(SocketAddr),
    /// A Unix-domain stream socket at this path.
    Unix(PathBuf),
    /// A name on a [`MemoryHub`](crate::MemoryHub).
    Memory(String),
    /// DTP over WebSocket (RFC 6455, subprotocol `dtp.v1`) on TCP: the
    /// address and the request path, which starts with `/` (`/` when the
    /// endpoint names none). Spoken by [`WebSocket`](crate::WebSocket).
    Ws {
        /// The TCP address; port 0 in a listen picks a free port.
        addr: SocketAddr,
        /// The request path.
        path: String,
    },
    /// SPEC TRN-4: DTP over RTSP-interleaved TCP (RFC 2326 §10.12: `$`
    /// packets on channel 0 after SETUP and RECORD) at this TCP address;
    /// port 0 in a listen picks a free port. Spoken by
    /// [`Rtsp`](crate::Rtsp).
    Rtsp(SocketAddr),
    /// DTP over QUIC (RFC 9000, TLS 1.3, ALPN `dtp/1`) on UDP: one
    /// bidirectional stream carries the connection's byte stream. Port 0
    /// in a listen picks a free port. Spoken by [`Quic`](crate::Quic).
    Quic(SocketAddr),
    /// SPEC TRN-4: DTP over Bluetooth LE, an L2CAP connection-oriented
    /// channel (BlueZ's `SOCK_SEQPACKET` socket) to or on a device's PSM,
    /// SDUs of at most the MTU. Spoken by the socket backends
    /// ([`Driver`](crate::Driver)); on a host without Bluetooth, listening
    /// and connecting fail with `Bluetooth is not available on this host
    /// (…)`.
    Ble(BleAddr),
    /// SPEC TRN-4: the simulated BLE link: a Unix `SOCK_SEQPACKET` socket at
    /// this path carrying SDUs of at most `mtu` bytes (the same for both
    /// directions: both ends must name the same), with BLE's message
    /// semantics, fragmentation and backpressure. Spoken by the socket
    /// backends.
    BleSim {
        /// The socket's path.
        path: PathBuf,
        /// The SDU size, 23 … 65535 bytes, below the receive buffers'.
        mtu: u16,
    },
}

impl Endpoint {
    /// The scheme of this kind of endpoint (`tcp`, `unix`, `mem`, `ws`,
    /// `rtsp`, `quic`, `ble`, `ble-sim`).
    pub fn scheme(&self) -> &'static str {
        match self {
            Self::Tcp(_) => "tcp",
            Self::Unix(_) => "unix",
            Self::Memory(_) => "mem",
            Self::Ws { .. } => "ws",
            Self::Rtsp(_) => "rtsp",
            Self::Quic(_) => "quic",
            Self::Ble(_) => "ble",
            Self::BleSim { .. } => "ble-sim",
        }
    }

    /// SPEC TRN-4: the SDU size of a BLE endpoint (`ble:`, `ble-sim:`);
    /// `None` for the others.
    pub fn mtu(&self) -> Option<u16> {
        match self {
            Self::Ble(a) => Some(a.mtu),
            Self::BleSim { mtu, .. } => Some(*mtu),
            _ => None,
        }
    }

    /// Whether a transport with receive buffers of `chunk_size` bytes can
    /// serve this endpoint: a BLE MTU must stay below it, so that an SDU
    /// longer than the MTU is caught rather than cut short. The error
    /// names the endpoint and the setting to change.
    pub fn fits_receive_buffers(&self, chunk_size: u32) -> io::Result<()> {
        match self.mtu() {
            Some(mtu) if u32::from(mtu) >= chunk_size => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{self}: mtu {mtu} needs receive buffers larger than it: raise io.chunk_size ({chunk_size}) or lower the mtu"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The TCP address, if this is one.
    pub fn tcp(&self) -> Option<SocketAddr> {
        match self {
            Self::Tcp(a) => Some(*a),
            _ => None,
        }
    }

    /// The TCP port this endpoint takes, whatever it carries on it
    /// (`tcp:` and `ws:`): what a listener binds, or a client connects to.
    pub fn tcp_port(&self) -> Option<SocketAddr> {
        match self {
            Self::Tcp(a) | Self::Ws { addr: a, .. } | Self::Rtsp(a) => Some(*a),
            _ => None,
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Self::Tcp(addr)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "tcp:{addr}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
            Self::Memory(name) => write!(f, "mem:{name}"),
            Self::Ws { addr, path } => write!(f, "ws:{addr}{path}"),
            Self::Rtsp(addr) => write!(f, "rtsp:{addr}"),
            Self::Quic(addr) => write!(f, "quic:{addr}"),
            Self::Ble(addr) => write!(f, "{addr}"),
            Self::BleSim { path, mtu } => write!(f, "ble-sim:{}?mtu={mtu}", path.display()),
        }
    }
}

/// An endpoint string that could not be read; [`fmt::Display`] says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseEndpointError {
    input: String,
    why: &'static str,
}

impl fmt::Display for ParseEndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint {:?}: {}", self.input, self.why)
    }
}

impl std::error::Error for ParseEndpointError {}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
fn socket_addr(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    let port = s.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

/// The longest path a Unix socket address holds (`sun_path` less its NUL).
const UNIX_PATH_MAX: usize = 107;

/// Why `path` cannot name a Unix socket, if it cannot.
pub(crate) fn check_unix_path(path: &str) -> Result<(), &'static str> {
    if path.len() > UNIX_PATH_MAX {
        Err("a Unix socket path holds at most 107 bytes: use a shorter one")
    } else if path.contains('\0') {
        Err("a Unix socket path cannot hold NUL")
    } else {
        Ok(())
    }
}

/// Every form an endpoint may take, for the errors that list them.
macro_rules! forms {
    () => {
        "tcp:HOST:PORT, unix:PATH, ws:HOST:PORT/PATH, quic:HOST:PORT, rtsp:HOST:PORT, ble:ADDR/psm/N, ble-sim:PATH?mtu=N, mem:NAME or HOST:PORT"
    };
}

/// An endpoint with no scheme and no port.
const EXPECTED: &str = concat!("expected ", forms!());

/// An endpoint whose scheme is none of ours.
const UNKNOWN_SCHEME: &str = concat!("unknown scheme: expected ", forms!());

impl FromStr for Endpoint {
    type Err = ParseEndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = |why| ParseEndpointError {
            input: s.to_owned(),
            why,
        };
        let Some((scheme, rest)) = s.split_once(':') else {
            return Err(error(EXPECTED));
        };
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        match scheme {
            "tcp" => socket_addr(rest)
                .map(Self::Tcp)
                .ok_or_else(|| error("expected tcp:IP:PORT (or localhost:PORT)")),
            "unix" if rest.is_empty() => Err(error("a unix: endpoint needs a path")),
            "unix" => check_unix_path(rest)
                .map(|()| Self::Unix(PathBuf::from(rest)))
                .map_err(error),
            "ble" => crate::ble::parse_ble(rest).map(Self::Ble).map_err(error),
            "ble-sim" => crate::ble::parse_sim(rest)
                .map(|(path, mtu)| Self::BleSim { path, mtu })
                .map_err(error),
            "ws" => {
                let (addr, path) = match rest.find('/') {
                    Some(i) => rest.split_at(i),
                    None => (rest, "/"),
                };
                let addr = socket_addr(addr)
                    .ok_or_else(|| error("expected ws:IP:PORT/PATH (or localhost:PORT/PATH)"))?;
                if !path.bytes().all(|b| b.is_ascii_graphic()) || path.len() > 1024 {
                    return Err(error("a ws: path is at most 1024 visible ASCII characters"));
                }
                Ok(Self::Ws {
                    addr,
                    path: path.to_owned(),
                })
            }
            "quic" => socket_addr(rest)
                .map(Self::Quic)
                .ok_or_else(|| error("expected quic:IP:PORT (or localhost:PORT)")),
            "rtsp" => socket_addr(rest.strip_suffix('/').unwrap_or(rest))
                .map(Self::Rtsp)
                .ok_or_else(|| error("expected rtsp:IP:PORT (or localhost:PORT), with no path")),
            "mem" if rest.is_empty() => Err(error("a mem: endpoint needs a name")),
            "mem" => Ok(Self::Memory(rest.to_owned())),
            _ => socket_addr(s)
                .map(Self::Tcp)
                .ok_or_else(|| error(UNKNOWN_SCHEME)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn endpoints_read_back_what_they_print() {
        for text in [
            "tcp:127.0.0.1:7000",
            "tcp:[::1]:80",
            "unix:/run/dtp.sock",
            "unix:relative.sock",
            "mem:gateway",
            "ws:127.0.0.1:7001/dtp",
            "ws:[::1]:80/",
            "rtsp:127.0.0.1:8554",
            "rtsp:[::1]:554",
            "quic:127.0.0.1:4433",
            "quic:[::1]:0",
            "ble:00:11:22:33:44:55/psm/128?mtu=247",
            "ble:FF:EE:DD:CC:BB:AA/psm/5?mtu=23&type=random",
            "ble-sim:/run/dtp-ble.sock?mtu=512",
        ] {
            let e: Endpoint = text.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn other_spellings_are_read_too() {
        let tcp = Endpoint::Tcp("127.0.0.1:7000".parse().unwrap());
        for text in [
            "127.0.0.1:7000",
            "tcp://127.0.0.1:7000",
            "tcp:localhost:7000",
        ] {
            assert_eq!(text.parse::<Endpoint>().unwrap(), tcp, "{text}");
        }
        assert_eq!(
            "unix:///tmp/a".parse::<Endpoint>().unwrap(),
            Endpoint::Unix("/tmp/a".into())
        );
        assert_eq!(
            "mem://g".parse::<Endpoint>().unwrap(),
            Endpoint::Memory("g".into())
        );
        let ws = |path: &str| Endpoint::Ws {
            addr: "127.0.0.1:7001".parse().unwrap(),
            path: path.into(),
        };
        assert_eq!(
            "ws://127.0.0.1:7001/a/b".parse::<Endpoint>().unwrap(),
            ws("/a/b")
        );
        assert_eq!("ws:localhost:7001".parse::<Endpoint>().unwrap(), ws("/"));
        let rtsp = Endpoint::Rtsp("127.0.0.1:8554".parse().unwrap());
        for text in [
            "rtsp://127.0.0.1:8554",
            "rtsp://127.0.0.1:8554/",
            "rtsp:localhost:8554",
        ] {
            assert_eq!(text.parse::<Endpoint>().unwrap(), rtsp, "{text}");
        }
        assert_eq!(rtsp.scheme(), "rtsp");
        let quic = Endpoint::Quic("127.0.0.1:4433".parse().unwrap());
        for text in ["quic://127.0.0.1:4433", "quic:localhost:4433"] {
            assert_eq!(text.parse::<Endpoint>().unwrap(), quic, "{text}");
        }
        assert_eq!(quic.scheme(), "quic");
        let ble = "ble:00:11:22:33:44:55/psm/0x80"
            .parse::<Endpoint>()
            .unwrap();
        assert_eq!(ble.to_string(), "ble:00:11:22:33:44:55/psm/128?mtu=247");
        assert_eq!(ble.scheme(), "ble");
        let sim = "ble-sim:a.sock".parse::<Endpoint>().unwrap();
        assert_eq!(
            sim,
            Endpoint::BleSim {
                path: "a.sock".into(),
                mtu: 247
            }
        );
        assert_eq!(sim.scheme(), "ble-sim");
    }

    #[test]
    fn bad_endpoints_are_refused_with_a_reason() {
        for bad in [
            "nowhere",
            "tcp:nowhere",
            "tcp:1.2.3.4",
            "mem:",
            "unix:",
            "ble:x",
            "localhost",
            "ws:nowhere/x",
            "ws:127.0.0.1:80/a b",
            "rtsp:nowhere",
            "rtsp://127.0.0.1:8554/dtp",
            "quic:nowhere",
            "quic:1.2.3.4",
            "quic://",
            "ble:00:11:22:33:44:55/psm/300",
            "ble-sim:",
            "ble-sim:/tmp/x?mtu=1",
        ] {
            let e = bad.parse::<Endpoint>().unwrap_err();
            assert!(e.to_string().starts_with("endpoint "), "{e}");
        }
        let long = format!("unix:/{}", "a".repeat(200));
        assert!(
            long.parse::<Endpoint>()
                .unwrap_err()
                .to_string()
                .contains("107")
        );
    }
}
