//! Fay credentials: Ed25519-signed descriptors, issuer keys, revocation, and
//! the [`Verifier`] the terminal runs during CAP (DESIGN.md §3 "CAP").
//!
//! A credential says: *issuer `issuer_key_id` grants Fay `fay_id`, whose
//! Noise static key is `noise_key`, these `grants` (resource × access
//! modes) from `not_before` until `not_after`*. Binding the Noise key is what
//! ties the credential to the handshake: the CAP responder accepts it only
//! from the peer that proved that key ([`crate::cap`]).
//!
//! Design choices:
//! - **Canonical binary form** ([`wire`]): one encoding per credential; the
//!   signature covers every byte before it, starting with the `DTPC` magic
//!   and version (domain separation). The parser is strict, bounded
//!   ([`MAX_CREDENTIAL_LEN`]) and reports field and byte offset.
//! - **Descriptor ids are never chosen by callers**:
//!   [`IssuerKeyPair::issue`] mints a UUID v4 from 16 caller random bytes,
//!   so an issuer cannot reuse one by accident.
//! - **Key id** ([`KeyId`]): the first 8 bytes of
//!   `SHA-256("DTP issuer key v1" ‖ public key)`. It only selects a trusted
//!   key; security rests on the signature check against that key.
//! - **Validity window**: valid iff `not_before <= now < not_after` (Unix
//!   seconds). Before `not_before` is its own error,
//!   [`CredError::NotYetValid`], reported with code CREDENTIAL_INVALID (the
//!   codec has no dedicated code).
//! - **Check order** in [`Verifier::verify`]: parse → known issuer →
//!   signature → revocation → validity window. A revoked credential reports
//!   REVOKED even when also expired (the stronger statement).
//! - **Text forms** ([`text`]): PEM-style armour for credentials and keys,
//!   a line-per-id file for revocations.
//!
//! This module never touches the filesystem, a clock or global randomness:
//! bytes and `now` come in, bytes go out. It knows nothing of Noise beyond
//! the 32-byte key it carries.

mod cache;
pub mod text;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use dtp_codec::{AccessMode, ErrorCode};
use ring::rand::SecureRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use uuid::Uuid;

pub use cache::SignatureCache;
pub use text::{RevocationList, TextError, armor, dearmor, revocation_list_add};
pub use wire::{MAX_CREDENTIAL_LEN, MAX_GRANTS, MAX_ID_LEN, ParseError, ParseErrorKind};

/// Armour label of a credential.
pub const CREDENTIAL_LABEL: &str = "DTP CREDENTIAL";
/// Armour label of an issuer private key (PKCS#8).
pub const PRIVATE_KEY_LABEL: &str = "PRIVATE KEY";
/// Armour label of an issuer public key (raw 32 bytes).
pub const PUBLIC_KEY_LABEL: &str = "DTP ISSUER PUBLIC KEY";

/// A set of [`AccessMode`]s (bits: read 1, write 2, execute 4, configure 8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessModes(u8);

impl AccessModes {
    const ALL_BITS: u8 = 0b1111;

    /// The empty set.
    pub const fn empty() -> Self {
        AccessModes(0)
    }

    /// The set from its bits, if no unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        if bits & !Self::ALL_BITS == 0 {
            Some(AccessModes(bits))
        } else {
            None
        }
    }

    /// The bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    const fn bit(mode: AccessMode) -> u8 {
        match mode {
            AccessMode::Read => 1,
            AccessMode::Write => 2,
            AccessMode::Execute => 4,
            AccessMode::Configure => 8,
        }
    }

    /// This set plus `mode`.
    #[must_use]
    pub const fn with(self, mode: AccessMode) -> Self {
        AccessModes(self.0 | Self::bit(mode))
    }

    /// Whether `mode` is in the set.
    pub const fn contains(self, mode: AccessMode) -> bool {
        self.0 & Self::bit(mode) != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The modes in the set, in wire order.
    pub fn iter(self) -> impl Iterator<Item = AccessMode> {
        [
            AccessMode::Read,
            AccessMode::Write,
            AccessMode::Execute,
            AccessMode::Configure,
        ]
        .into_iter()
        .filter(move |m| self.contains(*m))
    }
}

