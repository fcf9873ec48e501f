//! How [`Quic`](super::Quic) is set up: its TLS 1.3 identity (a
//! certificate it makes or loads), the certificates its clients accept
//! (pinned), and the QUIC transport's limits and timers.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{IdleTimeout, TransportConfig, VarInt};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The ALPN protocol id DTP over QUIC negotiates (RFC 7301): a peer that
/// does not offer it is refused in the handshake.
pub const ALPN: &[u8] = b"dtp/1";

/// The certificate and key a [`Quic`](super::Quic) transport presents
/// when it listens (SPEC TRN-4: TLS 1.3 is part of QUIC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuicIdentity {
    /// None: the transport only connects (a load generator, a client
    /// library), so no certificate is made; listening is refused.
    ClientOnly,
    /// A self-signed certificate made at start-up (rcgen) for these DNS
    /// names or IP addresses: for loopback, tests and a gateway whose
    /// clients pin it ([`QuicConfig::pins`]).
    SelfSigned {
        /// The names the certificate is for (e.g. `localhost`).
        names: Vec<String>,
    },
    /// A certificate and its private key in memory (DER; PKCS #8 key):
    /// what [`QuicIdentity::made_once`] gives, so that every core presents
    /// the same certificate and a client pins one.
    Der {
        /// The certificate.
        cert: Vec<u8>,
        /// The private key.
        key: SecretDer,
    },
    /// A certificate chain and its private key, PEM files.
    Files {
        /// The certificate chain (PEM, the server's certificate first).
        cert: PathBuf,
        /// The private key (PEM: PKCS #8, PKCS #1 or SEC1).
        key: PathBuf,
    },
}

/// A server certificate a client accepts (SPEC TRN-4): pinned, so that no
/// system roots are needed (a loopback or a private deployment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertPin {
    /// The SHA-256 of the certificate's DER bytes.
    Sha256([u8; 32]),
    /// The certificate in this PEM file (its first one).
    File(PathBuf),
}

/// SPEC TRN-1 … TRN-5 over QUIC: what [`Quic`](super::Quic) needs.
///
/// The defaults follow SPEC LIV-2: a connection that hears nothing for
/// [`QuicConfig::idle_timeout`] (30 s, the heartbeat timeout threshold)
/// is closed, and each side sends a keep-alive every
/// [`QuicConfig::keep_alive`] (10 s, the heartbeat interval), well below
/// the timeout, so that an idle but healthy connection stays up (SPEC
/// SES-4's idle detection is then the session's, not the transport's).
#[derive(Clone, Debug)]
pub struct QuicConfig {
    /// What a listener presents.
    pub identity: QuicIdentity,
    /// The server certificates an outgoing connection accepts; none: every
    /// server is refused.
    pub pins: Vec<CertPin>,
    /// The name an outgoing connection asks for (TLS SNI).
    pub server_name: String,
    /// How long a connection may hear nothing before it is closed (QUIC's
    /// `max_idle_timeout`; the smaller of both sides' applies).
    pub idle_timeout: Duration,
    /// How often a connection with nothing to say sends a PING; below
    /// `idle_timeout`.
    pub keep_alive: Duration,
    /// The most bytes one connection may have queued for sending (SPEC
    /// TRN-2: beyond it, `BufferFull`); QUIC's own unacknowledged bytes
    /// are held to as much again.
    pub max_send_queue: usize,
    /// The most bytes a peer may send before this side reads them (the
    /// stream's and the connection's flow-control window).
    pub receive_window: u32,
    /// Most QUIC connections (accepted and connected) at once; more are
    /// refused in their handshake.
    pub max_connections: usize,
}

impl Default for QuicConfig {
    fn default() -> Self {
        Self {
            identity: QuicIdentity::SelfSigned {
                names: vec!["localhost".to_owned()],
            },
            pins: Vec::new(),
            server_name: "localhost".to_owned(),
            idle_timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(10),
            max_send_queue: 4 << 20,
            receive_window: 1 << 20,
            max_connections: 16 * 1024,
        }
    }
}

/// Why a QUIC configuration could not be used; names the setting.
#[derive(Debug)]
pub struct QuicConfigError(String);

