//! A blocking NATS connection for request/reply: CONNECT, one wildcard
//! inbox subscription, and [`Nats::request`], which sends one message and
//! waits for its answer; and watched subjects ([`Nats::watch`]), whose
//! messages only end a wait ([`Nats::wait_watched`]). A worker thread's
//! only.
//!
//! A broken connection is dropped and the next call connects again, to the
//! first server of the list that accepts; a request is never sent twice by
//! this client (JetStream publishes are made safe to repeat by their
//! `Nats-Msg-Id`, see [`super::JetStream::publish`]).

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::auth::{self, NatsAuth};
use super::headers::{self, Headers};
use super::proto::{self, Limits, ServerOp, parse_op, valid_subject};
use crate::error::{Error, Result, server_text};
use crate::http::conn::connect_any;
use crate::tls::Transport;

/// Timeouts and ceilings of a NATS client.
#[derive(Clone, Debug)]
pub struct NatsConfig {
    /// Time allowed to connect and finish the handshake with one server.
    pub connect_timeout: Duration,
    /// Time allowed for one request's answer.
    pub request_timeout: Duration,
    /// The largest message accepted from the server (bytes); the server's
    /// own `max_payload` bounds what we send.
    pub max_message: usize,
    /// The name the connection shows in the server's monitoring.
    pub name: String,
    /// Credentials, sent in CONNECT on every connection.
    pub auth: Option<NatsAuth>,
    /// TLS: the CA the servers' certificates are checked against. With
    /// it, every connection is upgraded to TLS after the server's INFO
    /// (a server that offers no TLS is refused); without it, a server
    /// that requires TLS is refused.
    pub tls: Option<crate::ClusterTls>,
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            max_message: 8 * 1024 * 1024,
            name: "dtp".into(),
            auth: None,
            tls: None,
        }
    }
}

/// A message received: the answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The subject it was delivered on.
    pub subject: String,
    /// Its headers, if it had any.
    pub headers: Option<Headers>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// The sid of the one inbox subscription.
const INBOX_SID: u64 = 1;

/// The sid of the first watched subject ([`Nats::watch`]); the others
/// follow it.
const WATCH_SID: u64 = 2;

/// A NATS client (see the module doc).
#[derive(Debug)]
pub struct Nats {
    servers: Vec<String>,
    config: NatsConfig,
    conn: Option<Conn>,
    /// `_INBOX.<random>`: replies come on `<inbox>.<token>`.
    inbox: String,
    next_token: u64,
    /// Subjects whose messages end [`Nats::wait_watched`], subscribed on
    /// every connection.
    watched: Vec<String>,
    /// A watched subject's message came while a request was answered.
    woken: bool,
}

#[derive(Debug)]
struct Conn {
    stream: Transport,
    server: String,
    buf: Vec<u8>,
    /// The server's `max_payload`.
    max_payload: usize,
}

#[derive(Debug, Deserialize)]
struct Info {
    #[serde(default)]
    max_payload: usize,
    #[serde(default)]
    headers: bool,
    #[serde(default)]
    tls_required: bool,
    #[serde(default)]
    tls_available: bool,
}

impl Nats {
    /// A client of `servers` (`host:port`, `nats://host:port` or
    /// `tls://host:port`; TLS is [`NatsConfig::tls`]'s word), connected
    /// to the first that accepts.
    pub fn connect(servers: &[&str], config: NatsConfig) -> Result<Self> {
        let servers: Vec<String> = servers
            .iter()
            .map(|s| {
                s.trim_start_matches("nats://")
                    .trim_start_matches("tls://")
                    .to_owned()
            })
            .collect();
        if servers.is_empty() || servers.iter().any(|s| s.is_empty() || s.contains('/')) {
            return Err(Error::InvalidRequest(
                "servers are host:port or nats://host:port, at least one".into(),
            ));
        }
        let mut n = Self {
            servers,
            config,
            conn: None,
            inbox: format!("_INBOX.{}", uuid::Uuid::new_v4().simple()),
            next_token: 0,
            watched: Vec::new(),
            woken: false,
        };
        n.ensure_connected()?;
        Ok(n)
    }