impl FromIterator<AccessMode> for AccessModes {
    fn from_iter<I: IntoIterator<Item = AccessMode>>(iter: I) -> Self {
        iter.into_iter()
            .fold(AccessModes::empty(), AccessModes::with)
    }
}

/// One grant: a resource and the modes the Fay may use it in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// The Resource_ID.
    pub resource_id: String,
    /// The access modes granted on it (never empty in a credential).
    pub modes: AccessModes,
}

/// An issuer key id: the first 8 bytes of
/// `SHA-256("DTP issuer key v1" ‖ raw Ed25519 public key)`, shown as 16
/// lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub [u8; 8]);

impl KeyId {
    /// The key id of a raw Ed25519 public key.
    pub fn of(public_key: &[u8; 32]) -> Self {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(b"DTP issuer key v1");
        ctx.update(public_key);
        let digest = ctx.finish();
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest.as_ref()[..8]);
        KeyId(id)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The signed content of a credential (as parsed; see [`wire`] for the
/// layout). Build new ones through [`IssuerKeyPair::issue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Unique per credential, UUID v4, never reused by an issuer.
    pub descriptor_id: Uuid,
    /// The Fay this credential names.
    pub fay_id: String,
    /// The Fay's Noise static public key (X25519).
    pub noise_key: [u8; 32],
    /// What the Fay may use, sorted by `resource_id`.
    pub grants: Vec<Grant>,
    /// First valid second (Unix time, inclusive).
    pub not_before: u64,
    /// End of validity (Unix time, exclusive).
    pub not_after: u64,
    /// The issuer's key id.
    pub issuer_key_id: KeyId,
}

/// What an issuer is asked to sign; the issuer adds the descriptor id and
/// its key id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRequest {
    /// The Fay.
    pub fay_id: String,
    /// The Fay's Noise static public key.
    pub noise_key: [u8; 32],
    /// Grants, in any order (the issuer sorts them; duplicates are refused).
    pub grants: Vec<Grant>,
    /// First valid second.
    pub not_before: u64,
    /// End of validity (exclusive).
    pub not_after: u64,
}

/// A credential: a descriptor and its issuer's signature, with the exact
/// bytes they came from. Parsed, not yet verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    descriptor: Descriptor,
    signature: [u8; wire::SIGNATURE_LEN],
    signed_len: usize,
    bytes: Bytes,
}

