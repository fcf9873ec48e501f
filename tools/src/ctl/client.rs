//! A tiny blocking HTTP/1.1 client for the admin port: one request per
//! connection, JSON in and out, every wait bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use dtp_codec::http::{ResponseError, ResponseLimits, parse_closed_response};
use serde_json::Value;

use crate::cli_error::CliError;

/// The largest answer read (a long session list still fits).
const MAX_RESPONSE: u64 = 16 * 1024 * 1024;

/// Where and how to reach the admin port.
pub(crate) struct Client {
    pub(crate) admin: String,
    pub(crate) token: Option<String>,
    pub(crate) timeout: Duration,
}

/// An answer: its status and its JSON body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Client {
    /// Sends `method path` with an optional JSON body and reads the answer.
    /// Failing to connect, send or read is exit 1 (something outside).
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, CliError> {
        let addr = self.resolve()?;
        let fail = |what: &str, e: std::io::Error| {
            CliError::Io(format!(
                "admin port {}: {what}: {e} (is `dtp serve` running with [terminal] and this admin address?)",
                self.admin
            ))
        };
        let mut stream =
            TcpStream::connect_timeout(&addr, self.timeout).map_err(|e| fail("connect", e))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| fail("socket", e))?;
        let payload = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\naccept: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.admin,
            payload.len()
        );
        if body.is_some() {
            head.push_str("content-type: application/json\r\n");
        }
        if let Some(token) = &self.token {
            head.push_str(&format!("authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(payload.as_bytes()))
            .map_err(|e| fail("send", e))?;
        let mut raw = Vec::new();
        (&mut stream)
            .take(MAX_RESPONSE)
            .read_to_end(&mut raw)
            .map_err(|e| fail("read", e))?;
        parse_response(&raw)
            .map_err(|what| CliError::Io(format!("admin port {}: {what}", self.admin)))
    }

    fn resolve(&self) -> Result<SocketAddr, CliError> {
        let bad = || {
            CliError::usage(
                "BAD_ARGUMENT",
                format_args!("--admin {}: not a HOST:PORT address", self.admin),
            )
        };
        // A name that does not resolve is the user's input, not an outage.
        self.admin
            .to_socket_addrs()
            .map_err(|_| bad())?
            .next()
            .ok_or_else(bad)
    }
}

/// Splits a whole response into status and JSON body.
fn parse_response(raw: &[u8]) -> Result<Answer, String> {
    let limits = ResponseLimits {
        max_head_bytes: 16 * 1024,
        max_headers: 32,
    };
    let (head, body) = match parse_closed_response(raw, &limits) {
        Ok(parsed) => parsed,
        Err(ResponseError::EndedEarly) => return Err("the answer ended early".into()),
        Err(e) => return Err(format!("not an HTTP answer: {e}")),
    };
    let status = head.status();
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| format!("status {status}: the answer is not JSON: {e}"))?
    };
    Ok(Answer { status, body })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn responses_split_into_status_and_json() {
        let raw =
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 18\r\n\r\n{\"error\":\"NOPE\"}\r\nextra";
        let a = parse_response(raw).unwrap();
        assert_eq!(a.status, 404);
        assert_eq!(a.body["error"], "NOPE");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\nnot json").is_err());
    }
}