impl fmt::Display for QuicConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for QuicConfigError {}

impl From<QuicConfigError> for std::io::Error {
    fn from(e: QuicConfigError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.0)
    }
}

fn error(what: impl fmt::Display) -> QuicConfigError {
    QuicConfigError(what.to_string())
}

/// The SHA-256 of a certificate's DER bytes (what [`CertPin::Sha256`] holds).
pub fn cert_sha256(der: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The built configurations: quinn-proto's, for either side.
pub(super) struct Built {
    /// The listeners' configuration; `None` for [`QuicIdentity::ClientOnly`].
    pub(super) server: Option<Arc<quinn_proto::ServerConfig>>,
    pub(super) client: quinn_proto::ClientConfig,
    /// The certificate listeners present; `None` for a client only.
    pub(super) certificate: Option<CertificateDer<'static>>,
}

impl QuicConfig {
    /// Checks the settings and builds the TLS and QUIC configurations.
    pub(super) fn build(&self) -> Result<Built, QuicConfigError> {
        if self.keep_alive.is_zero() || self.keep_alive >= self.idle_timeout {
            return Err(error(format!(
                "quic keep_alive ({:?}) must be positive and below idle_timeout ({:?})",
                self.keep_alive, self.idle_timeout
            )));
        }
        if self.max_send_queue == 0 || self.receive_window == 0 || self.max_connections == 0 {
            return Err(error(
                "quic max_send_queue, receive_window and max_connections must be positive",
            ));
        }
        let idle = IdleTimeout::try_from(self.idle_timeout)
            .map_err(|_| error("quic idle_timeout is too long (at most 2^62 ms)"))?;
        let window = VarInt::from_u32(self.receive_window);
        let mut transport = TransportConfig::default();
        transport
            .max_idle_timeout(Some(idle))
            .keep_alive_interval(Some(self.keep_alive))
            .stream_receive_window(window)
            .receive_window(window)
            .send_window(self.max_send_queue as u64)
            // One bidirectional stream per connection, opened by the
            // client: a peer can open no other.
            .max_concurrent_bidi_streams(VarInt::from_u32(1))
            .max_concurrent_uni_streams(VarInt::from_u32(0))
            .datagram_receive_buffer_size(None);
        let transport = Arc::new(transport);

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (server, certificate) = match self.identity {
            QuicIdentity::ClientOnly => (None, None),
            _ => {
                let (server, certificate) = self.server(provider.clone(), transport.clone())?;
                (Some(server), Some(certificate))
            }
        };

        let mut pins = Vec::with_capacity(self.pins.len());
        for pin in &self.pins {
            pins.push(pin.digest()?);
        }
        let verifier = Arc::new(PinnedServer {
            pins,
            algorithms: provider.signature_verification_algorithms,
        });
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(error)?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let tls = QuicClientConfig::try_from(tls).map_err(error)?;
        let mut client = quinn_proto::ClientConfig::new(Arc::new(tls));
        client.transport_config(transport);
        Ok(Built {
            server,
            client,
            certificate,
        })
    }

    /// The listeners' configuration and the certificate they present.
    fn server(
        &self,
        provider: Arc<rustls::crypto::CryptoProvider>,
        transport: Arc<TransportConfig>,
    ) -> Result<(Arc<quinn_proto::ServerConfig>, CertificateDer<'static>), QuicConfigError> {
        let (chain, key) = self.identity.load()?;
        let certificate = chain
            .first()
            .cloned()
            .ok_or_else(|| error("quic identity: the certificate file holds no certificate"))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(error)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| error(format!("quic identity: {e}")))?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let tls = QuicServerConfig::try_from(tls).map_err(error)?;
        let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(tls));
        server.transport_config(transport);
        Ok((Arc::new(server), certificate))
    }
}

/// A private key's DER bytes, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretDer(pub Vec<u8>);

impl fmt::Debug for SecretDer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretDer(..)")
    }
}

