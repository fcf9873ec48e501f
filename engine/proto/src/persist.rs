//! SPEC SES-2, SES-3: the byte primitives every machine of this crate uses
//! to write what of it outlives a connection, and to read it back from
//! untrusted bytes (a file a gateway stored, another node's record).
//!
//! **Owns**: [`Writer`] (big-endian integers, length-prefixed bytes), the
//! bounded [`Reader`] and [`PersistError`]. **Never touches**: files, the
//! clock or the layout of a whole session (that is the driver's envelope,
//! e.g. `dtp_endpoint::SuspendedSession::to_bytes`); each machine writes
//! its own part next to its type (`agreement/persist.rs`,
//! `resume/persist.rs`, `dag/persist.rs`, and the engine FSM here).
//!
//! # Reading untrusted bytes
//!
//! Every count and length is checked against a ceiling the caller passes
//! in (the restoring endpoint's configuration) **and** against the bytes
//! left before anything is allocated: [`Reader::count`] refuses a count
//! whose items could not fit in what remains (each item's smallest
//! encoding is given), so a hostile count never reserves memory the input
//! does not pay for. Nothing here panics; every failure is a
//! [`PersistError`] naming the field and the byte offset.
//!
//! # Encoding
//!
//! Integers are big-endian and fixed-width; counts and lengths are `u32`
//! (every ceiling of the crate is far below 2^32: a longer value is written
//! as `u32::MAX`, which no reader accepts); a UUID is its 16 bytes; a flag
//! is one byte, 0 or 1 (any other value is refused); a string is a length
//! and UTF-8 bytes.

use crate::fsm::{EngineFsm, EngineState};

#[cfg(test)]
mod tests;

/// SPEC SES-3: why persisted bytes could not be read back. Every variant
/// names what was being read; none leaves a half-built value behind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    /// The bytes end before the field does.
    #[error("truncated: {what} at byte {offset} needs {needed} more bytes")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Where it starts.
        offset: usize,
        /// How many bytes it needs beyond the end.
        needed: usize,
    },
    /// The bytes do not start with the expected magic.
    #[error("not a persisted DTP record: bad magic {found:02x?}")]
    BadMagic {
        /// The first bytes found.
        found: [u8; 4],
    },
    /// A format version this build does not read.
    #[error("format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// The version found.
        found: u16,
        /// The version this build reads and writes.
        supported: u16,
    },
    /// A count or length is over the restoring side's ceiling.
    #[error("{what}: {found} exceeds the ceiling {max}")]
    OverCeiling {
        /// The count or length.
        what: &'static str,
        /// Its value.
        found: u64,
        /// The ceiling.
        max: u64,
    },
    /// A value outside its domain (an unknown tag, a flag other than 0 or
    /// 1, a string that is not UTF-8).
    #[error("invalid value for {what} at byte {offset}")]
    InvalidValue {
        /// The field.
        what: &'static str,
        /// Where it starts.
        offset: usize,
    },
    /// Fields that are each valid but contradict one another (a broken
    /// invariant of the machine being restored).
    #[error("inconsistent record: {0}")]
    Inconsistent(&'static str),
    /// The record's checksum does not match its bytes.
    #[error("checksum mismatch: the record was corrupted")]
    ChecksumMismatch,
    /// Bytes are left after the record.
    #[error("{len} unexpected bytes after the record at byte {offset}")]
    TrailingBytes {
        /// Where the record ended.
        offset: usize,
        /// How many bytes follow.
        len: usize,
    },
}

/// SPEC SES-2: an append-only buffer of persisted fields (see the module
/// docs for the encoding).
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Appends raw bytes (a magic, a fixed-size field).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a flag: 1 or 0.
    pub fn flag(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// Appends a big-endian `u16`.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a count or length as `u32` (`u32::MAX` when it does not
    /// fit, which every reader refuses).
    pub fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.count(b.len());
        self.raw(b);
    }

    /// Appends a length-prefixed UTF-8 string.
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// Appends a UUID's 16 bytes.
    pub fn uuid(&mut self, id: uuid::Uuid) {
        self.raw(id.as_bytes());
    }
}

