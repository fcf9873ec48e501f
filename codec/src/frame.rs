//! The LogicalFrame: what a DTP frame means, independent of its bytes.
//!
//! The header fields that are derived from the body (the kind, the body
//! length) are not stored, so a frame whose header disagrees with its body
//! cannot be built.

use std::collections::BTreeMap;

use bytes::Bytes;
use uuid::Uuid;

#[cfg(feature = "json")]
use serde::{Deserialize, Serialize};

use crate::control::ControlMessage;
use crate::error::ErrorCode;

/// The two bytes every DTP frame starts with.
pub const MAGIC: [u8; 2] = [0xD7, 0x50];
/// The wire format version this crate reads and writes (SPEC FRM-5).
pub const VERSION: u8 = 1;
/// Length of the fixed frame header in bytes.
pub const HEADER_LEN: usize = 16;
/// Length of the seal counter that follows the header of a sealed frame.
pub const SEAL_COUNTER_LEN: usize = 8;
/// Length of the AEAD tag at the end of a sealed body.
pub const TAG_LEN: usize = 16;

/// SPEC AGR-3: an agreement's identifier, a UUID v4 chosen by the side that accepts.
pub type AgreementId = Uuid;
/// A session identifier: UUID v4 for DTP sessions (SEQ-2), v7 for terminal sessions (TS-6).
pub type SessionId = Uuid;
/// A fragment's identifier, unique within its agreement (chosen by the sender).
pub type FragmentId = u64;
/// A string-to-string map, kept sorted so that its encoding is canonical.
pub type Terms = BTreeMap<String, String>;

/// One DTP frame (SPEC FRM-1, FRM-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogicalFrame {
    /// The stream within the connection this frame belongs to. Agreement-id
    /// inheritance (SEQ-4) is scoped to a stream.
    pub stream_id: u32,
    /// What the frame carries.
    pub body: Body,
}

impl LogicalFrame {
    /// A frame with a plaintext body.
    pub fn plain(stream_id: u32, body: Body) -> Self {
        Self { stream_id, body }
    }

    /// The frame's kind, as written in its header.
    pub fn kind(&self) -> FrameKind {
        self.body.kind()
    }
}

/// The body of a frame: one variant per frame kind, plus an opaque sealed body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// SPEC AGR-1, SEQ-3: a Request_Frame.
    Request(RequestFrame),
    /// SPEC AGR-1, SEQ-3: a Response_Frame.
    Response(ResponseFrame),
    /// SPEC SEQ-4: a data frame carrying one Fragment.
    Data(DataFrame),
    /// A cumulative acknowledgement (RES-2).
    Ack(AckFrame),
    /// SPEC RES-3: the highest sequence received, sent on reconnect.
    Resume(ResumeFrame),
    /// A terminal control-plane message (SPEC §2–3).
    Control(ControlMessage),
    /// An error or a close, with a numeric code.
    Close(CloseFrame),
    /// SPEC SEQ-1: one CAP handshake message (before any other frame).
    Handshake(HandshakeFrame),
    /// SPEC ENC-1, ENC-4: an encrypted body; the kind, algorithm and key
    /// version stay in plaintext.
    Sealed(Sealed),
}

impl Body {
    /// The frame kind this body is sent as.
    pub fn kind(&self) -> FrameKind {
        match self {
            Body::Request(_) => FrameKind::Request,
            Body::Response(_) => FrameKind::Response,
            Body::Data(_) => FrameKind::Data,
            Body::Ack(_) => FrameKind::Ack,
            Body::Resume(_) => FrameKind::Resume,
            Body::Control(_) => FrameKind::Control,
            Body::Close(_) => FrameKind::Close,
            Body::Handshake(_) => FrameKind::Handshake,
            Body::Sealed(s) => s.kind,
        }
    }
}

/// The kind byte of the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum FrameKind {
    /// Request_Frame.
    Request = 1,
    /// Response_Frame.
    Response = 2,
    /// Data frame (one Fragment).
    Data = 3,
    /// Cumulative acknowledgement.
    Ack = 4,
    /// Resume report.
    Resume = 5,
    /// Control-plane message.
    Control = 6,
    /// Error / close.
    Close = 7,
    /// CAP handshake message.
    Handshake = 8,
}

wire_enum_impl!(FrameKind {
    Request = 1 => "request",
    Response = 2 => "response",
    Data = 3 => "data",
    Ack = 4 => "ack",
    Resume = 5 => "resume",
    Control = 6 => "control",
    Close = 7 => "close",
    Handshake = 8 => "handshake",
});

/// SPEC ENC-4: the AEAD algorithm identifier written in plaintext in the header.
/// A plaintext frame writes 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "kebab-case")
)]
#[repr(u8)]
pub enum AeadAlgorithm {
    /// AES-256-GCM.
    #[cfg_attr(feature = "json", serde(rename = "aes-256-gcm"))]
    Aes256Gcm = 1,
    /// ChaCha20-Poly1305.
    #[cfg_attr(feature = "json", serde(rename = "chacha20-poly1305"))]
    ChaCha20Poly1305 = 2,
}

wire_enum_impl!(AeadAlgorithm {
    Aes256Gcm = 1 => "aes-256-gcm",
    ChaCha20Poly1305 = 2 => "chacha20-poly1305",
});