impl Credential {
    /// Parses the binary form strictly (never panics).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ParseError> {
        let p = wire::parse(bytes)?;
        Ok(Credential {
            descriptor: p.descriptor,
            signature: p.signature,
            signed_len: p.signed_len,
            bytes: Bytes::copy_from_slice(bytes),
        })
    }

    /// The binary form.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The armoured text form (label `DTP CREDENTIAL`).
    pub fn to_text(&self) -> String {
        armor(CREDENTIAL_LABEL, &self.bytes)
    }

    /// Parses the armoured text form.
    pub fn from_text(text: &str) -> Result<Self, FormatError> {
        let bytes = dearmor(CREDENTIAL_LABEL, text)?;
        Ok(Credential::from_bytes(&bytes)?)
    }

    /// The descriptor (unverified until a [`Verifier`] says otherwise).
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// The signature.
    pub fn signature(&self) -> &[u8; 64] {
        &self.signature
    }

    /// A human-readable summary for `dtp cred inspect` (no secrets: the
    /// signature is not shown, SPEC HO-3c's spirit).
    pub fn describe(&self) -> String {
        let d = &self.descriptor;
        let mut s = format!(
            "descriptor_id {}\nfay_id        {}\nnoise_key     {}\nissuer_key_id {}\nnot_before    {}\nnot_after     {}\ngrants        {}\n",
            d.descriptor_id,
            d.fay_id,
            hex(&d.noise_key),
            d.issuer_key_id,
            d.not_before,
            d.not_after,
            d.grants.len()
        );
        for g in &d.grants {
            let modes: Vec<&str> = g.modes.iter().map(AccessMode::name).collect();
            s.push_str(&format!("  {} {}\n", g.resource_id, modes.join(",")));
        }
        s
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a key or text file could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The armour or text is wrong.
    #[error(transparent)]
    Text(#[from] TextError),
    /// The credential bytes are malformed.
    #[error(transparent)]
    Credential(#[from] ParseError),
    /// The key bytes are not a valid key of the expected kind.
    #[error("not a valid {0} (wrong length or encoding)")]
    BadKey(&'static str),
    /// Key generation failed (the random source failed).
    #[error("key generation failed: the random source failed")]
    Random,
}

/// Why an issuer refused to sign a request.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot issue: {0}")]
pub struct IssueError(pub ParseError);

/// An issuer's Ed25519 key pair.
pub struct IssuerKeyPair {
    pair: Ed25519KeyPair,
    pkcs8: Vec<u8>,
    public: IssuerPublicKey,
}

impl fmt::Debug for IssuerKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuerKeyPair")
            .field("key_id", &self.public.key_id())
            .finish_non_exhaustive()
    }
}

impl IssuerKeyPair {
    /// Generates a key pair from a random source (e.g. `ring::rand::SystemRandom`).
    pub fn generate(rng: &dyn SecureRandom) -> Result<Self, FormatError> {
        let doc = Ed25519KeyPair::generate_pkcs8(rng).map_err(|_| FormatError::Random)?;
        Self::from_pkcs8(doc.as_ref())
    }

    /// Builds the key pair whose private seed is these 32 caller random bytes
    /// (deterministic: tests, or a caller that owns its randomness).
    pub fn from_seed(seed: &[u8; 32]) -> Result<Self, FormatError> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| FormatError::BadKey("Ed25519 seed"))?;
        // PKCS#8 v2 (RFC 5958 OneAsymmetricKey with the public key), the
        // form ring writes and reads.
        let mut pkcs8 = vec![
            0x30, 0x51, 0x02, 0x01, 0x01, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        pkcs8.extend_from_slice(seed);
        pkcs8.extend_from_slice(&[0x81, 0x21, 0x00]);
        pkcs8.extend_from_slice(pair.public_key().as_ref());
        Self::from_pkcs8(&pkcs8)
    }

    /// Imports a PKCS#8 (v2) private key.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, FormatError> {
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8)
            .map_err(|_| FormatError::BadKey("Ed25519 PKCS#8 v2 private key"))?;
        let public = IssuerPublicKey::from_raw(pair.public_key().as_ref())?;
        Ok(IssuerKeyPair {
            pair,
            pkcs8: pkcs8.to_vec(),
            public,
        })
    }

    /// The PKCS#8 (v2) export of the private key. Secret.
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The private key file (armour label `PRIVATE KEY`). Secret.
    pub fn to_text(&self) -> String {
        armor(PRIVATE_KEY_LABEL, &self.pkcs8)
    }

    /// Reads a private key file.
    pub fn from_text(text: &str) -> Result<Self, FormatError> {
        Self::from_pkcs8(&dearmor(PRIVATE_KEY_LABEL, text)?)
    }

    /// The public half.
    pub fn public_key(&self) -> &IssuerPublicKey {
        &self.public
    }

    /// Signs a request into a credential, minting its descriptor id (UUID v4)
    /// from `random` — never reuse those bytes. Grants are sorted; a request
    /// the parser would refuse (empty or over-long ids, too many or repeated
    /// grants, empty modes, `not_after <= not_before`) is refused here.
    pub fn issue(
        &self,
        request: CredentialRequest,
        random: [u8; 16],
    ) -> Result<Credential, IssueError> {
        let mut grants = request.grants;
        grants.sort_by(|a, b| a.resource_id.as_bytes().cmp(b.resource_id.as_bytes()));
        let descriptor = Descriptor {
            descriptor_id: uuid::Builder::from_random_bytes(random).into_uuid(),
            fay_id: request.fay_id,
            noise_key: request.noise_key,
            grants,
            not_before: request.not_before,
            not_after: request.not_after,
            issuer_key_id: self.public.key_id(),
        };
        wire::check_descriptor(&descriptor).map_err(IssueError)?;
        let mut bytes = wire::encode_descriptor(&descriptor);
        let signed_len = bytes.len();
        let sig = self.pair.sign(&bytes);
        let mut signature = [0u8; wire::SIGNATURE_LEN];
        signature.copy_from_slice(sig.as_ref());
        bytes.extend_from_slice(&signature);
        Ok(Credential {
            descriptor,
            signature,
            signed_len,
            bytes: Bytes::from(bytes),
        })
    }
}