/// SPEC SES-3: a cursor over untrusted persisted bytes that checks every
/// length before it reads and every count before anything is allocated.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// The offset of the next byte to read.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Fails with [`PersistError::TrailingBytes`] unless every byte was read.
    pub fn finish(&self) -> Result<(), PersistError> {
        match self.remaining() {
            0 => Ok(()),
            len => Err(PersistError::TrailingBytes {
                offset: self.pos,
                len,
            }),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], PersistError> {
        let left = self.remaining();
        if n > left {
            return Err(PersistError::Truncated {
                what,
                offset: self.pos,
                needed: n - left,
            });
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], PersistError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, PersistError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A flag: 0 or 1, anything else is [`PersistError::InvalidValue`].
    pub fn flag(&mut self, what: &'static str) -> Result<bool, PersistError> {
        let offset = self.pos;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(PersistError::InvalidValue { what, offset }),
        }
    }

    /// A big-endian `u16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, PersistError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    /// A big-endian `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, PersistError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    /// A big-endian `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, PersistError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// A UUID.
    pub fn uuid(&mut self, what: &'static str) -> Result<uuid::Uuid, PersistError> {
        Ok(uuid::Uuid::from_bytes(self.array(what)?))
    }

    /// A count of items, at most `max`, each at least `min_item_len` bytes
    /// long: a count whose items cannot fit in the bytes left is
    /// [`PersistError::Truncated`] before anything is allocated for them.
    pub fn count(
        &mut self,
        what: &'static str,
        max: usize,
        min_item_len: usize,
    ) -> Result<usize, PersistError> {
        let offset = self.pos;
        let found = self.u32(what)?;
        let n = usize::try_from(found).unwrap_or(usize::MAX);
        if n > max {
            return Err(PersistError::OverCeiling {
                what,
                found: found.into(),
                max: u64::try_from(max).unwrap_or(u64::MAX),
            });
        }
        let needed = n.saturating_mul(min_item_len);
        if needed > self.remaining() {
            return Err(PersistError::Truncated {
                what,
                offset,
                needed: needed - self.remaining(),
            });
        }
        Ok(n)
    }

    /// A length-prefixed byte string of at most `max` bytes.
    pub fn bytes(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], PersistError> {
        let n = self.count(what, max, 1)?;
        self.take(n, what)
    }

    /// A length-prefixed UTF-8 string of at most `max` bytes.
    pub fn string(&mut self, what: &'static str, max: usize) -> Result<String, PersistError> {
        let offset = self.pos;
        let bytes = self.bytes(what, max)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| PersistError::InvalidValue { what, offset })
    }
}

/// The state byte of a persisted engine machine.
const SUSPENDED: u8 = 6;

impl EngineFsm {
    /// SPEC SES-2, FSM-1: writes the machine's state (one byte, the state's
    /// row in [`EngineState::ALL`] + 1).
    pub fn persist(&self, w: &mut Writer) {
        let index = EngineState::ALL
            .iter()
            .position(|s| *s == self.state())
            .unwrap_or(0);
        // At most 7 states: the index fits a byte.
        w.u8(u8::try_from(index + 1).unwrap_or(0));
    }

    /// SPEC SES-3, FSM-1: reads a machine written by
    /// [`EngineFsm::persist`]. Only a Suspended machine is ever persisted
    /// (SEQ-5: Transmitting → Suspended, persist), so any other state is
    /// [`PersistError::Inconsistent`]: restoring never skips the table.
    pub fn restore_persisted(r: &mut Reader<'_>) -> Result<Self, PersistError> {
        let offset = r.offset();
        match r.u8("engine state")? {
            SUSPENDED => Ok(EngineFsm::persisted_suspended()),
            1..=7 => Err(PersistError::Inconsistent(
                "a persisted session's engine state must be Suspended",
            )),
            _ => Err(PersistError::InvalidValue {
                what: "engine state",
                offset,
            }),
        }
    }
}