impl QuicIdentity {
    /// This identity with its certificate made (self-signed) or read
    /// (files) now, once: the [`QuicIdentity::Der`] every core of a gateway
    /// then presents. The error names what failed.
    pub fn made_once(&self) -> Result<QuicIdentity, QuicConfigError> {
        if let Self::Der { .. } | Self::ClientOnly = self {
            return Ok(self.clone());
        }
        let (chain, key) = self.load()?;
        let cert = chain
            .first()
            .ok_or_else(|| error("quic identity: the certificate file holds no certificate"))?;
        Ok(Self::Der {
            cert: cert.to_vec(),
            key: SecretDer(key.secret_der().to_vec()),
        })
    }

    /// The SHA-256 of the certificate a [`QuicIdentity::Der`] presents
    /// (what a client pins); `None` for the others, whose certificate is
    /// made or read when a transport is built.
    pub fn fingerprint(&self) -> Option<[u8; 32]> {
        match self {
            Self::Der { cert, .. } => Some(cert_sha256(cert)),
            _ => None,
        }
    }

    /// The certificate chain and key.
    fn load(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), QuicConfigError> {
        match self {
            Self::ClientOnly => Err(error("quic identity: a client-only transport has none")),
            Self::SelfSigned { names } => {
                let made = rcgen::generate_simple_self_signed(names.clone())
                    .map_err(|e| error(format!("quic identity: making a certificate: {e}")))?;
                let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
                Ok((vec![made.cert.der().clone()], key.into()))
            }
            Self::Der { cert, key } => Ok((
                vec![CertificateDer::from(cert.clone())],
                PrivatePkcs8KeyDer::from(key.0.clone()).into(),
            )),
            Self::Files { cert, key } => {
                let read = |path: &PathBuf, what: &str| {
                    std::fs::read(path)
                        .map_err(|e| error(format!("quic {what} {}: {e}", path.display())))
                };
                let pem = read(cert, "cert")?;
                let chain = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| error(format!("quic cert {}: {e}", cert.display())))?;
                let pem = read(key, "key")?;
                let key = PrivateKeyDer::from_pem_slice(&pem)
                    .map_err(|e| error(format!("quic key {}: {e}", key.display())))?;
                Ok((chain, key))
            }
        }
    }
}

impl CertPin {
    fn digest(&self) -> Result<[u8; 32], QuicConfigError> {
        match self {
            Self::Sha256(d) => Ok(*d),
            Self::File(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| error(format!("quic pin {}: {e}", path.display())))?;
                let cert = CertificateDer::from_pem_slice(&pem)
                    .map_err(|e| error(format!("quic pin {}: {e}", path.display())))?;
                Ok(cert_sha256(&cert))
            }
        }
    }
}

/// Accepts exactly the pinned server certificates (by SHA-256 of their
/// DER), whatever their names and issuers, and checks that the server
/// holds the certificate's key (the handshake signature).
#[derive(Debug)]
struct PinnedServer {
    pins: Vec<[u8; 32]>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let digest = cert_sha256(end_entity);
        if self.pins.contains(&digest) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn keep_alive_must_stay_below_the_idle_timeout() {
        let bad = QuicConfig {
            keep_alive: Duration::from_secs(30),
            ..QuicConfig::default()
        };
        let e = bad.build().err().unwrap();
        assert!(e.to_string().contains("keep_alive"), "{e}");
        assert!(QuicConfig::default().build().is_ok());
    }

    #[test]
    fn identity_and_pins_load_from_pem_files_and_name_the_file_when_not() {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let dir = std::env::temp_dir().join(format!("dtp-quic-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let config = QuicConfig {
            identity: QuicIdentity::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            pins: vec![CertPin::File(cert.clone())],
            ..QuicConfig::default()
        };
        let built = config.build().unwrap();
        assert_eq!(
            built.certificate.unwrap().as_ref(),
            made.cert.der().as_ref()
        );
        assert_eq!(
            CertPin::File(cert).digest().unwrap(),
            cert_sha256(made.cert.der())
        );
        let missing = QuicConfig {
            identity: QuicIdentity::Files {
                cert: dir.join("nope.pem"),
                key,
            },
            ..QuicConfig::default()
        };
        let e = missing.build().err().unwrap();
        assert!(e.to_string().contains("nope.pem"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
