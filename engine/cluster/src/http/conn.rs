//! One TCP connection to one endpoint: write a POST, read an answer (by
//! `Content-Length`, chunked or until close), or hand the connection to a
//! [`Stream`] of newline-delimited messages.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use dtp_codec::http::{BodyFraming, ResponseLimits, Version, parse_response_head};

use super::{Answer, ChunkedDecoder, HttpConfig};
use crate::error::{Error, Result};
use crate::tls::{ClusterTls, Transport};

/// Interim (1xx) answers skipped before the final one.
const MAX_INTERIM: usize = 8;
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// A connection and the bytes read past the last answer.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: Transport,
    endpoint: String,
    index: usize,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to `endpoint` (`host:port`), trying each address it
    /// resolves to within `config.connect_timeout`; over TLS with `tls`.
    pub(crate) fn connect(
        endpoint: &str,
        index: usize,
        config: &HttpConfig,
        tls: Option<&ClusterTls>,
    ) -> io::Result<Self> {
        let tcp = connect_any(endpoint, config.connect_timeout)?;
        tcp.set_read_timeout(Some(config.io_timeout))?;
        tcp.set_write_timeout(Some(config.io_timeout))?;
        tcp.set_nodelay(true)?;
        let stream = match tls {
            Some(tls) => Transport::tls(tcp, tls, endpoint)?,
            None => Transport::Plain(tcp),
        };
        Ok(Self {
            stream,
            endpoint: endpoint.to_owned(),
            index,
            buf: Vec::new(),
        })
    }

    pub(crate) fn endpoint_index(&self) -> usize {
        self.index
    }

    /// Whether a kept-alive connection is still usable: the server has not
    /// closed it and sent nothing unasked (either makes the next answer
    /// unreadable).
    pub(crate) fn looks_open(&self) -> bool {
        let tcp = self.stream.tcp();
        if !self.buf.is_empty() || tcp.set_nonblocking(true).is_err() {
            return false;
        }
        let mut probe = [0u8; 1];
        let open = matches!(tcp.peek(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        open && tcp.set_nonblocking(false).is_ok()
    }

    /// Writes a POST of `body` to `path`, with `Authorization: <token>`
    /// if given (a token from [`crate::etcd::EtcdAuth`], checked there to
    /// hold no byte that could end the header).
    pub(crate) fn send_post(
        &mut self,
        path: &str,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<()> {
        let auth = authorization.map_or_else(String::new, |t| format!("Authorization: {t}\r\n"));
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
            self.endpoint,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.stream
            .write_all(&req)
            .and_then(|()| self.stream.flush())
            .map_err(|e| io_error(&self.endpoint, e))
    }

    /// Reads one whole answer; the flag says whether the connection may
    /// carry another request.
    pub(crate) fn read_answer(&mut self, max_body: usize) -> Result<(Answer, bool)> {
        let (status, framing, keep) = self.read_head()?;
        let body = match framing {
            BodyFraming::Length(len) => {
                let len = usize::try_from(len).ok().filter(|&l| l <= max_body).ok_or(
                    Error::TooLarge {
                        what: "HTTP response body",
                        max: max_body,
                    },
                )?;
                while self.buf.len() < len {
                    self.fill()?;
                }
                self.buf.drain(..len).collect()
            }
            BodyFraming::Chunked => {
                let mut decoder = ChunkedDecoder::default();
                let mut body = Vec::new();
                loop {
                    let used = decoder
                        .decode(&self.buf, &mut body)
                        .map_err(|e| Error::protocol(&self.endpoint, e.to_string()))?;
                    self.buf.drain(..used);
                    check_len(body.len(), max_body)?;
                    if decoder.is_done() {
                        break body;
                    }
                    self.fill()?;
                }
            }
            BodyFraming::UntilClose => {
                loop {
                    check_len(self.buf.len(), max_body)?;
                    match self.fill() {
                        Ok(()) => {}
                        Err(Error::Io { source, .. })
                            if source.kind() == io::ErrorKind::UnexpectedEof =>
                        {
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
                return Ok((
                    Answer {
                        status,
                        body: std::mem::take(&mut self.buf),
                    },
                    false,
                ));
            }
        };
        Ok((Answer { status, body }, keep))
    }

    /// Reads the final answer's head: status, framing, keep-alive.
    fn read_head(&mut self) -> Result<(u16, BodyFraming, bool)> {
        let limits = ResponseLimits::default();
        let mut interim = 0;
        loop {
            match parse_response_head(&self.buf, &limits) {
                Ok(None) => self.fill()?,
                Ok(Some((head, n))) => {
                    self.buf.drain(..n);
                    if head.status() < 200 {
                        interim += 1;
                        if interim > MAX_INTERIM {
                            return Err(Error::protocol(&self.endpoint, "too many 1xx answers"));
                        }
                        continue;
                    }
                    let close = head
                        .headers("connection")
                        .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
                    let keep = head.version() == Version::Http11 && !close;
                    return Ok((head.status(), head.framing(), keep));
                }
                Err(e) => return Err(Error::protocol(&self.endpoint, e.to_string())),
            }
        }
    }

    /// Reads more bytes into the buffer; the peer closing is an error.
    fn fill(&mut self) -> Result<()> {
        let mut tmp = [0u8; READ_CHUNK];
        match self.stream.read(&mut tmp) {
            Ok(0) => Err(io_error(
                &self.endpoint,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed by the server",
                ),
            )),
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(io_error(&self.endpoint, e)),
        }
    }

    /// Turns the connection, its request sent, into a stream of the
    /// answer's newline-delimited messages.
    pub(crate) fn into_stream(mut self, max_line: usize) -> Result<Stream> {
        let (status, framing, _) = self.read_head()?;
        Ok(Stream {
            conn: self,
            status,
            decoder: (framing == BodyFraming::Chunked).then(ChunkedDecoder::default),
            remaining: match framing {
                BodyFraming::Length(n) => Some(n),
                _ => None,
            },
            body: Vec::new(),
            ended: false,
            max_line,
        })
    }
}

/// The body of a streaming answer, read one line at a time.
#[derive(Debug)]
pub(crate) struct Stream {
    conn: Conn,
    status: u16,
    decoder: Option<ChunkedDecoder>,
    /// `Content-Length` bytes still to come, for a non-chunked body.
    remaining: Option<u64>,
    /// Decoded body bytes not yet returned.
    body: Vec<u8>,
    ended: bool,
    max_line: usize,
}

impl Stream {
    /// The answer's status code.
    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// The server's `host:port`.
    pub(crate) fn endpoint(&self) -> &str {
        &self.conn.endpoint
    }

    /// Changes the read timeout (`None`: wait for ever).
    pub(crate) fn set_read_timeout(&self, t: Option<std::time::Duration>) -> Result<()> {
        self.conn
            .stream
            .tcp()
            .set_read_timeout(t)
            .map_err(|e| io_error(&self.conn.endpoint, e))
    }

    /// The next non-empty line of the body (without its newline), or `None`
    /// at the end of the body. A read timeout is [`Error::Timeout`] and
    /// leaves the stream usable.
    pub(crate) fn next_line(&mut self) -> Result<Option<Vec<u8>>> {
        loop {
            if let Some(nl) = self.body.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.body.drain(..=nl).take(nl).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            check_len(self.body.len(), self.max_line)?;
            if self.ended {
                let rest = std::mem::take(&mut self.body);
                return Ok((!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest));
            }
            self.pull()?;
        }
    }

    /// Moves decoded bytes into `body`, reading the socket if needed.
    fn pull(&mut self) -> Result<()> {
        if self.conn.buf.is_empty() {
            match self.conn.fill() {
                Err(Error::Io { source, .. })
                    if source.kind() == io::ErrorKind::UnexpectedEof
                        && self.decoder.is_none()
                        && self.remaining.is_none() =>
                {
                    self.ended = true;
                    return Ok(());
                }
                other => other?,
            }
        }
        let buf = &mut self.conn.buf;
        if let Some(decoder) = &mut self.decoder {
            let used = decoder
                .decode(buf, &mut self.body)
                .map_err(|e| Error::protocol(&self.conn.endpoint, e.to_string()))?;
            buf.drain(..used);
            self.ended = decoder.is_done();
        } else if let Some(rem) = &mut self.remaining {
            let take = usize::try_from(*rem).map_or(buf.len(), |r| r.min(buf.len()));
            self.body.extend(buf.drain(..take));
            *rem -= take as u64;
            self.ended = *rem == 0;
        } else {
            self.body.append(buf);
        }
        Ok(())
    }
}

fn check_len(len: usize, max: usize) -> Result<()> {
    if len > max {
        Err(Error::TooLarge {
            what: "HTTP response body",
            max,
        })
    } else {
        Ok(())
    }
}

/// A socket error as this crate's error: a read timeout is
/// [`Error::Timeout`], anything else [`Error::Io`].
pub(crate) fn io_error(endpoint: &str, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
            endpoint: endpoint.to_owned(),
        },
        _ => Error::Io {
            endpoint: endpoint.to_owned(),
            source: e,
        },
    }
}

/// Connects to the first address of `endpoint` that accepts within
/// `timeout` each.
pub(crate) fn connect_any(endpoint: &str, timeout: std::time::Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address resolved");
    for addr in endpoint.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}
