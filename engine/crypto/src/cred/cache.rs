//! [`SignatureCache`]: credentials whose issuer signature was already
//! checked, so that a credential presented again (a Fay's AuthRequests on
//! the connection whose CAP verified it) costs a map lookup instead of an
//! Ed25519 verification.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use super::{CredError, Credential, VerifiedCredential, Verifier};

/// SPEC TS-5, TS-16: a bounded cache of credentials whose signature checked
/// out, keyed by their exact bytes.
///
/// Only the signature is cached — it is a pure function of the bytes and
/// the issuer key, and a key id names one key. Everything that can change
/// is checked again on every use: the issuer still trusted, the credential
/// not revoked (the verifier's list and any shared one), `now` inside the
/// validity window. A credential that fails its signature is never cached.
/// At the ceiling the oldest entry goes.
#[derive(Debug)]
pub struct SignatureCache {
    checked: HashMap<Bytes, Arc<Credential>>,
    order: VecDeque<Bytes>,
    max: usize,
}

impl SignatureCache {
    /// Default ceiling on cached credentials.
    pub const DEFAULT_MAX: usize = 4096;

    /// An empty cache holding at most `max` credentials (at least one).
    pub fn new(max: usize) -> Self {
        SignatureCache {
            checked: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
        }
    }

    /// [`Verifier::verify_bytes`], with the signature check skipped for
    /// bytes whose signature already checked out.
    pub fn verify_bytes(
        &mut self,
        verifier: &Verifier,
        bytes: &[u8],
        now: u64,
    ) -> Result<VerifiedCredential, CredError> {
        if let Some(cred) = self.checked.get(bytes) {
            return verifier.verify_signed(cred, now);
        }
        let cred = Arc::new(Credential::from_bytes(bytes)?);
        let result = verifier.verify_shared(&cred, now);
        // Whatever else failed, the signature held: remember that.
        let signed = match &result {
            Ok(_) => true,
            Err(
                CredError::Revoked(_) | CredError::NotYetValid { .. } | CredError::Expired { .. },
            ) => true,
            Err(_) => false,
        };
        if signed {
            if self.order.len() >= self.max
                && let Some(old) = self.order.pop_front()
            {
                self.checked.remove(&old);
            }
            let key = cred.as_bytes().clone();
            self.order.push_back(key.clone());
            self.checked.insert(key, cred);
        }
        result
    }

    /// Credentials cached.
    pub fn len(&self) -> usize {
        self.checked.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.checked.is_empty()
    }
}

impl Default for SignatureCache {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX)
    }
}
