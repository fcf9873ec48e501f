//! One worker's connections to push services: resolve, check every address
//! against the SSRF guard, connect to a checked address, TLS, one request
//! and its answer, keep-alive (see the module doc of `push`).
//!
//! Blocking IO with a timeout on every step; a worker thread's only.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use dtp_codec::http::{BodyFraming, ParsedResponse, ResponseLimits, Version, parse_response_head};
use dtp_realtime::push::{PushTarget, is_public_address};
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use rustls_pki_types::ServerName;

use super::MAX_ORIGINS_PER_WORKER;

/// A response body read (to keep the connection) at most; a longer one is
/// not read and the connection is closed instead.
const MAX_BODY: u64 = 64 * 1024;

/// Interim (1xx) answers taken before the final one.
const MAX_INTERIM: usize = 8;

/// What the push service answered.
#[derive(Debug)]
pub(super) struct Answer {
    /// The status code.
    pub(super) status: u16,
    /// The raw `Retry-After` value, if any.
    pub(super) retry_after: Option<Vec<u8>>,
}

/// Why no answer came.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// The SSRF guard refused every address, or there was none: do not
    /// retry.
    Refused(&'static str),
    /// Connect, TLS, write or read failed, or the answer was not HTTP:
    /// retry within the delivery's bounds.
    Transport,
}

/// One worker's connections, kept per push service origin.
pub(super) struct Connections {
    tls: Arc<ClientConfig>,
    allow_private: bool,
    per_origin: usize,
    timeout: Duration,
    idle: HashMap<String, Vec<Conn>>,
}

impl Connections {
    pub(super) fn new(
        tls: Arc<ClientConfig>,
        allow_private: bool,
        per_origin: usize,
        timeout: Duration,
    ) -> Self {
        Self {
            tls,
            allow_private,
            per_origin,
            timeout,
            idle: HashMap::new(),
        }
    }

    /// Sends `request` (whole HTTP/1.1 bytes) to `target` and reads the
    /// answer's head. A kept connection is tried first; if it turns out to
    /// be closed before any byte of an answer came, the request goes once
    /// more on a new connection.
    pub(super) fn exchange(
        &mut self,
        target: &PushTarget,
        request: &[u8],
    ) -> Result<Answer, Failure> {
        if let Some(mut conn) = self.take(target.origin()) {
            match conn.round_trip(request) {
                Ok((answer, keep)) => {
                    if keep {
                        self.keep(target.origin(), conn);
                    }
                    return Ok(answer);
                }
                Err(Trip::NothingBack) => {}
                Err(Trip::Broken) => return Err(Failure::Transport),
            }
        }
        let mut conn = self.connect(target)?;
        match conn.round_trip(request) {
            Ok((answer, keep)) => {
                if keep {
                    self.keep(target.origin(), conn);
                }
                Ok(answer)
            }
            Err(_) => Err(Failure::Transport),
        }
    }

    fn take(&mut self, origin: &str) -> Option<Conn> {
        self.idle.get_mut(origin)?.pop()
    }

    fn keep(&mut self, origin: &str, conn: Conn) {
        if !self.idle.contains_key(origin) && self.idle.len() >= MAX_ORIGINS_PER_WORKER {
            // Make room: drop the connections of an origin with none idle,
            // else of any one.
            let victim = self
                .idle
                .iter()
                .find(|(_, v)| v.is_empty())
                .or_else(|| self.idle.iter().next())
                .map(|(k, _)| k.clone());
            if let Some(victim) = victim {
                self.idle.remove(&victim);
            }
        }
        let list = self.idle.entry(origin.to_owned()).or_default();
        if list.len() < self.per_origin {
            list.push(conn);
        }
    }

