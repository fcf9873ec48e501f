//! The sender's TLS client configuration: the system's CA store plus the
//! deployment's `extra_roots`, ring as the crypto provider, TLS 1.2 and 1.3.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::SetupError;

/// The roots the sender trusts: every parsable certificate of the system
/// store (rustls-native-certs), then every certificate of each PEM file in
/// `extra_roots`. A file that cannot be read or holds no certificate is an
/// error; so is ending with no root at all.
pub fn trust_store(extra_roots: &[PathBuf]) -> Result<RootCertStore, SetupError> {
    let mut roots = RootCertStore::empty();
    // The system store may be partly unreadable (a broken file among many):
    // what parses is trusted, the rest is skipped, as browsers do.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    for path in extra_roots {
        for cert in read_pem_certs(path)? {
            roots.add(cert).map_err(|e| SetupError::Roots {
                path: path.display().to_string(),
                why: e.to_string(),
            })?;
        }
    }
    if roots.is_empty() {
        return Err(SetupError::NoRoots);
    }
    Ok(roots)
}

/// The client configuration every worker shares.
pub(super) fn client_config(extra_roots: &[PathBuf]) -> Result<Arc<ClientConfig>, SetupError> {
    let roots = trust_store(extra_roots)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SetupError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let err = |why: String| SetupError::Roots {
        path: path.display().to_string(),
        why,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no CERTIFICATE in the file".into()));
    }
    Ok(certs)
}