/// An issuer's Ed25519 public key (raw 32 bytes) and its [`KeyId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IssuerPublicKey {
    raw: [u8; 32],
    id: KeyId,
}

impl IssuerPublicKey {
    /// From the raw 32 bytes.
    pub fn from_raw(raw: &[u8]) -> Result<Self, FormatError> {
        let raw: [u8; 32] = raw
            .try_into()
            .map_err(|_| FormatError::BadKey("Ed25519 public key"))?;
        Ok(IssuerPublicKey {
            raw,
            id: KeyId::of(&raw),
        })
    }

    /// The raw 32 bytes.
    pub fn raw(&self) -> &[u8; 32] {
        &self.raw
    }

    /// The key id.
    pub fn key_id(&self) -> KeyId {
        self.id
    }

    /// The public key file (armour label `DTP ISSUER PUBLIC KEY`).
    pub fn to_text(&self) -> String {
        armor(PUBLIC_KEY_LABEL, &self.raw)
    }

    /// Reads a public key file.
    pub fn from_text(text: &str) -> Result<Self, FormatError> {
        Self::from_raw(&dearmor(PUBLIC_KEY_LABEL, text)?)
    }
}

/// Why a credential is not acceptable. Each maps to its CAP error code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredError {
    /// The bytes are not a credential (CREDENTIAL_INVALID).
    #[error("credential invalid: {0}")]
    Malformed(#[from] ParseError),
    /// The signature does not verify against the named issuer's key
    /// (CREDENTIAL_INVALID).
    #[error("credential invalid: its signature does not verify against issuer key {0}")]
    BadSignature(KeyId),
    /// The issuer key id is not among the trusted ones (UNKNOWN_ISSUER).
    #[error(
        "credential issued by key {0}, which this terminal does not trust; add the issuer's public key"
    )]
    UnknownIssuer(KeyId),
    /// `now >= not_after` (CREDENTIAL_EXPIRED).
    #[error("credential expired at {not_after} (now {now}); issue a new one")]
    Expired {
        /// End of validity.
        not_after: u64,
        /// The time checked.
        now: u64,
    },
    /// `now < not_before` (CREDENTIAL_INVALID: no dedicated code exists).
    #[error("credential not valid before {not_before} (now {now}); check the clocks")]
    NotYetValid {
        /// Start of validity.
        not_before: u64,
        /// The time checked.
        now: u64,
    },
    /// The descriptor id is on the revocation list (CREDENTIAL_REVOKED).
    #[error("credential {0} was revoked")]
    Revoked(Uuid),
}

impl CredError {
    /// The wire error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            CredError::Malformed(_)
            | CredError::BadSignature(_)
            | CredError::NotYetValid { .. } => ErrorCode::CREDENTIAL_INVALID,
            CredError::UnknownIssuer(_) => ErrorCode::UNKNOWN_ISSUER,
            CredError::Expired { .. } => ErrorCode::CREDENTIAL_EXPIRED,
            CredError::Revoked(_) => ErrorCode::CREDENTIAL_REVOKED,
        }
    }
}

/// Why the verifier's configuration could not change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifierLimitError {
    /// Too many trusted issuers.
    #[error("more than {0} trusted issuer keys")]
    TooManyIssuers(usize),
    /// Too many revoked ids.
    #[error(transparent)]
    Revocations(#[from] TextError),
}

/// SPEC SEQ-1 (the identity half of CAP): checks credentials against trusted
/// issuer keys, a revocation list and the time.
///
/// Owned by one core (or the control thread); update it at run time with
/// [`Verifier::revoke`] / [`Verifier::set_revocations`]. Both maps have
/// ceilings.
#[derive(Debug)]
pub struct Verifier {
    issuers: HashMap<KeyId, IssuerPublicKey>,
    max_issuers: usize,
    revoked: RevocationList,
    /// Revocations made at run time elsewhere (an admin), seen at once.
    shared: Option<SharedRevocations>,
}