    fn connect(&self, target: &PushTarget) -> Result<Conn, Failure> {
        let addrs: Vec<SocketAddr> = (target.host(), target.port())
            .to_socket_addrs()
            .map_err(|_| Failure::Transport)?
            .collect();
        if addrs.is_empty() {
            return Err(Failure::Transport);
        }
        // All or nothing: a name that resolves to one public and one
        // private address is refused, whichever would be tried first.
        if !self.allow_private && addrs.iter().any(|a| !is_public_address(a.ip())) {
            return Err(Failure::Refused(
                "the endpoint resolves to a loopback, private or link-local address",
            ));
        }
        let tcp = addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, self.timeout).ok())
            .ok_or(Failure::Transport)?;
        let _ = tcp.set_nodelay(true);
        tcp.set_read_timeout(Some(self.timeout))
            .and_then(|()| tcp.set_write_timeout(Some(self.timeout)))
            .map_err(|_| Failure::Transport)?;
        let name =
            ServerName::try_from(target.host().to_owned()).map_err(|_| Failure::Transport)?;
        let tls = ClientConnection::new(self.tls.clone(), name).map_err(|_| Failure::Transport)?;
        Ok(Conn {
            stream: StreamOwned::new(tls, tcp),
            buf: Vec::with_capacity(1024),
        })
    }
}

/// How a round trip failed.
enum Trip {
    /// Closed or failed before any byte of an answer: on a kept
    /// connection, the server had closed it; try a new one.
    NothingBack,
    /// Failed after part of an answer, or the answer was not HTTP.
    Broken,
}

/// One TLS connection and its read buffer.
struct Conn {
    stream: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// Writes `request`, reads the answer's head (and a short body, to keep
    /// the connection); returns the answer and whether the connection can
    /// carry another request.
    fn round_trip(&mut self, request: &[u8]) -> Result<(Answer, bool), Trip> {
        self.buf.clear();
        self.stream
            .write_all(request)
            .and_then(|()| self.stream.flush())
            .map_err(|_| Trip::NothingBack)?;
        let limits = ResponseLimits::default();
        let mut chunk = [0u8; 4096];
        let mut interim = 0;
        let (head, head_len) = loop {
            match parse_response_head(&self.buf, &limits) {
                Ok(Some((head, n))) if (100..200).contains(&head.status()) => {
                    // An interim answer (RFC 9110 §15.2): the final one
                    // follows. A few at most: a service that sends them
                    // without end must not hold the worker for ever.
                    interim += 1;
                    if interim > MAX_INTERIM {
                        return Err(Trip::Broken);
                    }
                    self.buf.drain(..n);
                }
                Ok(Some(done)) => break done,
                Ok(None) => self.fill(&mut chunk)?,
                Err(_) => return Err(Trip::Broken),
            }
        };
        let answer = Answer {
            status: head.status(),
            retry_after: head.header("retry-after").map(|v| v.as_bytes().to_vec()),
        };
        let keep = match head.framing() {
            BodyFraming::Length(len) if len <= MAX_BODY && keep_alive(&head) => {
                let want = head_len.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
                while self.buf.len() < want {
                    if self.fill(&mut chunk).is_err() {
                        return Ok((answer, false));
                    }
                }
                // Bytes past the body were never asked for: not HTTP/1.1
                // as we speak it; do not reuse.
                self.buf.len() == want
            }
            _ => false,
        };
        Ok((answer, keep))
    }

    /// Reads more of the answer. End of stream or a reset before any byte
    /// is `NothingBack`; after some, or a timeout, `Broken`.
    fn fill(&mut self, chunk: &mut [u8]) -> Result<(), Trip> {
        let got_some = !self.buf.is_empty();
        let fail = if got_some {
            Trip::Broken
        } else {
            Trip::NothingBack
        };
        loop {
            match self.stream.read(chunk) {
                Ok(0) => return Err(fail),
                Ok(n) => {
                    self.buf
                        .extend_from_slice(chunk.get(..n).unwrap_or_default());
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // No answer in time: the server may have the request, so
                // it is not sent again at once (the delivery's backoff
                // decides).
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(Trip::Broken);
                }
                Err(_) => return Err(fail),
            }
        }
    }
}

/// HTTP/1.1 without `Connection: close` (RFC 9112 §9.3).
fn keep_alive(head: &ParsedResponse) -> bool {
    head.version() == Version::Http11
        && !head
            .headers("connection")
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("close"))
}
