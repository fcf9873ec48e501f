//! Keys and credentials for a test: an Ed25519 issuer, the Fay's and the
//! terminal's Noise static keys, and a credential the issuer signed for
//! the Fay (SPEC CAP: Fays present Ed25519-signed credentials).
//!
//! Everything is derived from one seed byte, so a test's keys are the same
//! on every run; a test that needs two unrelated key sets picks two seeds.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use dtp_codec::{AccessMode, AeadAlgorithm};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair, ResponderConfig};
use dtp_crypto::cred::{Credential, CredentialRequest, Grant, IssuerKeyPair, Verifier};
use dtp_endpoint::{EndpointConfig, FayConfig, TerminalConfig};

/// The wall clock in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// One test's keys: an issuer, both sides' Noise keys, the Fay's
/// credential, and the AEADs both sides offer.
pub struct Keys {
    /// The issuer that signed [`Keys::credential`].
    pub issuer: IssuerKeyPair,
    /// The Fay's Noise static key pair (the credential names its public half).
    pub fay: NoiseKeypair,
    /// The terminal's Noise static key pair (the Fay pins its public half).
    pub terminal: NoiseKeypair,
    /// The Fay's credential: valid from a minute ago for an hour.
    pub credential: Credential,
    /// The session AEADs both sides offer, preferred first.
    pub algorithms: Vec<AeadAlgorithm>,
}

impl Keys {
    /// Keys derived from `seed`: a credential for `fay_id` with `grants`
    /// (resource id, mode), its descriptor id `[seed; 16]`; both sides
    /// offer ChaCha20-Poly1305 only.
    pub fn new(seed: u8, fay_id: &str, grants: &[(&str, &[AccessMode])]) -> Self {
        let issuer = IssuerKeyPair::from_seed(&[seed; 32]).unwrap();
        let fay = NoiseKeypair::from_private([seed.wrapping_add(1); 32]).unwrap();
        let terminal = NoiseKeypair::from_private([seed.wrapping_add(2); 32]).unwrap();
        let credential = issue(
            &issuer,
            fay_id,
            *fay.public(),
            grants,
            [seed; 16],
            valid_now(),
        );
        Keys {
            issuer,
            fay,
            terminal,
            credential,
            algorithms: vec![AeadAlgorithm::ChaCha20Poly1305],
        }
    }

    /// The same keys, both sides offering `algorithms`.
    pub fn with_algorithms(mut self, algorithms: &[AeadAlgorithm]) -> Self {
        self.algorithms = algorithms.to_vec();
        self
    }

    /// A verifier trusting the issuer.
    pub fn verifier(&self) -> Verifier {
        verifier(&self.issuer)
    }

    /// The Fay's DTP configuration: its key and credential, the terminal's
    /// key pinned.
    pub fn fay_config(&self) -> FayConfig {
        fay_config(
            self.fay.clone(),
            self.credential.clone(),
            &self.algorithms,
            *self.terminal.public(),
        )
    }

    /// The terminal's DTP configuration: its key, trusting the issuer.
    pub fn terminal_config(&self) -> TerminalConfig {
        TerminalConfig {
            cap: ResponderConfig {
                static_keypair: self.terminal.clone(),
                algorithms: self.algorithms.clone(),
                handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            },
            verifier: Arc::new(self.verifier()),
            endpoint: EndpointConfig::terminal(),
        }
    }

    /// Writes the terminal's private key and the issuer's public key into
    /// `dir`, as `dtp cred` would, for a `dtp serve` configuration.
    pub fn write_files(&self, dir: &Path) -> KeyFiles {
        let files = KeyFiles {
            terminal_key: dir.join("terminal.key"),
            issuer_public: dir.join("issuer.pub"),
        };
        std::fs::write(&files.terminal_key, self.terminal.to_text()).unwrap();
        std::fs::write(&files.issuer_public, self.issuer.public_key().to_text()).unwrap();
        files
    }
}

/// The key files [`Keys::write_files`] wrote.
#[derive(Clone, Debug)]
pub struct KeyFiles {
    /// The terminal's Noise private key.
    pub terminal_key: PathBuf,
    /// The issuer's public key.
    pub issuer_public: PathBuf,
}

impl KeyFiles {
    /// A `[dtp]` section running DTP with these keys (`extra` lines are
    /// appended to it).
    pub fn dtp_section(&self, extra: &str) -> String {
        format!(
            "[dtp]\nenabled = true\nterminal_key = \"{}\"\ntrust = [\"{}\"]\n{extra}",
            self.terminal_key.display(),
            self.issuer_public.display()
        )
    }
}

/// A verifier trusting `issuer` alone.
pub fn verifier(issuer: &IssuerKeyPair) -> Verifier {
    let mut v = Verifier::new();
    v.trust(*issuer.public_key()).unwrap();
    v
}

/// Valid from a minute ago for an hour, on the wall clock (Unix seconds).
pub fn valid_now() -> Range<u64> {
    let unix = unix_now();
    unix - 60..unix + 3600
}

/// A credential `issuer` signs for `fay_id` holding `noise_key`, with
/// `grants` (a resource and its modes), valid over `valid` (Unix seconds,
/// `not_before..not_after`).
pub fn issue(
    issuer: &IssuerKeyPair,
    fay_id: &str,
    noise_key: [u8; 32],
    grants: &[(&str, &[AccessMode])],
    descriptor_id: [u8; 16],
    valid: Range<u64>,
) -> Credential {
    let request = CredentialRequest {
        fay_id: fay_id.into(),
        noise_key,
        grants: grants
            .iter()
            .map(|(resource, modes)| Grant {
                resource_id: (*resource).into(),
                modes: modes.iter().copied().collect(),
            })
            .collect(),
        not_before: valid.start,
        not_after: valid.end,
    };
    issuer.issue(request, descriptor_id).unwrap()
}

/// A Fay's DTP configuration: `keys` and `credential` for CAP, offering
/// `algorithms`, the terminal's `pinned` key required.
pub fn fay_config(
    keys: NoiseKeypair,
    credential: Credential,
    algorithms: &[AeadAlgorithm],
    pinned: [u8; 32],
) -> FayConfig {
    FayConfig {
        cap: InitiatorConfig {
            static_keypair: keys,
            credential,
            algorithms: algorithms.to_vec(),
            pinned_responder_key: Some(pinned),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        endpoint: EndpointConfig::fay(),
    }
}