/// SPEC TS-16: revocations made while running, shared by every verifier
/// that must honour them at once — the gateway's CAP on every core and the
/// control thread's session checks. Cloning shares the set.
///
/// Read under a lock at each verification (a handshake or an AuthRequest,
/// never per frame); bounded like a [`RevocationList`].
#[derive(Clone, Debug)]
pub struct SharedRevocations {
    inner: std::sync::Arc<std::sync::RwLock<RevocationList>>,
}

impl Default for SharedRevocations {
    fn default() -> Self {
        Self::new()
    }
}

impl SharedRevocations {
    /// An empty set with the default ceiling.
    pub fn new() -> Self {
        SharedRevocations {
            inner: std::sync::Arc::new(std::sync::RwLock::new(RevocationList::new(
                RevocationList::DEFAULT_MAX,
            ))),
        }
    }

    /// Revokes `id` for every verifier sharing the set; `Ok(false)` if it
    /// already was.
    pub fn revoke(&self, id: Uuid) -> Result<bool, VerifierLimitError> {
        // A poisoned lock only means a panic elsewhere mid-insert; the set
        // is still a valid set.
        let mut list = self.inner.write().unwrap_or_else(|e| e.into_inner());
        Ok(list.add(id)?)
    }

    /// Whether `id` is revoked.
    pub fn contains(&self, id: &Uuid) -> bool {
        let list = self.inner.read().unwrap_or_else(|e| e.into_inner());
        list.contains(id)
    }
}

impl Verifier {
    /// Default ceiling on trusted issuer keys.
    pub const DEFAULT_MAX_ISSUERS: usize = 256;

    /// A verifier trusting nobody, with the default ceilings.
    pub fn new() -> Self {
        Verifier {
            issuers: HashMap::new(),
            max_issuers: Self::DEFAULT_MAX_ISSUERS,
            revoked: RevocationList::new(RevocationList::DEFAULT_MAX),
            shared: None,
        }
    }

    /// Also honours the revocations of `shared`, made at run time (SPEC
    /// TS-16: a revocation ends sessions at once and refuses new ones).
    pub fn share_revocations(&mut self, shared: SharedRevocations) {
        self.shared = Some(shared);
    }

    /// Trusts an issuer key (idempotent).
    pub fn trust(&mut self, key: IssuerPublicKey) -> Result<(), VerifierLimitError> {
        if !self.issuers.contains_key(&key.key_id()) && self.issuers.len() >= self.max_issuers {
            return Err(VerifierLimitError::TooManyIssuers(self.max_issuers));
        }
        self.issuers.insert(key.key_id(), key);
        Ok(())
    }

    /// Stops trusting an issuer key; `true` if it was trusted.
    pub fn distrust(&mut self, id: &KeyId) -> bool {
        self.issuers.remove(id).is_some()
    }

    /// Revokes a descriptor id; `Ok(false)` if it already was.
    pub fn revoke(&mut self, id: Uuid) -> Result<bool, VerifierLimitError> {
        Ok(self.revoked.add(id)?)
    }

    /// Replaces the whole revocation list (e.g. after re-reading its file).
    pub fn set_revocations(&mut self, list: RevocationList) {
        self.revoked = list;
    }

    /// The revocation list.
    pub fn revocations(&self) -> &RevocationList {
        &self.revoked
    }

    /// Parses and verifies a credential's binary form at `now` (Unix seconds).
    pub fn verify_bytes(&self, bytes: &[u8], now: u64) -> Result<VerifiedCredential, CredError> {
        self.verify_shared(&Arc::new(Credential::from_bytes(bytes)?), now)
    }

    /// Verifies a parsed credential at `now` (Unix seconds): issuer, then
    /// signature, then revocation, then validity window.
    pub fn verify(&self, cred: &Credential, now: u64) -> Result<VerifiedCredential, CredError> {
        self.verify_shared(&Arc::new(cred.clone()), now)
    }

