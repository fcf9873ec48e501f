//! The Encryption Module's errors, mapped to the spec's codes, and its
//! counters for metrics.

use dtp_codec::{AeadAlgorithm, DecodeError, EncodeError, ErrorCode};

/// Why a frame could not be sealed or opened, or keys not installed.
///
/// Every error from a peer's bytes is one of the opening variants; none of
/// them leaves the opener in a changed state, so the frame is simply not
/// delivered. On a byte-stream transport the engine should still close the
/// connection on any opening error: a stream cannot resynchronise past a
/// rejected frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AeadError {
    /// SPEC ENC-3: seal or open asked for before CAP finished key exchange.
    #[error(
        "{} no keys yet: CAP has not finished key exchange on this connection",
        ErrorCode::KEY_NOT_READY
    )]
    KeyNotReady,
    /// The key reached its usage limit ([`KeyLimits`](super::KeyLimits)):
    /// call [`Sealer::rekey`](super::Sealer::rekey) before sealing more.
    #[error(
        "{} key version {key_version} reached its usage limit after {seals} seals; rekey before sealing more",
        ErrorCode::KEY_NOT_READY
    )]
    KeyExhausted {
        /// The exhausted key's version.
        key_version: u16,
        /// Frames it sealed.
        seals: u64,
    },
    /// Key version 65535 is in use: no further rekey is possible.
    #[error(
        "{} key version 65535 is the last one: reconnect (a new CAP handshake) for fresh keys",
        ErrorCode::KEY_NOT_READY
    )]
    KeyVersionsExhausted,
    /// The frame handed to the sealer is already sealed.
    #[error("{} the frame is already sealed", ErrorCode::INCONSISTENT)]
    AlreadySealed,
    /// The plaintext frame cannot be encoded (over a ceiling, inconsistent).
    #[error("cannot encode the frame: {0}")]
    Encode(EncodeError),
    /// The sealed frame would be longer than the receiver's `max_frame_len`
    /// (the seal adds 24 bytes to the body).
    #[error(
        "{} the sealed frame would be {len} bytes after the header, over the maximum {max}; send a smaller body",
        ErrorCode::FRAME_TOO_LARGE
    )]
    FrameTooLarge {
        /// Length after the header once sealed.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// Key limits that are inconsistent or above the algorithm's safe limits.
    #[error("{} invalid key limits: {}", ErrorCode::INTERNAL, .0)]
    InvalidLimits(&'static str),
    /// Key material from CAP that cannot be used.
    #[error("{} invalid key material: {}", ErrorCode::INTERNAL, .0)]
    InvalidKeyMaterial(&'static str),
    /// The bytes are not one well-formed frame, or the opened body is not
    /// a valid body of its kind.
    #[error("{0}")]
    Malformed(DecodeError),
    /// A plaintext frame (algorithm 0) arrived where a sealed one is required.
    #[error(
        "{} the frame is not sealed, but this connection encrypts every frame",
        ErrorCode::DECRYPT_FAILED
    )]
    NotSealed,
    /// The frame is sealed with another algorithm than the one CAP chose.
    #[error(
        "{} the frame is sealed with {}, but this connection uses {}",
        ErrorCode::DECRYPT_FAILED, found.name(), expected.name()
    )]
    AlgorithmMismatch {
        /// The algorithm chosen at CAP time.
        expected: AeadAlgorithm,
        /// The algorithm in the frame's header.
        found: AeadAlgorithm,
    },
    /// SPEC ENC-4: the frame names a key version that is not in use (older
    /// than the current one, or more than one ahead).
    #[error(
        "{} key version {found} is not in use (current {current}, next {})",
        ErrorCode::KEY_VERSION_MISMATCH, current.saturating_add(1)
    )]
    KeyVersionMismatch {
        /// The version in the frame's header.
        found: u16,
        /// The version the opener uses.
        current: u16,
    },
    /// The seal counter did not increase: a replayed or reordered frame.
    #[error(
        "{} replayed or reordered frame: seal counter {counter} under key version {key_version} is not above {last}",
        ErrorCode::DECRYPT_FAILED
    )]
    Replay {
        /// The key version.
        key_version: u16,
        /// The counter in the frame.
        counter: u64,
        /// The highest counter opened so far under that key.
        last: u64,
    },
    /// SPEC ENC-2: authentication failed: the frame was altered, or sealed
    /// under another key (e.g. an earlier connection's).
    #[error(
        "{} frame failed authentication (key version {key_version}, seal counter {counter}): altered in transit or sealed under another key",
        ErrorCode::DECRYPT_FAILED
    )]
    DecryptFailed {
        /// The key version tried.
        key_version: u16,
        /// The frame's seal counter.
        counter: u64,
    },
    /// ring refused an operation that cannot fail for valid sizes.
    #[error("{} cryptographic library failure", ErrorCode::INTERNAL)]
    Crypto,
}

