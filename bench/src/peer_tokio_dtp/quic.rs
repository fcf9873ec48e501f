//! The tokio DTP peer over QUIC: the `quinn` server a careful tokio user
//! would write to carry DTP the way our `quic:` transport does (TLS 1.3,
//! ALPN `dtp/1`, the connection's byte stream on the client's first
//! bidirectional stream).
//!
//! **Owns**: the QUIC endpoint (quinn on the peer's tokio runtime, its UDP
//! socket driven by `quinn-udp`, GSO and GRO where the kernel has them),
//! its self-signed certificate ([`QuicCert`], pinned by the load generator
//! with `dtp load --quic-pin`), the accept loop, and the [`Wire`] that reads
//! the stream into the connection's buffer and writes the endpoint's
//! transmits to it. **Never touches** the rest of the connection: the
//! endpoint, the application, the timers and the counters are
//! [`drive_connection`]'s, the same as over TCP.
//!
//! # Choices
//!
//! - **quinn's defaults, except where ours differ in a way the figures
//!   would show.** The stream and connection receive windows (1 MiB each)
//!   and the send window (4 MiB), the idle timeout (30 s) and the
//!   keep-alive (10 s) are set to our transport's defaults
//!   (`dtp_transports::QuicConfig`): quinn's own windows (1.25 MB per
//!   stream, unbounded per connection, 10 MB to send) would let the peer
//!   take more bytes per round trip than ours in `dtp-stream-quic`. Like
//!   ours it lets a client open one bidirectional stream and no
//!   unidirectional one. Everything else — congestion control (CUBIC),
//!   MTU discovery, pacing, ACK frequency, the socket's offloads — is
//!   quinn's, as a quinn user would leave it; our transport runs
//!   quinn-proto's same defaults.
//! - **One read, one write per batch.** Each `read_chunk` appends what
//!   quinn has reassembled to the read buffer (frames may straddle chunks,
//!   so they are split off with `peek_frame_len`, exactly as over TCP);
//!   what the endpoint produced after a read goes out with one
//!   `write_all`, as the TCP peer writes it.
//! - **A clean end.** When the loop is over the stream is finished and the
//!   task waits (up to [`CLOSE_GRACE`]) for the client to have received
//!   every byte (`stopped`) before the connection is dropped, which closes
//!   it: quinn's way to avoid cutting the last answer.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use dtp_codec::Limits;
use quinn::{ConnectionError, ReadError, RecvStream, SendStream, TransportConfig, VarInt};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

use super::{Shared, Wire, drive_connection, spawn_connection};

/// The ALPN protocol id DTP over QUIC negotiates, as our `quic:` transport
/// names it.
pub const ALPN: &[u8] = b"dtp/1";
/// How long a finished connection waits for the client to acknowledge its
/// last bytes before it is dropped (and so closed).
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long a connection may hear nothing before it is closed: our
/// transport's default.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an idle connection sends a PING: our transport's default.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// The stream's and the connection's receive window: our transport's
/// default.
pub(super) const RECEIVE_WINDOW: u32 = 1 << 20;
/// The most unacknowledged bytes a connection sends: our transport's
/// default send queue.
pub(super) const SEND_WINDOW: u64 = 4 << 20;

/// A self-signed certificate and its key, made once when the peer starts,
/// for `localhost` and `127.0.0.1` (as `dtp serve` makes its own).
#[derive(Clone)]
pub struct QuicCert {
    cert: CertificateDer<'static>,
    key: Arc<PrivatePkcs8KeyDer<'static>>,
}

impl std::fmt::Debug for QuicCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private key.
        write!(f, "QuicCert(sha256 {})", hex(&self.sha256()))
    }
}

