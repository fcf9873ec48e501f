//! A blocking HTTP/1.1 client for JSON POSTs to a list of endpoints: one
//! kept-alive connection, failover to the next endpoint when connecting
//! fails, and a timeout on every connect, read and write. A worker
//! thread's only: every call can block for up to its timeout.
//!
//! Whether a failed request may be repeated is the caller's word
//! ([`Retry`]); a request that changes state and fails after it was sent
//! becomes [`Error::OutcomeUnknown`], never a silent second attempt.

mod chunked;
pub(crate) mod conn;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub(crate) use chunked::ChunkedDecoder;
pub(crate) use conn::{Conn, Stream};

use crate::error::{Error, Result};

/// Timeouts and ceilings of a client.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Time allowed to connect to one endpoint.
    pub connect_timeout: Duration,
    /// Time allowed for each read and each write.
    pub io_timeout: Duration,
    /// The largest response body accepted (bytes).
    pub max_body: usize,
    /// etcd credentials, if the cluster requires them. Clones of one
    /// config share one token: every client made from them authenticates
    /// once between them, not once each (see [`crate::etcd::EtcdAuth`]).
    pub auth: Option<crate::etcd::EtcdAuth>,
    /// TLS to `https://` endpoints: the CA their certificates are checked
    /// against. Needed when the endpoints are `https://`.
    pub tls: Option<crate::ClusterTls>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(5),
            max_body: 4 * 1024 * 1024,
            auth: None,
            tls: None,
        }
    }
}

/// Whether a request may be sent again after a failure mid-way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads and refreshes: repeating them changes nothing.
    Idempotent,
    /// Writes: once sent, a failure is [`Error::OutcomeUnknown`].
    Once,
}

/// A status and a whole body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// One POST, as [`HttpClient::post`] sends it (to each endpoint tried).
struct Request<'a> {
    path: &'a str,
    body: &'a [u8],
    authorization: Option<&'a str>,
    retry: Retry,
}

/// The endpoints and the one kept-alive connection.
#[derive(Debug)]
pub(crate) struct HttpClient {
    endpoints: Vec<String>,
    /// The endpoint tried first: the last one that answered.
    current: usize,
    conn: Option<Conn>,
    config: HttpConfig,
    /// Set when the endpoints are `https://`.
    tls: Option<crate::ClusterTls>,
}

impl HttpClient {
    /// A client of `endpoints` (`host:port` each, `http://host:port`, or
    /// all `https://host:port`, which needs `config.tls`).
    pub(crate) fn new(endpoints: &[&str], config: HttpConfig) -> Result<Self> {
        let https = endpoints
            .iter()
            .filter(|e| e.starts_with("https://"))
            .count();
        if https != 0 && https != endpoints.len() {
            return Err(Error::InvalidRequest(
                "endpoints are all https:// or none".into(),
            ));
        }
        let tls = match (https, &config.tls) {
            (0, _) => None,
            (_, Some(tls)) => Some(tls.clone()),
            (_, None) => {
                return Err(Error::InvalidRequest(
                    "https:// endpoints need a CA to check them against".into(),
                ));
            }
        };
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| {
                e.trim_start_matches("http://")
                    .trim_start_matches("https://")
                    .trim_end_matches('/')
                    .to_owned()
            })
            .collect();
        if endpoints.is_empty() || endpoints.iter().any(|e| e.is_empty() || e.contains('/')) {
            return Err(Error::InvalidRequest(
                "endpoints are host:port or http(s)://host:port, at least one".into(),
            ));
        }
        Ok(Self {
            endpoints,
            current: 0,
            conn: None,
            config,
            tls,
        })
    }

    /// The endpoint tried first: the one that answered last.
    pub(crate) fn current_endpoint(&self) -> &str {
        &self.endpoints[self.current]
    }

    /// POSTs `body` (JSON) to `path` and reads the whole answer, trying the
    /// endpoints in turn from the last one that answered, with
    /// `Authorization: <authorization>` if given.
    pub(crate) fn post(
        &mut self,
        path: &str,
        body: &[u8],
        authorization: Option<&str>,
        retry: Retry,
    ) -> Result<Answer> {
        let req = Request {
            path,
            body,
            authorization,
            retry,
        };
        let n = self.endpoints.len();
        let mut last_connect = None;
        for attempt in 0..n {
            let at = (self.current + attempt) % n;
            let kept = self
                .conn
                .take()
                .filter(|c| c.endpoint_index() == at && c.looks_open());
            let reused = kept.is_some();
            let conn = match kept.map_or_else(|| self.connect(at), Ok) {
                Ok(c) => c,
                Err(e) => {
                    last_connect = Some(e);
                    continue;
                }
            };
            self.current = at;
            let mut result = self.exchange(conn, &req);
            // A kept-alive connection the server closed after our check:
            // an idempotent request goes once more on a fresh connection.
            if reused && retry == Retry::Idempotent && matches!(result, Err(Error::Io { .. })) {
                result = match self.connect(at) {
                    Ok(conn) => self.exchange(conn, &req),
                    Err(e) => {
                        last_connect = Some(e);
                        continue;
                    }
                };
            }
            match result {
                Ok(answer) => return Ok(answer),
                // An idempotent request whose connection broke: the next
                // endpoint may serve it.
                Err(Error::Io { .. } | Error::Timeout { .. })
                    if retry == Retry::Idempotent && attempt + 1 < n =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable {
            tried: n,
            last: last_connect.unwrap_or_else(|| std::io::Error::other("every endpoint failed")),
        })
    }

    fn connect(&self, at: usize) -> std::io::Result<Conn> {
        Conn::connect(&self.endpoints[at], at, &self.config, self.tls.as_ref())
    }

    fn exchange(&mut self, mut conn: Conn, req: &Request<'_>) -> Result<Answer> {
        let retry = req.retry;
        let sent = conn.send_post(req.path, req.body, req.authorization);
        let answer = sent.and_then(|()| conn.read_answer(self.config.max_body));
        match answer {
            Ok((answer, keep)) => {
                if keep {
                    self.conn = Some(conn);
                }
                Ok(answer)
            }
            Err(Error::Io { endpoint, source }) if retry == Retry::Once => {
                Err(Error::OutcomeUnknown { endpoint, source })
            }
            Err(Error::Timeout { endpoint }) if retry == Retry::Once => {
                Err(Error::OutcomeUnknown {
                    endpoint,
                    source: std::io::ErrorKind::TimedOut.into(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a streaming POST (a watch) on a connection of its own, from
    /// the first endpoint that accepts a connection.
    pub(crate) fn open_stream(
        &mut self,
        path: &str,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<Stream> {
        let n = self.endpoints.len();
        let mut last = None;
        for attempt in 0..n {
            let at = (self.current + attempt) % n;
            match self.connect(at) {
                Ok(mut conn) => {
                    conn.send_post(path, body, authorization)?;
                    return conn.into_stream(self.config.max_body);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Unavailable {
            tried: n,
            last: last.unwrap_or_else(|| std::io::Error::other("every endpoint failed")),
        })
    }
}
