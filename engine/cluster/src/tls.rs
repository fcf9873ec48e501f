//! TLS to etcd and NATS: [`ClusterTls`], the client side's trust (the
//! deployment's own CA, nothing else), and [`Transport`], a connection
//! that is plain TCP or TLS over it, so the HTTP and NATS code reads and
//! writes one type either way.
//!
//! The socket stays reachable under the TLS session ([`Transport::tcp`]):
//! timeouts are set on it, and a kept-alive connection is probed through
//! it, as for plain TCP.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use crate::error::{Error, Result};

/// How the cluster's clients check the servers' certificates: against the
/// CA certificates given, and only them (a cluster's servers carry
/// certificates of the deployment's own CA, not a public one). Cloning
/// shares the configuration.
#[derive(Clone)]
pub struct ClusterTls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterTls { .. }")
    }
}

impl ClusterTls {
    /// Trusts the PEM `CERTIFICATE`s in `ca_pem` (at least one).
    pub fn from_ca_pem(ca_pem: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::InvalidRequest(format!("CA certificates: {why}"));
        let certs = CertificateDer::pem_slice_iter(ca_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no CERTIFICATE in the PEM".into()));
        }
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots.add(cert).map_err(|e| bad(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
        })
    }
}

/// A connection: plain TCP, or TLS over it.
#[derive(Debug)]
pub(crate) enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS; the handshake runs with the first read or write.
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Transport {
    /// The socket under it (timeouts, probes).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => &s.sock,
        }
    }

    /// TLS over `tcp` to `endpoint` (`host:port`), its certificate checked
    /// for `host` against `tls`.
    pub(crate) fn tls(tcp: TcpStream, tls: &ClusterTls, endpoint: &str) -> io::Result<Self> {
        let host = endpoint
            .rsplit_once(':')
            .map_or(endpoint, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let conn = ClientConnection::new(tls.config.clone(), name).map_err(io::Error::other)?;
        Ok(Self::Tls(Box::new(StreamOwned::new(conn, tcp))))
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        assert!(ClusterTls::from_ca_pem(b"").is_err());
        assert!(ClusterTls::from_ca_pem(b"not pem at all").is_err());
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(ClusterTls::from_ca_pem(junk).is_err());
    }
}
