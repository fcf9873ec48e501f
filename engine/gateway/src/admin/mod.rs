//! The admin port: Prometheus `/metrics`, the `/healthz` and `/readyz`
//! probes (`health`) and, when `[terminal]` runs, the `/v1` admin
//! endpoints (`api`), over plain HTTP/1.1 on threads of their own so a
//! slow client never touches a core shard or the control thread (a plane
//! call waits at most the handle's 2 s).
//!
//! Each connection carries one request (bounded: `http::MAX_HEAD`,
//! `http::MAX_BODY`, 5 s to send it) and gets one answer; at most
//! [`MAX_CONNECTIONS`] are served at once, more get 503 at once. With a
//! token (`[admin] token_file`) every `/v1` request needs
//! `Authorization: Bearer <token>`; without one the port must stay on
//! loopback (`dtp serve` refuses otherwise when `[terminal]` is on).
//! `/metrics`, `/healthz` and `/readyz` never need the token. `/console`
//! is the operator console (`console`): static files whose every `/v1`
//! call needs the token.

mod api;
mod console;
mod health;
mod http;
mod metrics;

pub use api::Api;
pub use health::Health;
pub use metrics::Exporter;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{ReadError, Response};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a client has to send its request, and to take the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the admin port serves.
pub struct AdminServer {
    /// The `/metrics` exporter.
    pub exporter: Exporter,
    /// The `/v1` endpoints; none without `[terminal]` (they answer 503).
    pub api: Option<Api>,
    /// The bearer token `/v1` requires, if any.
    pub token: Option<String>,
    /// What `/readyz` answers from.
    pub health: Arc<Health>,
}

/// Serves `server` on `listener` (bound beforehand, so that a taken port
/// fails before the gateway starts) from a background thread; returns the
/// bound address.
pub fn spawn(listener: TcpListener, server: AdminServer) -> std::io::Result<SocketAddr> {
    let local = listener.local_addr()?;
    let server = Arc::new(server);
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("dtp-admin".to_owned())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                accept(stream, &server, &active);
            }
        })?;
    Ok(local)
}

/// Hands one connection to a thread of its own, or answers 503 when
/// [`MAX_CONNECTIONS`] are busy.
fn accept(mut stream: TcpStream, server: &Arc<AdminServer>, active: &Arc<AtomicUsize>) {
    if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        active.fetch_sub(1, Ordering::AcqRel);
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let busy = Response::error(503, "BUSY", "too many admin connections; try again");
        let _ = busy.write_to(&mut stream);
        return;
    }
    let (server, guard) = (server.clone(), Active(active.clone()));
    let spawned = std::thread::Builder::new()
        .name("dtp-admin-conn".to_owned())
        .spawn(move || {
            let _guard = guard;
            if let Err(e) = serve(stream, &server) {
                tracing::debug!(error = %e, "admin request failed");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start an admin connection thread");
    }
}

/// Counts a connection being served until dropped.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve(mut stream: TcpStream, server: &AdminServer) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let response = match http::read_request(&mut stream) {
        Ok(Some(request)) => route(server, &request),
        Ok(None) => return Ok(()),
        Err(ReadError::Refuse(response)) => {
            response.write_to(&mut stream)?;
            linger(&mut stream);
            return Ok(());
        }
        Err(ReadError::Io(e)) => return Err(e),
    };
    response.write_to(&mut stream)?;
    stream.flush()
}

/// After refusing a request that was not read whole: closes our side and
/// reads (and drops) what the client still sends, briefly and boundedly,
/// so that closing does not reset the connection before the client has
/// read the refusal (at most [`http::MAX_BODY`] bytes and one second).
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let mut left = http::MAX_BODY;
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while left > 0 && std::time::Instant::now() < deadline {
        match std::io::Read::read(stream, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// `/metrics`, or `/v1/...` through the token check to the API.
fn route(server: &AdminServer, request: &http::Request) -> Response {
    let path = request.path.strip_prefix('/').unwrap_or(&request.path);
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["metrics"] if request.method == "GET" => {
            Response::text(200, "text/plain; version=0.0.4", server.exporter.render())
        }
        ["healthz"] if request.method == "GET" => {
            Response::text(200, "text/plain", "ok\n".to_owned())
        }
        ["readyz"] if request.method == "GET" => match server.health.ready() {
            Ok(()) => Response::text(200, "text/plain", "ready\n".to_owned()),
            Err(why) => Response::text(503, "text/plain", format!("not ready: {why}\n")),
        },
        [name @ ("console" | "console.js" | "console.css")] if request.method == "GET" => {
            console::file(name).unwrap_or_else(|| Response::error(404, "NOT_FOUND", "no such file"))
        }
        ["metrics" | "healthz" | "readyz" | "console" | "console.js" | "console.css"] => {
            Response::error(405, "METHOD_NOT_ALLOWED", "this endpoint takes GET")
                .with_header("allow", "GET")
        }
        ["v1", rest @ ..] => {
            if let Some(token) = &server.token
                && !authorized(request.authorization.as_deref(), token)
            {
                let m =
                    "this admin port needs `Authorization: Bearer <token>` (dtp ctl --token-file)";
                return Response::error(401, "UNAUTHORIZED", m)
                    .with_header("www-authenticate", "Bearer");
            }
            let Some(api) = &server.api else {
                let m = "this gateway runs no terminal control plane (no [terminal] section)";
                return Response::error(503, "NO_TERMINAL", m);
            };
            let decoded: Option<Vec<String>> =
                rest.iter().map(|s| http::percent_decode(s)).collect();
            match decoded {
                Some(segments) => api.handle(&request.method, &segments, &request.body),
                None => Response::error(400, "BAD_REQUEST", "a malformed %-escape in the path"),
            }
        }
        _ => Response::error(
            404,
            "NOT_FOUND",
            "no such endpoint: try /console, /metrics, /healthz, /readyz or /v1/sessions",
        ),
    }
}

/// Whether `header` is `Bearer <token>` (compared in constant time for a
/// given length).
fn authorized(header: Option<&str>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| {
        h.strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
    }) else {
        return false;
    };
    crate::secret::same_secret(given.trim().as_bytes(), token.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let t = "0123456789abcdef";
        assert!(authorized(Some("Bearer 0123456789abcdef"), t));
        assert!(!authorized(Some("Bearer 0123456789abcdeF"), t));
        assert!(!authorized(Some("Bearer 0123456789abcde"), t));
        assert!(!authorized(Some("Basic 0123456789abcdef"), t));
        assert!(!authorized(None, t));
    }
}
