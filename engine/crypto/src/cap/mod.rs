//! CAP: mutual authentication and key exchange before any DTP data frame
//! (SPEC SEQ-1; FSM WaitingForCAP → SessionEstablished, or → Idle on
//! failure or timeout; DESIGN.md §3 "CAP").
//!
//! # Protocol
//!
//! CAP runs **`Noise_XX_25519_ChaChaPoly_SHA256`** ([`NOISE_PARAMS`]) with
//! the prologue `DTP-CAP/1`, through `snow`, then one authenticated message
//! from the terminal. Why XX:
//! - both static keys travel encrypted (the Fay's identity is hidden from
//!   passive observers; its credential is encrypted to the terminal's
//!   static key, so a Fay that pins the terminal's key reveals it only to
//!   that terminal);
//! - the Fay (initiator) proves possession of the static key its credential
//!   names (the `se` token), which is what binds credential and session;
//! - the terminal (responder) has a static key the Fay may pin
//!   ([`InitiatorConfig::pinned_responder_key`]) but need not know in
//!   advance (IK/XK would require it);
//! - one pattern for every case keeps the state machines small.
//!
//! X25519 and SHA-256 are the conservative, widely reviewed choices;
//! ChaChaPoly is constant-time in software everywhere (the handshake does not
//! depend on AES hardware), while the *session* AEAD is negotiated.
//!
//! Messages (payloads in [`msg`]): (1) Fay → `e` + its AEAD preferences;
//! (2) terminal → `e, ee, s, es`; (3) Fay → `s, se` + its credential;
//! (4) terminal → the outcome: accepted (chosen algorithm, Session_ID) or
//! the error code, sealed under a key derived from the split, so the Fay
//! knows the outcome and knows it came from the terminal.
//!
//! The terminal verifies the credential with a [`Verifier`] and checks that
//! the credential's Noise key equals the handshake's remote static key. It
//! picks the session AEAD (SPEC ENC: "chosen at CAP time"): the first
//! algorithm in the Fay's order that the terminal allows (the Fay knows
//! whether it has AES hardware).
//!
//! # Outputs
//!
//! [`CapOutcome`] carries the Noise split (snow's raw split:
//! `initiator_to_responder`, `responder_to_initiator`), the handshake hash,
//! the algorithm, the Session_ID (SPEC SEQ-2, minted by the terminal) and
//! the authenticated peer. The secrets are copies the caller owns; wipe them
//! when done.
//!
//! # Sans-IO
//!
//! [`CapInitiator`] and [`CapResponder`] take messages and `now`, and are
//! drained with `poll_transmit`, `poll_timeout`, `poll_outcome`. Randomness
//! is a 32-byte seed per handshake (expanded with SHA-256 for snow's
//! ephemeral key), plus 16 bytes for the Session_ID on the terminal: pass
//! fresh random bytes. Every message has a size ceiling checked before any
//! work. On any failure the machine drops its Noise state and keys and stays
//! failed; a terminal that failed after the handshake completed still
//! transmits the authenticated rejection.
//!
//! This module owns the handshake and nothing after it: it never seals
//! frames (that is [`crate::aead`]) and never touches sockets or clocks.

mod machine;
pub mod msg;
mod noise;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use dtp_codec::{AeadAlgorithm, ErrorCode};
use uuid::Uuid;

use crate::cred::{CredError, Credential, Verifier};

pub use machine::{CapInitiator, CapResponder};
pub use noise::{NOISE_PARAMS, NOISE_PRIVATE_KEY_LABEL, NoiseKeypair, PROLOGUE};

/// Default time a handshake may take, from the machine's creation.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The Fay's side of CAP.
#[derive(Clone, Debug)]
pub struct InitiatorConfig {
    /// The Fay's Noise static key pair; its public half is the one its
    /// credential names.
    pub static_keypair: NoiseKeypair,
    /// The Fay's credential.
    pub credential: Credential,
    /// Session AEAD preferences, most preferred first (1–8, no repeats).
    pub algorithms: Vec<AeadAlgorithm>,
    /// If set, the terminal must prove this static key.
    pub pinned_responder_key: Option<[u8; 32]>,
    /// How long the handshake may take.
    pub handshake_timeout: Duration,
}

/// The terminal's side of CAP.
#[derive(Clone, Debug)]
pub struct ResponderConfig {
    /// The terminal's Noise static key pair.
    pub static_keypair: NoiseKeypair,
    /// Session AEADs the terminal allows (order does not matter: the Fay's
    /// order decides among them).
    pub algorithms: Vec<AeadAlgorithm>,
    /// How long the handshake may take.
    pub handshake_timeout: Duration,
}

/// The terminal's static public key, as authenticated by the handshake (the
/// initiator's [`CapOutcome::peer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TerminalKey(pub [u8; 32]);