    /// [`Verifier::verify`] of a credential already shared (the signature
    /// cache keeps the one it verified, and the result shares it).
    fn verify_shared(
        &self,
        cred: &Arc<Credential>,
        now: u64,
    ) -> Result<VerifiedCredential, CredError> {
        let d = &cred.descriptor;
        let key = self
            .issuers
            .get(&d.issuer_key_id)
            .ok_or(CredError::UnknownIssuer(d.issuer_key_id))?;
        let signed = cred.bytes.get(..cred.signed_len).unwrap_or_default();
        UnparsedPublicKey::new(&ED25519, key.raw())
            .verify(signed, &cred.signature)
            .map_err(|_| CredError::BadSignature(d.issuer_key_id))?;
        self.verify_signed(cred, now)
    }

    /// SPEC HO-4 (T0): checks again what can have changed since
    /// `verified` was verified (its issuer still trusted, not revoked,
    /// inside its validity window at `now`), without checking its signature
    /// again: its bytes cannot have changed, and an Ed25519 check was a third
    /// of the control thread's time per handover.
    pub fn recheck(
        &self,
        verified: &VerifiedCredential,
        now: u64,
    ) -> Result<VerifiedCredential, CredError> {
        self.verify_signed(&verified.credential, now)
    }

    /// The checks after the signature: revocation, then validity window.
    /// The issuer must still be trusted (a signature checked earlier under
    /// a key no longer trusted counts for nothing).
    fn verify_signed(
        &self,
        cred: &Arc<Credential>,
        now: u64,
    ) -> Result<VerifiedCredential, CredError> {
        let d = &cred.descriptor;
        if !self.issuers.contains_key(&d.issuer_key_id) {
            return Err(CredError::UnknownIssuer(d.issuer_key_id));
        }
        if self.revoked.contains(&d.descriptor_id)
            || self
                .shared
                .as_ref()
                .is_some_and(|s| s.contains(&d.descriptor_id))
        {
            return Err(CredError::Revoked(d.descriptor_id));
        }
        if now < d.not_before {
            return Err(CredError::NotYetValid {
                not_before: d.not_before,
                now,
            });
        }
        if now >= d.not_after {
            return Err(CredError::Expired {
                not_after: d.not_after,
                now,
            });
        }
        Ok(VerifiedCredential {
            credential: Arc::clone(cred),
        })
    }
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

/// A credential that passed [`Verifier::verify`] at some time.
///
/// Validity is a property of time: re-check [`VerifiedCredential::is_valid_at`]
/// as the clock moves (SPEC TS-16 ends sessions at `not_after`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedCredential {
    /// Shared with the signature cache: a cached credential verified again
    /// (every request of a known Fay) is not copied (its Fay id and grants
    /// were three allocations per decision on the control thread).
    credential: Arc<Credential>,
}

impl VerifiedCredential {
    /// The Fay.
    pub fn fay_id(&self) -> &str {
        &self.credential.descriptor.fay_id
    }

    /// The grants, sorted by resource id.
    pub fn grants(&self) -> &[Grant] {
        &self.credential.descriptor.grants
    }

    /// The descriptor id (what a revocation names).
    pub fn descriptor_id(&self) -> Uuid {
        self.credential.descriptor.descriptor_id
    }

    /// The issuer's key id.
    pub fn issuer_key_id(&self) -> KeyId {
        self.credential.descriptor.issuer_key_id
    }

    /// The Fay's Noise static public key.
    pub fn noise_key(&self) -> &[u8; 32] {
        &self.credential.descriptor.noise_key
    }

    /// `(not_before, not_after)`, Unix seconds, the second exclusive.
    pub fn validity(&self) -> (u64, u64) {
        (
            self.credential.descriptor.not_before,
            self.credential.descriptor.not_after,
        )
    }

    /// Whether `now` is inside the validity window.
    pub fn is_valid_at(&self, now: u64) -> bool {
        let (nb, na) = self.validity();
        nb <= now && now < na
    }

    /// Whether the credential grants `mode` on `resource_id`.
    pub fn permits(&self, resource_id: &str, mode: AccessMode) -> bool {
        let grants = self.grants();
        grants
            .binary_search_by(|g| g.resource_id.as_bytes().cmp(resource_id.as_bytes()))
            .is_ok_and(|i| grants[i].modes.contains(mode))
    }

    /// The whole credential.
    pub fn credential(&self) -> &Credential {
        &self.credential
    }
}
