//! Certificates for servers that speak TLS: a CA of the test's own and a
//! certificate for 127.0.0.1 it signed, as PEM files.

use std::path::{Path, PathBuf};

use dtp_cluster::ClusterTls;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A server's certificate files and the CA that signed them.
#[derive(Clone, Debug)]
pub struct Tls {
    /// The CA certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate, for 127.0.0.1.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl Tls {
    /// Makes a CA and a server certificate in `dir`.
    pub fn new(dir: &Path) -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("CA");
        let key = KeyPair::generate().expect("key");
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("leaf params")
            .signed_by(&key, &ca)
            .expect("leaf");
        let tls = Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
        };
        std::fs::write(&tls.ca, ca.pem()).expect("write the CA");
        std::fs::write(&tls.cert, leaf.pem()).expect("write the cert");
        std::fs::write(&tls.key, key.serialize_pem()).expect("write the key");
        tls
    }

    /// A client configuration trusting this CA.
    pub fn client(&self) -> ClusterTls {
        ClusterTls::from_ca_pem(&std::fs::read(&self.ca).expect("read the CA")).expect("CA")
    }
}
