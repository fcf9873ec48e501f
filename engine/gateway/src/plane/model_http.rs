//! SPEC HO-3b: the blocking half of the model call — a small HTTP/1.1
//! client that POSTs a [`ModelCall`] and reads the answer.
//!
//! One `POST` per connection (`Connection: close`), JSON in, JSON out,
//! with every step — connect, write, read — inside one hard deadline. The
//! endpoint, the request bytes and the response framing are sans-IO in
//! `dtp_policy::ai::http`; only `Content-Length` bodies are read (no chunked
//! encoding), and a response larger than
//! [`MAX_RESPONSE_BYTES`](dtp_policy::ai::http::MAX_RESPONSE_BYTES) is refused.
//!
//! **Name resolution** uses the system resolver (`ToSocketAddrs`), which
//! std cannot bound in time: the deadline is checked after it, so a slow
//! resolver turns into [`HttpError::Timeout`] but may overrun the deadline.
//! Use an IP literal as the endpoint host where that matters.
//!
//! This is IO: it blocks and reads the clock. The plane runs it on its model
//! workers (module `workers`), never on the control thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use dtp_policy::ModelCall;
use dtp_policy::ai::http::{self, Endpoint, HttpError, HttpResponse, ResponseReader};

/// SPEC HO-3b: runs `call` (blocking IO, for a worker thread).
pub fn run_model_call(call: &ModelCall) -> Result<HttpResponse, HttpError> {
    post_json(&call.endpoint, &call.body, call.timeout)
}

/// SPEC HO-3b: POSTs `body` (JSON) to `endpoint_url` and returns the
/// response, all within `timeout`.
pub fn post_json(
    endpoint_url: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<HttpResponse, HttpError> {
    let deadline = Instant::now() + timeout;
    let endpoint = Endpoint::parse(endpoint_url)?;
    let addrs: Vec<SocketAddr> = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|e| HttpError::Resolve(e.to_string()))?
        .collect();
    let mut stream = connect(&addrs, deadline)?;
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(io_err)?;
    stream
        .write_all(&http::request(&endpoint, body))
        .map_err(io_err)?;
    read_response(&mut stream, deadline)
}

fn remaining(deadline: Instant) -> Result<Duration, HttpError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(HttpError::Timeout)
    } else {
        Ok(left)
    }
}

fn io_err(e: io::Error) -> HttpError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HttpError::Timeout,
        _ => HttpError::Io(e.to_string()),
    }
}

fn connect(addrs: &[SocketAddr], deadline: Instant) -> Result<TcpStream, HttpError> {
    let mut last = HttpError::Resolve("no address".into());
    for addr in addrs {
        match TcpStream::connect_timeout(addr, remaining(deadline)?) {
            Ok(stream) => return Ok(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                last = HttpError::Timeout;
            }
            Err(e) => last = HttpError::Connect(e.kind()),
        }
    }
    Err(last)
}

fn read_response(stream: &mut TcpStream, deadline: Instant) -> Result<HttpResponse, HttpError> {
    let mut reader = ResponseReader::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(response) = reader.response()? {
            return Ok(response);
        }
        stream
            .set_read_timeout(Some(remaining(deadline)?))
            .map_err(io_err)?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        if n == 0 {
            return Err(HttpError::Io(
                "connection closed before the response was complete".into(),
            ));
        }
        reader.push(&chunk[..n]);
    }
}