impl AeadError {
    /// The wire error code to report (a close frame's code).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::KeyNotReady | Self::KeyExhausted { .. } | Self::KeyVersionsExhausted => {
                ErrorCode::KEY_NOT_READY
            }
            Self::AlreadySealed => ErrorCode::INCONSISTENT,
            Self::Encode(EncodeError::LimitExceeded { .. }) => ErrorCode::LIMIT_EXCEEDED,
            Self::Encode(EncodeError::Inconsistent(_)) => ErrorCode::INCONSISTENT,
            Self::Encode(EncodeError::BufferTooSmall { .. }) => ErrorCode::INTERNAL,
            Self::FrameTooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
            Self::InvalidLimits(_) | Self::InvalidKeyMaterial(_) | Self::Crypto => {
                ErrorCode::INTERNAL
            }
            Self::Malformed(e) => e.code(),
            Self::NotSealed
            | Self::AlgorithmMismatch { .. }
            | Self::Replay { .. }
            | Self::DecryptFailed { .. } => ErrorCode::DECRYPT_FAILED,
            Self::KeyVersionMismatch { .. } => ErrorCode::KEY_VERSION_MISMATCH,
        }
    }
}

/// Frames the opener refused, by reason (monotonic counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Opened before keys were installed (ENC-3).
    pub key_not_ready: u64,
    /// Not one well-formed frame, or an authenticated but invalid body.
    pub malformed: u64,
    /// Plaintext frames.
    pub not_sealed: u64,
    /// Sealed with an algorithm other than the connection's.
    pub algorithm: u64,
    /// Key version not in use (ENC-4).
    pub key_version: u64,
    /// Seal counter not increasing.
    pub replay: u64,
    /// Authentication failures (ENC-2).
    pub decrypt_failed: u64,
}

impl Rejections {
    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.key_not_ready
            + self.malformed
            + self.not_sealed
            + self.algorithm
            + self.key_version
            + self.replay
            + self.decrypt_failed
    }

    /// Counts one refusal under its reason.
    pub(crate) fn count(&mut self, e: &AeadError) {
        let slot = match e {
            AeadError::KeyNotReady => &mut self.key_not_ready,
            AeadError::NotSealed => &mut self.not_sealed,
            AeadError::AlgorithmMismatch { .. } => &mut self.algorithm,
            AeadError::KeyVersionMismatch { .. } => &mut self.key_version,
            AeadError::Replay { .. } => &mut self.replay,
            AeadError::DecryptFailed { .. } => &mut self.decrypt_failed,
            _ => &mut self.malformed,
        };
        *slot += 1;
    }

    fn add(&mut self, o: &Rejections) {
        self.key_not_ready += o.key_not_ready;
        self.malformed += o.malformed;
        self.not_sealed += o.not_sealed;
        self.algorithm += o.algorithm;
        self.key_version += o.key_version;
        self.replay += o.replay;
        self.decrypt_failed += o.decrypt_failed;
    }
}

/// The Encryption Module's counters for metrics. All are monotonic: they
/// survive rekeys and, in [`EncryptionModule`](super::EncryptionModule),
/// reconnects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AeadStats {
    /// Frames sealed.
    pub sealed_frames: u64,
    /// Plaintext body bytes sealed.
    pub sealed_bytes: u64,
    /// Seals refused for want of a usable key (not ready, exhausted).
    pub seal_refused: u64,
    /// Frames opened (authenticated and decoded).
    pub opened_frames: u64,
    /// Plaintext body bytes opened.
    pub opened_bytes: u64,
    /// Frames the opener refused, by reason.
    pub rejected: Rejections,
    /// Rekeys of the sending direction.
    pub rekeys_sent: u64,
    /// Key versions the peer switched to that the opener followed.
    pub rekeys_received: u64,
}

impl AeadStats {
    /// Adds `o`'s counters to these.
    pub fn add(&mut self, o: &AeadStats) {
        self.sealed_frames += o.sealed_frames;
        self.sealed_bytes += o.sealed_bytes;
        self.seal_refused += o.seal_refused;
        self.opened_frames += o.opened_frames;
        self.opened_bytes += o.opened_bytes;
        self.rejected.add(&o.rejected);
        self.rekeys_sent += o.rekeys_sent;
        self.rekeys_received += o.rekeys_received;
    }
}
