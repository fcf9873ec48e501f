//! The snapshot checkpoint (SPEC RT-6, seed §4.4): issued with a snapshot at
//! the same commit point, it tells the client where the event stream resumes.

use bytes::BufMut;

use super::value::{Fields, check_id, check_token, parse_object};
use super::{JsonLimits, RecoveryMode, Refusal, jsonw};

const KEYS: [&str; 5] = [
    "streamEpoch",
    "lastAppliedSequence",
    "snapshotRevision",
    "recoveryMode",
    "resumeCursor",
];

/// SPEC RT-6: `{"streamEpoch","lastAppliedSequence","snapshotRevision",
/// "recoveryMode","resumeCursor"}`, in that order.
///
/// As in seed §4.4, `recoveryMode` is `CURSOR` (with a non-empty
/// `resumeCursor`) or `SNAPSHOT_ONLY` (with `resumeCursor: null`):
/// `SESSION_REBUILD` streams have no snapshot, so a checkpoint naming it is
/// [`Refusal::UnknownEnumValue`]`("recoveryMode")`. `streamEpoch` is an
/// identifier, `lastAppliedSequence` a canonical decimal string,
/// `snapshotRevision` and `resumeCursor` opaque tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotCheckpoint {
    /// The epoch the snapshot belongs to.
    pub stream_epoch: String,
    /// The last sequence the snapshot includes; events resume at the next.
    pub last_applied_sequence: u64,
    /// The snapshot's opaque revision.
    pub snapshot_revision: String,
    /// `CURSOR` or `SNAPSHOT_ONLY`.
    pub recovery_mode: RecoveryMode,
    /// `Some` non-empty cursor exactly for `CURSOR`.
    pub resume_cursor: Option<String>,
}

impl SnapshotCheckpoint {
    /// The JSON guard (SPEC RT-4), then the exact key set and each member.
    pub fn decode(bytes: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let map = parse_object(bytes, limits)?;
        let f = Fields::exact(&map, &KEYS)?;
        let checkpoint = Self {
            stream_epoch: f.id("streamEpoch")?,
            last_applied_sequence: f.sequence("lastAppliedSequence")?,
            snapshot_revision: f.token("snapshotRevision")?,
            recovery_mode: f.closed("recoveryMode")?,
            resume_cursor: f.opt_str("resumeCursor")?.map(str::to_owned),
        };
        checkpoint.validate()?;
        Ok(checkpoint)
    }

    /// Checks every member against the rules [`SnapshotCheckpoint::decode`]
    /// applies.
    pub fn validate(&self) -> Result<(), Refusal> {
        check_id("streamEpoch", &self.stream_epoch)?;
        check_token("snapshotRevision", &self.snapshot_revision)?;
        match (self.recovery_mode, self.resume_cursor.as_deref()) {
            (RecoveryMode::SessionRebuild, _) => Err(Refusal::UnknownEnumValue("recoveryMode")),
            (RecoveryMode::Cursor, Some(c)) if !c.is_empty() => check_token("resumeCursor", c),
            (RecoveryMode::SnapshotOnly, None) => Ok(()),
            _ => Err(Refusal::RecoveryCursorMismatch),
        }
    }

    /// Compact JSON in the fixed key order, after
    /// [`SnapshotCheckpoint::validate`].
    pub fn to_json_bytes(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(160);
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    /// [`SnapshotCheckpoint::to_json_bytes`] appended to `buf` (nothing is
    /// written on a refusal).
    pub fn encode_into<B: BufMut>(&self, buf: &mut B) -> Result<(), Refusal> {
        self.validate()?;
        buf.put_u8(b'{');
        jsonw::key(buf, "streamEpoch");
        jsonw::str(buf, &self.stream_epoch);
        jsonw::next_key(buf, "lastAppliedSequence");
        jsonw::decimal_str(buf, self.last_applied_sequence);
        jsonw::next_key(buf, "snapshotRevision");
        jsonw::str(buf, &self.snapshot_revision);
        jsonw::next_key(buf, "recoveryMode");
        jsonw::str(buf, self.recovery_mode.as_str());
        jsonw::next_key(buf, "resumeCursor");
        jsonw::opt_str(buf, self.resume_cursor.as_deref());
        buf.put_u8(b'}');
        Ok(())
    }
}