/// SPEC SEQ-1, ENC-1: a finished CAP handshake — identity verified, keys
/// exchanged. `P` is the authenticated peer: a [`crate::cred::VerifiedCredential`]
/// on the terminal, a [`TerminalKey`] on the Fay.
#[derive(Clone, PartialEq, Eq)]
pub struct CapOutcome<P> {
    /// The session AEAD the terminal chose.
    pub algorithm: AeadAlgorithm,
    /// The Noise split's first key: Fay → terminal traffic. Secret.
    pub initiator_to_responder: [u8; 32],
    /// The Noise split's second key: terminal → Fay traffic. Secret.
    pub responder_to_initiator: [u8; 32],
    /// The Noise handshake hash (unique per handshake; not secret).
    pub handshake_hash: [u8; 32],
    /// SPEC SEQ-2: the DTP Session_ID (UUID v4) the terminal minted.
    pub session_id: Uuid,
    /// The authenticated peer.
    pub peer: P,
}

impl<P: fmt::Debug> fmt::Debug for CapOutcome<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapOutcome")
            .field("algorithm", &self.algorithm)
            .field("initiator_to_responder", &"<secret>")
            .field("responder_to_initiator", &"<secret>")
            .field("handshake_hash", &crate::cred::hex(&self.handshake_hash))
            .field("session_id", &self.session_id)
            .field("peer", &self.peer)
            .finish()
    }
}

/// Where a CAP machine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapState {
    /// The handshake is running.
    Handshaking,
    /// Done: identity verified and keys exchanged (FSM → SessionEstablished).
    Established,
    /// Failed or timed out; everything is released (FSM → Idle).
    Failed,
}

/// Why CAP failed. Each variant maps to a CAP error code ([`CapError::code`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CapError {
    /// The handshake did not finish before its deadline (CAP_TIMEOUT).
    #[error("CAP handshake timed out")]
    Timeout,
    /// The Fay's credential was refused (its own code: CREDENTIAL_INVALID,
    /// CREDENTIAL_EXPIRED, CREDENTIAL_REVOKED or UNKNOWN_ISSUER).
    #[error(transparent)]
    Credential(#[from] CredError),
    /// The credential names another Noise key than the one the Fay proved
    /// (CAP_FAILED).
    #[error("the credential was issued for another Noise key than the one the peer proved")]
    KeyMismatch,
    /// This Fay's credential does not name its own static key (CAP_FAILED;
    /// a configuration error found before anything is sent).
    #[error("the configured credential names another Noise key than the configured static key")]
    LocalKeyMismatch,
    /// The terminal's static key is not the pinned one (CAP_FAILED).
    #[error("the terminal's static key is not the pinned key")]
    PinMismatch,
    /// A message is malformed (CAP_FAILED).
    #[error("CAP message {message} is malformed: {reason} (byte {offset})")]
    Malformed {
        /// Message number, 1–4.
        message: u8,
        /// What is wrong.
        reason: &'static str,
        /// Byte offset in the message (or its payload for payload errors).
        offset: usize,
    },
    /// A message is longer than its ceiling (CAP_FAILED).
    #[error("CAP message {message} is {len} bytes, more than its {max}-byte ceiling")]
    MessageTooLarge {
        /// Message number, 1–4.
        message: u8,
        /// Its length.
        len: usize,
        /// The ceiling.
        max: usize,
    },
    /// A message failed authentication: tampered, or keys differ
    /// (CAP_FAILED).
    #[error("CAP message {message} failed to decrypt (tampered, or not from the handshake peer)")]
    Decrypt {
        /// Message number, 1–4.
        message: u8,
    },
    /// No session AEAD both sides allow (CAP_FAILED).
    #[error("no session AEAD algorithm both sides allow; configure a common one")]
    NoCommonAlgorithm,
    /// The terminal refused, with this code (as received).
    #[error("the terminal refused CAP: {code}")]
    Rejected {
        /// The terminal's code.
        code: ErrorCode,
    },
    /// A message arrived when none was expected (CAP_FAILED).
    #[error("a CAP message arrived after the handshake ended")]
    UnexpectedMessage,
    /// The configuration is unusable (CAP_FAILED).
    #[error("CAP configuration: {0}")]
    Config(&'static str),
    /// A cryptographic library failed unexpectedly (CAP_FAILED).
    #[error("CAP internal failure: {0}")]
    Internal(&'static str),
}

impl CapError {
    /// The wire error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            CapError::Timeout => ErrorCode::CAP_TIMEOUT,
            CapError::Credential(e) => e.code(),
            CapError::Rejected { code } => *code,
            _ => ErrorCode::CAP_FAILED,
        }
    }
}

/// What the terminal needs to finish the handshake at message 3.
#[derive(Clone, Copy, Debug)]
pub struct ResponderContext<'a> {
    /// Trusted issuers and revocations.
    pub verifier: &'a Verifier,
    /// Unix seconds, for the credential's validity window.
    pub unix_now: u64,
}