    /// Closes the connection cleanly: UNSUB of the inbox, then a PING whose
    /// PONG proves the server has taken it (bounded by the request
    /// timeout). Dropping a `Nats` closes it too, just less politely.
    pub fn close(mut self) -> Result<()> {
        let Some(mut conn) = self.conn.take() else {
            return Ok(());
        };
        conn.write(format!("UNSUB {INBOX_SID}\r\nPING\r\n").as_bytes())?;
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            if let ServerOp::Pong = conn.next_op(self.config.max_message, Some(deadline))? {
                return Ok(());
            }
        }
    }

    /// The server of the current connection, if connected.
    pub fn server(&self) -> Option<&str> {
        self.conn.as_ref().map(|c| c.server.as_str())
    }

    /// Sends `payload` (with `headers`, if any) to `subject` and waits for
    /// one answer. A server-made "no responders" status is
    /// [`Error::NoResponders`].
    pub fn request(
        &mut self,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> Result<Message> {
        if !valid_subject(subject) {
            return Err(Error::InvalidRequest(format!("subject {subject:?}")));
        }
        let block = headers::encode(headers)?;
        self.ensure_connected()?;
        let max_payload = self.conn.as_ref().map_or(0, |c| c.max_payload);
        if block.len() + payload.len() > max_payload {
            return Err(Error::TooLarge {
                what: "NATS message",
                max: max_payload,
            });
        }
        self.next_token += 1;
        let reply = format!("{}.{}", self.inbox, self.next_token);
        let deadline = Instant::now() + self.config.request_timeout;
        let result = self.exchange(subject, &reply, &block, payload, deadline);
        // After a timeout the connection is still in step (a late answer is
        // dropped by its subject); after anything else it may not be.
        if matches!(&result, Err(e) if !matches!(e, Error::Timeout { .. })) {
            self.conn = None;
        }
        let msg = result?;
        if msg.headers.as_ref().and_then(|h| h.status) == Some(503) {
            return Err(Error::NoResponders {
                subject: subject.to_owned(),
            });
        }
        Ok(msg)
    }

    fn exchange(
        &mut self,
        subject: &str,
        reply: &str,
        block: &[u8],
        payload: &[u8],
        deadline: Instant,
    ) -> Result<Message> {
        let max = self.config.max_message;
        let woken = &mut self.woken;
        let conn = self.conn.as_mut().ok_or_else(|| Error::Io {
            endpoint: String::new(),
            source: io::ErrorKind::NotConnected.into(),
        })?;
        let mut out = Vec::with_capacity(64 + block.len() + payload.len());
        proto::write_pub(&mut out, subject, Some(reply), block, payload);
        conn.write(&out)?;
        loop {
            if let ServerOp::Msg(m) = conn.next_op(max, Some(deadline))? {
                if m.sid >= WATCH_SID {
                    *woken = true;
                    continue;
                }
                // Answers to earlier requests that timed out are dropped.
                if m.subject == reply {
                    let headers = match m.headers {
                        Some(b) => Some(Headers::parse(&b).ok_or_else(|| {
                            Error::protocol(&conn.server, "malformed message headers")
                        })?),
                        None => None,
                    };
                    return Ok(Message {
                        subject: m.subject,
                        headers,
                        payload: m.payload,
                    });
                }
            }
        }
    }

    /// Subscribes `subjects` (on this connection and every later one):
    /// a message on any of them ends [`Self::wait_watched`]. Their
    /// content is not kept: it is a doorbell (e.g. "something was
    /// published on a stream's subject, read it").
    pub fn watch(&mut self, subjects: &[&str]) -> Result<()> {
        if let Some(bad) = subjects.iter().find(|s| !valid_subject(s)) {
            return Err(Error::InvalidRequest(format!("subject {bad:?}")));
        }
        let first = WATCH_SID + self.watched.len() as u64;
        self.watched
            .extend(subjects.iter().map(|s| (*s).to_owned()));
        match self.conn.as_mut() {
            Some(conn) => {
                let fresh = &self.watched[self.watched.len() - subjects.len()..];
                let r = conn.write(watch_subs(fresh, first).as_bytes());
                if r.is_err() {
                    self.conn = None;
                }
                r
            }
            None => self.ensure_connected(),
        }
    }

    /// Waits up to `timeout` for a message on a watched subject: true if
    /// one came (since the last call, also while a request was answered),
    /// false if none did.
    pub fn wait_watched(&mut self, timeout: Duration) -> Result<bool> {
        if std::mem::take(&mut self.woken) {
            return Ok(true);
        }
        self.ensure_connected()?;
        let max = self.config.max_message;
        let deadline = Instant::now() + timeout;
        let conn = self.conn.as_mut().ok_or_else(|| Error::Io {
            endpoint: String::new(),
            source: io::ErrorKind::NotConnected.into(),
        })?;
        loop {
            match conn.next_op(max, Some(deadline)) {
                Ok(ServerOp::Msg(m)) if m.sid >= WATCH_SID => return Ok(true),
                // A late answer to a request that timed out.
                Ok(_) => {}
                Err(Error::Timeout { .. }) => return Ok(false),
                Err(e) => {
                    self.conn = None;
                    return Err(e);
                }
            }
        }
    }

    /// Connects (again) if there is no connection.
    fn ensure_connected(&mut self) -> Result<()> {
        if self.conn.is_some() {
            return Ok(());
        }
        let mut last = None;
        for server in &self.servers {
            match Conn::open(server, &self.config, &self.inbox, &self.watched) {
                Ok(c) => {
                    self.conn = Some(c);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(Error::Io { source, .. }) => Error::Unavailable {
                tried: self.servers.len(),
                last: source,
            },
            Some(e) => e,
            None => Error::InvalidRequest("no server".into()),
        })
    }
}

/// The SUB lines of `subjects`, sids from `first` on.
fn watch_subs(subjects: &[String], first: u64) -> String {
    subjects
        .iter()
        .zip(first..)
        .map(|(s, sid)| format!("SUB {s} {sid}\r\n"))
        .collect()
}

impl Conn {
    /// Connects, reads INFO, sends CONNECT, subscribes the inbox and waits
    /// for the PONG that proves the server took all of it.
    fn open(server: &str, config: &NatsConfig, inbox: &str, watched: &[String]) -> Result<Self> {
        let io_err = |e| crate::http::conn::io_error(server, e);
        let stream = connect_any(server, config.connect_timeout).map_err(|source| Error::Io {
            endpoint: server.to_owned(),
            source,
        })?;
        stream.set_nodelay(true).map_err(io_err)?;
        stream
            .set_write_timeout(Some(config.connect_timeout))
            .map_err(io_err)?;
        let mut c = Self {
            stream: Transport::Plain(stream),
            server: server.to_owned(),
            buf: Vec::new(),
            max_payload: 0,
        };
        let deadline = Instant::now() + config.connect_timeout;
        let ServerOp::Info(json) = c.next_op(config.max_message, Some(deadline))? else {
            return Err(Error::protocol(
                server,
                "the server did not start with INFO",
            ));
        };
        let info: Info = serde_json::from_slice(&json)
            .map_err(|_| Error::protocol(server, "INFO is not the expected JSON"))?;
        if !info.headers {
            return Err(Error::protocol(
                server,
                "the server does not support headers (NATS 2.2+ needed)",
            ));
        }
        c.stream = match (c.stream, &config.tls) {
            (Transport::Plain(tcp), Some(tls)) if info.tls_required || info.tls_available => {
                Transport::tls(tcp, tls, server).map_err(io_err)?
            }
            (_, Some(_)) => return Err(Error::protocol(server, "the server offers no TLS")),
            (_, None) if info.tls_required => {
                return Err(Error::protocol(
                    server,
                    "the server requires TLS and no CA is set",
                ));
            }
            (stream, None) => stream,
        };
        c.max_payload = if info.max_payload == 0 {
            1024 * 1024
        } else {
            info.max_payload
        };
        let mut connect = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true, "no_responders": true,
            "lang": "rust", "version": env!("CARGO_PKG_VERSION"), "protocol": 1, "name": config.name,
        });
        if let Some(auth) = &config.auth {
            auth.add_to(&mut connect);
        }
        let hello = format!(
            "CONNECT {connect}\r\nSUB {inbox}.* {INBOX_SID}\r\n{}PING\r\n",
            watch_subs(watched, WATCH_SID)
        );
        c.write(hello.as_bytes())?;
        let credentials = config.auth.is_some();
        loop {
            let op = c.next_op(config.max_message, Some(deadline));
            match op.map_err(|e| auth::refusal(e, server, credentials))? {
                ServerOp::Pong => break,
                ServerOp::Err(e) => return Err(Error::Nats(server_text(&e))),
                _ => {}
            }
        }
        Ok(c)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let written = self.stream.write_all(bytes);
        written
            .and_then(|()| self.stream.flush())
            .map_err(|source| Error::Io {
                endpoint: self.server.clone(),
                source,
            })
    }

    /// The next operation other than PING (answered here) and +OK, read
    /// until `deadline`.
    fn next_op(&mut self, max_message: usize, deadline: Option<Instant>) -> Result<ServerOp> {
        let limits = Limits {
            max_payload: max_message,
            ..Limits::default()
        };
        loop {
            match parse_op(&self.buf, &limits) {
                Ok(Some((op, n))) => {
                    self.buf.drain(..n);
                    match op {
                        ServerOp::Ping => self.write(b"PONG\r\n")?,
                        ServerOp::Ok => {}
                        ServerOp::Err(e) => return Err(Error::Nats(server_text(&e))),
                        op => return Ok(op),
                    }
                }
                Ok(None) => self.fill(deadline)?,
                Err(proto::ProtoError::TooLarge(_)) => {
                    return Err(Error::TooLarge {
                        what: "NATS message",
                        max: max_message,
                    });
                }
                Err(e) => return Err(Error::protocol(&self.server, e.to_string())),
            }
        }
    }

    fn fill(&mut self, deadline: Option<Instant>) -> Result<()> {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(Error::Timeout {
                endpoint: self.server.clone(),
            });
        }
        let io_err = |e| crate::http::conn::io_error(&self.server, e);
        self.stream.tcp().set_read_timeout(left).map_err(io_err)?;
        let mut tmp = [0u8; 16 * 1024];
        match self.stream.read(&mut tmp) {
            Ok(0) => Err(Error::Io {
                endpoint: self.server.clone(),
                source: io::ErrorKind::UnexpectedEof.into(),
            }),
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(io_err(e)),
        }
    }
}