impl QuicCert {
    /// A new self-signed certificate (rcgen).
    pub fn self_signed() -> io::Result<Self> {
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let made = rcgen::generate_simple_self_signed(names)
            .map_err(|e| io::Error::other(format!("making a certificate: {e}")))?;
        Ok(Self {
            cert: made.cert.der().clone(),
            key: Arc::new(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der())),
        })
    }

    /// The certificate's DER bytes.
    pub fn der(&self) -> &[u8] {
        &self.cert
    }

    /// The SHA-256 of the certificate's DER bytes: what a client pins.
    pub fn sha256(&self) -> [u8; 32] {
        let digest = ring::digest::digest(&ring::digest::SHA256, &self.cert);
        let mut out = [0; 32];
        out.copy_from_slice(digest.as_ref());
        out
    }

    /// The line `dtp serve` prints for its QUIC certificate, which `dtp
    /// bench` reads the pin from: `quic certificate sha256 HEX`.
    pub fn pin_line(&self) -> String {
        format!("quic certificate sha256 {}", hex(&self.sha256()))
    }

    /// quinn's server configuration: TLS 1.3 with this certificate, ALPN
    /// `dtp/1`, and the transport settings of the module docs.
    fn server_config(&self) -> io::Result<quinn::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], self.key.clone_key().into())
            .map_err(io::Error::other)?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let tls =
            quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(io::Error::other)?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(tls));
        server.transport_config(Arc::new(transport_config()?));
        Ok(server)
    }
}

/// The transport settings matched to our transport's (see the module docs).
fn transport_config() -> io::Result<TransportConfig> {
    let idle = quinn::IdleTimeout::try_from(IDLE_TIMEOUT).map_err(io::Error::other)?;
    let window = VarInt::from_u32(RECEIVE_WINDOW);
    let mut t = TransportConfig::default();
    t.max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(KEEP_ALIVE))
        .stream_receive_window(window)
        .receive_window(window)
        .send_window(SEND_WINDOW)
        .max_concurrent_bidi_streams(VarInt::from_u32(1))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .datagram_receive_buffer_size(None);
    Ok(t)
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The accept loop on `listen` until `shutdown`: each connection that
/// completes its handshake gets a task that waits for the client's stream
/// and then drives DTP over it. `on_bound` gets the UDP address first.
pub(super) async fn serve(
    listen: SocketAddr,
    cert: &QuicCert,
    shared: &Arc<Shared>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()>,
) -> io::Result<()> {
    let endpoint = quinn::Endpoint::server(cert.server_config()?, listen)?;
    on_bound(endpoint.local_addr()?);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            incoming = endpoint.accept() => {
                // `None`: the endpoint was closed.
                let Some(incoming) = incoming else { break };
                spawn_connection(shared, move |shared| async move {
                    let conn = incoming.await.map_err(io::Error::other)?;
                    let (send, recv) = conn.accept_bi().await.map_err(io::Error::other)?;
                    drive_connection(Quic { send, recv }, &shared).await
                });
            }
        }
    }
    endpoint.close(VarInt::from_u32(0), b"");
    Ok(())
}

/// DTP's byte stream on one bidirectional QUIC stream.
struct Quic {
    send: SendStream,
    recv: RecvStream,
}

impl Wire for Quic {
    async fn read(&mut self, input: &mut BytesMut, _limits: &Limits) -> io::Result<bool> {
        match self.recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => {
                input.extend_from_slice(&chunk.bytes);
                Ok(true)
            }
            Ok(None) => Ok(false),
            // The client closed the whole connection (our transport does
            // once its FIN is acknowledged): the end of the stream.
            Err(ReadError::ConnectionLost(ConnectionError::ApplicationClosed(_))) => Ok(false),
            Err(e) => Err(io::Error::other(e)),
        }
    }

    async fn write(&mut self, output: &mut BytesMut) -> io::Result<()> {
        self.send
            .write_all(output)
            .await
            .map_err(io::Error::other)?;
        output.clear();
        Ok(())
    }

    async fn close(&mut self) {
        // A connection already lost fails here too, harmlessly.
        if self.send.finish().is_ok() {
            let _ = tokio::time::timeout(CLOSE_GRACE, self.send.stopped()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_pin_line_is_the_certificates_sha256() {
        let cert = QuicCert::self_signed().unwrap();
        let line = cert.pin_line();
        let hex = line.strip_prefix("quic certificate sha256 ").unwrap();
        assert_eq!(hex.len(), 64);
        let digest = ring::digest::digest(&ring::digest::SHA256, cert.der());
        assert_eq!(hex, super::hex(digest.as_ref()));
        assert!(!format!("{cert:?}").contains("PRIVATE"));
    }

    #[test]
    fn the_server_config_builds() {
        let cert = QuicCert::self_signed().unwrap();
        cert.server_config().unwrap();
    }
}