/// SPEC ENC-1, ENC-4: a sealed (encrypted) body.
///
/// The AEAD's associated data is the 16-byte header followed by the 8-byte
/// seal counter; `ciphertext` is the encrypted body followed by the tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    /// The kind of the body once opened.
    pub kind: FrameKind,
    /// The algorithm that sealed it.
    pub aead: AeadAlgorithm,
    /// The version of the key that sealed it.
    pub key_version: u16,
    /// The per-key, per-direction counter the nonce is derived from.
    pub seal_counter: u64,
    /// The encrypted body followed by the [`TAG_LEN`]-byte tag.
    pub ciphertext: Bytes,
}

/// SPEC SEQ-3a/3b: what a Request_Frame asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum RequestType {
    /// The Master asks to collect data from the Slave.
    Collection = 1,
    /// The Slave asks to inject data into the Master.
    Injection = 2,
    /// Either side asks to change an agreement while transmitting.
    Adjustment = 3,
}

wire_enum_impl!(RequestType {
    Collection = 1 => "collection",
    Injection = 2 => "injection",
    Adjustment = 3 => "adjustment",
});

/// SPEC AGR-1: a Request_Frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct RequestFrame {
    /// Chosen by the requester; the response echoes it.
    pub request_id: u64,
    /// What is asked for.
    pub request_type: RequestType,
    /// The agreement being adjusted: present exactly when `request_type` is
    /// `Adjustment`.
    #[cfg_attr(
        feature = "json",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub agreement_id: Option<AgreementId>,
    /// The proposed terms (what flows, at what rate, …), sorted by key.
    #[cfg_attr(feature = "json", serde(default))]
    pub terms: Terms,
}

/// SPEC AGR-1: a Response_Frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct ResponseFrame {
    /// The request this answers.
    pub request_id: u64,
    /// The answer.
    pub decision: Decision,
}

/// SPEC SEQ-3a: accepted | rejected | counter_proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum Decision {
    /// Agreement reached; its id (UUID v4, AGR-3).
    Accepted {
        /// The new agreement's id.
        agreement_id: AgreementId,
    },
    /// Refused, with a reason a person can read.
    Rejected {
        /// Why.
        reason: String,
    },
    /// Not as asked, but these terms would do.
    CounterProposal {
        /// The counter-proposed terms.
        terms: Terms,
    },
}

impl Decision {
    pub(crate) fn tag(&self) -> u8 {
        match self {
            Decision::Accepted { .. } => 1,
            Decision::Rejected { .. } => 2,
            Decision::CounterProposal { .. } => 3,
        }
    }
}

/// SPEC SEQ-4: a data frame carrying one Fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct DataFrame {
    /// The agreement this fragment flows under; `None` inherits the agreement
    /// of the previous data frame on the same stream (SEQ-4, FORMAT.md §5.3).
    #[cfg_attr(
        feature = "json",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub agreement_id: Option<AgreementId>,
    /// The fragment's id within its agreement.
    pub fragment_id: FragmentId,
    /// SPEC RES-1: the sender's monotonically increasing sequence number.
    pub sequence: u64,
    /// SPEC DAG-4: the fragment's relations to earlier fragments.
    #[cfg_attr(feature = "json", serde(default))]
    pub relations: Vec<Relation>,
    /// The fragment's bytes (a slice of the received buffer: no copy).
    #[cfg_attr(
        feature = "json",
        serde(with = "crate::json::hex_bytes", rename = "payload_hex")
    )]
    pub payload: Bytes,
}

/// SPEC DAG-4: one edge from a fragment to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct Relation {
    /// The relation type.
    #[cfg_attr(feature = "json", serde(rename = "type"))]
    pub kind: RelationType,
    /// The fragment related to.
    pub target: FragmentId,
}

/// SPEC DAG-4: the three relation types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum RelationType {
    /// The fragment is derived from the target.
    DerivedFrom = 1,
    /// The fragment annotates the target.
    Annotates = 2,
    /// The fragment supersedes the target.
    Supersedes = 3,
}

wire_enum_impl!(RelationType {
    DerivedFrom = 1 => "derived_from",
    Annotates = 2 => "annotates",
    Supersedes = 3 => "supersedes",
});

/// A cumulative acknowledgement: every fragment up to `cumulative` arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct AckFrame {
    /// The highest sequence number such that it and all below it arrived
    /// (0: none yet; sequences start at 1).
    pub cumulative: u64,
}

/// SPEC RES-3: sent on reconnect to report what arrived before the break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct ResumeFrame {
    /// The DTP session being resumed.
    pub session_id: SessionId,
    /// The highest sequence number received successfully (0: none).
    pub highest_received: u64,
}

/// SPEC SEQ-1: one message of the CAP handshake (FORMAT.md §5.8). The
/// codec carries it opaquely; the CAP machines (`dtp-crypto`) read it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct HandshakeFrame {
    /// The message's number in the handshake, 1 … [`HANDSHAKE_MAX_STAGE`].
    pub stage: u8,
    /// The handshake message, at most [`HANDSHAKE_MAX_LEN`] bytes.
    #[cfg_attr(
        feature = "json",
        serde(with = "crate::json::hex_bytes", rename = "message_hex")
    )]
    pub message: Bytes,
}

/// The highest handshake stage number (CAP has four messages; a few spare
/// for a later version).
pub const HANDSHAKE_MAX_STAGE: u8 = 8;

/// The longest handshake message: a CAP message with the largest
/// credential fits well below it.
pub const HANDSHAKE_MAX_LEN: usize = 65_535;

/// An error report or a close.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct CloseFrame {
    /// The numeric code (4001 DAG_CYCLE_DETECTED, 6001 BUFFER_FULL, the E_* codes, …).
    pub code: ErrorCode,
    /// Text a person can act on (never secrets).
    #[cfg_attr(feature = "json", serde(default))]
    pub reason: String,
}
