//! The local Web Push service of the `push` workload of `dtp bench`: HTTPS
//! on loopback (rustls, a CA and a server certificate for `127.0.0.1` made
//! at start with rcgen), HTTP/1.1 with keep-alive, `201 Created` to every
//! request. It counts requests and body bytes and does not decrypt (the
//! gateway's push tests check the encryption and VAPID with `http_ece`).
//!
//! One blocking thread per connection: both senders keep a handful of
//! connections, and the service must not be what bounds them.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The answer to every request.
const CREATED: &[u8] = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";

/// A request head larger than this ends the connection.
const MAX_HEAD: usize = 16 * 1024;

/// An idle connection is closed after this long.
const IDLE: Duration = Duration::from_secs(30);

/// The running service; stopped when dropped.
pub struct PushService {
    port: u16,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// What the service has seen.
#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl PushService {
    /// Makes the CA and certificate and listens on an ephemeral port of
    /// 127.0.0.1.
    pub fn start() -> Result<Self, String> {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let e = |e: rcgen::Error| format!("push service certificate: {e}");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(e)?).map_err(e)?;
        let key = KeyPair::generate().map_err(e)?;
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .map_err(e)?
            .signed_by(&key, &ca)
            .map_err(e)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth().with_single_cert(
                    vec![leaf.der().clone()],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
                )
            })
            .map_err(|e| format!("push service TLS: {e}"))?;
        let tls = Arc::new(tls);
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("push service bind: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("push service address: {e}"))?
            .port();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (counts, stop) = (counts.clone(), stop.clone());
            std::thread::Builder::new()
                .name("push-service".into())
                .spawn(move || accept_loop(&listener, &tls, &counts, &stop))
                .map_err(|e| format!("push service thread: {e}"))?
        };
        Ok(Self {
            port,
            ca_pem: ca.pem(),
            ca_der: ca.der().clone(),
            counts,
            stop,
            accept: Some(accept),
        })
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate, PEM (for a file in `extra_roots`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER (for a rustls root store).
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::Relaxed)
    }

    /// Request body bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.counts.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for PushService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    tls: &Arc<ServerConfig>,
    counts: &Arc<Counts>,
    stop: &AtomicBool,
) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let (tls, counts) = (tls.clone(), counts.clone());
        let _ = std::thread::Builder::new()
            .name("push-service-c".into())
            .spawn(move || {
                let _ = serve(stream, tls, &counts);
            });
    }
}

/// Serves one connection until the client closes it or it errs.
fn serve(tcp: TcpStream, tls: Arc<ServerConfig>, counts: &Counts) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(IDLE))?;
    let conn = rustls::ServerConnection::new(tls).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(head_end) = find_head_end(&buf) else {
            if buf.len() > MAX_HEAD {
                break;
            }
            let n = s.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
            continue;
        };
        let body = content_length(buf.get(..head_end).unwrap_or_default());
        let total = head_end + body;
        while buf.len() < total {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
        buf.drain(..total);
        counts.requests.fetch_add(1, Ordering::Relaxed);
        counts.bytes.fetch_add(body as u64, Ordering::Relaxed);
        s.write_all(CREATED)?;
        s.flush()?;
    }
    s.conn.send_close_notify();
    let _ = s.flush();
    let _ = s.sock.shutdown(Shutdown::Both);
    Ok(())
}

/// The length of the head including its blank line, once it is complete.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The `Content-Length` of a head (0 when absent or unreadable).
fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head);
    text.split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_split_and_their_length_read() {
        let req = b"POST /push/1 HTTP/1.1\r\nHost: x\r\ncontent-length: 12\r\n\r\nabc";
        let end = find_head_end(req);
        assert_eq!(end, Some(req.len() - 3));
        assert_eq!(
            content_length(req.get(..end.unwrap_or(0)).unwrap_or_default()),
            12
        );
        assert_eq!(find_head_end(b"POST / HTTP/1.1\r\n"), None);
        assert_eq!(content_length(b"GET / HTTP/1.1\r\n\r\n"), 0);
    }
}
