//! Bounds-checked primitive readers over a frame's bytes.
//!
//! Every read checks its length against the end of the frame before touching
//! a byte, so no input can make the decoder index out of bounds.

use bytes::Bytes;
use uuid::Uuid;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::frame::Terms;
use crate::limits::Limits;

/// A cursor over `buf[pos..end]`; offsets in errors are indices into `buf`.
pub(crate) struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
}

pub(crate) type Result<T> = std::result::Result<T, DecodeError>;

pub(crate) fn malformed(kind: DecodeErrorKind, field: &'static str, offset: usize) -> DecodeError {
    DecodeError::Malformed {
        kind,
        field,
        offset,
    }
}

impl<'a> Reader<'a> {
    /// A reader over `buf[start..end]`. The caller guarantees `start <= end <= buf.len()`.
    pub(crate) fn new(buf: &'a Bytes, start: usize, end: usize) -> Self {
        debug_assert!(start <= end && end <= buf.len());
        Self {
            buf,
            pos: start,
            end,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(malformed(DecodeErrorKind::Truncated, field, self.pos));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn uuid(&mut self, field: &'static str) -> Result<Uuid> {
        Ok(Uuid::from_bytes(self.array(field)?))
    }

    /// An enum byte mapped through `from`, refused with the byte's offset.
    pub(crate) fn enum_u8<T>(
        &mut self,
        field: &'static str,
        from: fn(u8) -> Option<T>,
    ) -> Result<T> {
        let at = self.pos;
        let b = self.u8(field)?;
        from(b).ok_or_else(|| malformed(DecodeErrorKind::InvalidValue(b.into()), field, at))
    }

    /// `n` bytes as a slice of the input: no copy.
    pub(crate) fn bytes(&mut self, n: usize, field: &'static str) -> Result<Bytes> {
        let start = self.pos;
        self.take(n, field)?;
        Ok(self.buf.slice(start..self.pos))
    }

    /// Everything left, as a slice of the input.
    pub(crate) fn rest(&mut self) -> Bytes {
        let out = self.buf.slice(self.pos..self.end);
        self.pos = self.end;
        out
    }

    /// A count prefix that must not exceed `max`.
    pub(crate) fn count_u16(&mut self, field: &'static str, max: u16) -> Result<usize> {
        let at = self.pos;
        let n = self.u16(field)?;
        if n > max {
            let kind = DecodeErrorKind::LimitExceeded {
                found: n.into(),
                max: max.into(),
            };
            return Err(malformed(kind, field, at));
        }
        Ok(n.into())
    }

    /// u16 length + bytes, at most `max` long.
    pub(crate) fn blob(&mut self, field: &'static str, max: u16) -> Result<Bytes> {
        let n = self.count_u16(field, max)?;
        self.bytes(n, field)
    }

    /// u16 length + UTF-8.
    pub(crate) fn string(&mut self, field: &'static str, limits: &Limits) -> Result<String> {
        let n = self.count_u16(field, limits.max_string_len)?;
        let at = self.pos;
        let raw = self.take(n, field)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(malformed(
                DecodeErrorKind::InvalidUtf8,
                field,
                at + e.valid_up_to(),
            )),
        }
    }

    /// u8 presence (0 or 1) + UTF-8 string.
    pub(crate) fn opt_string(
        &mut self,
        field: &'static str,
        limits: &Limits,
    ) -> Result<Option<String>> {
        match self.presence(field)? {
            true => Ok(Some(self.string(field, limits)?)),
            false => Ok(None),
        }
    }

    /// A presence byte: 0 absent, 1 present, anything else refused.
    pub(crate) fn presence(&mut self, field: &'static str) -> Result<bool> {
        let at = self.pos;
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(malformed(
                DecodeErrorKind::InvalidValue(b.into()),
                field,
                at,
            )),
        }
    }

    /// u16 count + (key, value) strings with keys strictly ascending.
    pub(crate) fn map(&mut self, field: &'static str, limits: &Limits) -> Result<Terms> {
        let n = self.count_u16(field, limits.max_map_entries)?;
        let mut out = Terms::new();
        for _ in 0..n {
            let at = self.pos;
            let key = self.string(field, limits)?;
            let value = self.string(field, limits)?;
            if out.last_key_value().is_some_and(|(last, _)| *last >= key) {
                return Err(malformed(DecodeErrorKind::NotCanonical, field, at));
            }
            out.insert(key, value);
        }
        Ok(out)
    }

    /// Refuses leftover bytes after a fixed-layout body.
    pub(crate) fn finish(&self, field: &'static str) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(malformed(
                DecodeErrorKind::TrailingBytes(n),
                field,
                self.pos,
            )),
        }
    }
}
