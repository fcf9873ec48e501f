//! Text forms for files: PEM-style armour and the revocation list.
//!
//! Armour is RFC 7468 "strict" text: a `-----BEGIN <LABEL>-----` line,
//! standard base64 (RFC 4648 §4, with padding) in lines of 64 characters,
//! and a `-----END <LABEL>-----` line. The reader is a little more lenient
//! (any line length, `\r\n` line ends, surrounding blank lines, text before
//! the BEGIN line such as comments) but strict about the label and the
//! base64 itself. Labels used by this crate:
//!
//! | label | content |
//! |---|---|
//! | `DTP CREDENTIAL` | a credential in its binary form ([`super::wire`]) |
//! | `PRIVATE KEY` | an issuer's Ed25519 private key, PKCS#8 v2 (RFC 5958 / RFC 8410; OpenSSL reads it) |
//! | `DTP ISSUER PUBLIC KEY` | an issuer's raw 32-byte Ed25519 public key |
//! | `DTP NOISE PRIVATE KEY` | a Noise static X25519 private key, raw 32 bytes ([`crate::cap::NoiseKeypair`]) |
//!
//! The revocation list file is one descriptor id (hyphenated UUID) per line;
//! blank lines and lines starting with `#` are ignored. It is written sorted,
//! one id per line, after a one-line comment header.
//!
//! This module never reads or writes files: strings in, strings out.

use std::collections::BTreeSet;

use uuid::Uuid;

/// Longest armoured text accepted (a credential is at most ~17 KiB).
pub const MAX_ARMOR_LEN: usize = 64 * 1024;

/// Why text is not what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// The text is longer than allowed.
    #[error("text is {len} bytes, more than the {max}-byte maximum")]
    TooLong {
        /// Its length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// No `-----BEGIN <label>-----` line was found.
    #[error("no `-----BEGIN {0}-----` line")]
    MissingBegin(&'static str),
    /// No matching END line.
    #[error("no `-----END {0}-----` line")]
    MissingEnd(&'static str),
    /// Bad base64 in the given line (1-based, counted in the whole text).
    #[error("invalid base64 on line {line}")]
    BadBase64 {
        /// 1-based line number.
        line: usize,
    },
    /// A revocation list line is not a UUID.
    #[error("line {line} is not a descriptor id (UUID)")]
    BadRevocationLine {
        /// 1-based line number.
        line: usize,
    },
    /// The revocation list has more entries than allowed.
    #[error("revocation list has more than {max} entries")]
    TooManyRevocations {
        /// The ceiling.
        max: usize,
    },
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub(crate) fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn sextet(c: u8) -> Option<u32> {
    Some(u32::from(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    }))
}

/// Strict standard base64: length a multiple of 4, padding only at the end,
/// unused bits zero (so every byte string has exactly one text).
pub(crate) fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let quads = text.len() / 4;
    for (qi, q) in text.chunks(4).enumerate() {
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && qi + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = n.to_be_bytes();
        let keep = 3 - pad;
        // Unused low bits must be zero (canonical form).
        if bytes[1 + keep..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[1..1 + keep]);
    }
    Some(out)
}

/// Wraps bytes in PEM-style armour with the given label.
pub fn armor(label: &str, data: &[u8]) -> String {
    let b64 = base64_encode(data);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        // base64 output is ASCII.
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Reads the first block with the given label out of armoured text.
pub fn dearmor(label: &'static str, text: &str) -> Result<Vec<u8>, TextError> {
    if text.len() > MAX_ARMOR_LEN {
        return Err(TextError::TooLong {
            len: text.len(),
            max: MAX_ARMOR_LEN,
        });
    }
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').trim()));
    lines
        .by_ref()
        .find(|(_, l)| *l == begin)
        .ok_or(TextError::MissingBegin(label))?;
    let mut b64 = Vec::new();
    let mut first_line = 0;
    for (n, line) in lines {
        if line == end {
            return base64_decode(&b64).ok_or(TextError::BadBase64 { line: first_line });
        }
        if first_line == 0 {
            first_line = n;
        }
        if !line.bytes().all(|c| sextet(c).is_some() || c == b'=') {
            return Err(TextError::BadBase64 { line: n });
        }
        b64.extend_from_slice(line.as_bytes());
    }
    Err(TextError::MissingEnd(label))
}

/// A set of revoked descriptor ids, as kept in a revocation list file.
///
/// Bounded: at most `max` entries (a typed error past it), so a file a peer
/// or an operator mistake grows cannot exhaust memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevocationList {
    ids: BTreeSet<Uuid>,
    max: usize,
}

impl RevocationList {
    /// Default ceiling on entries.
    pub const DEFAULT_MAX: usize = 100_000;

    /// An empty list holding at most `max` ids.
    pub fn new(max: usize) -> Self {
        RevocationList {
            ids: BTreeSet::new(),
            max,
        }
    }

    /// Parses a revocation list file (see the module docs).
    pub fn from_text(text: &str, max: usize) -> Result<Self, TextError> {
        let mut list = RevocationList::new(max);
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let id =
                Uuid::try_parse(line).map_err(|_| TextError::BadRevocationLine { line: i + 1 })?;
            list.add(id)?;
        }
        Ok(list)
    }

    /// Writes the file form: a comment line, then the ids sorted, one a line.
    pub fn to_text(&self) -> String {
        let mut out = String::from("# DTP revoked credential descriptor ids, one a line\n");
        for id in &self.ids {
            out.push_str(&id.hyphenated().to_string());
            out.push('\n');
        }
        out
    }

    /// Adds an id; `Ok(false)` if it was already there.
    pub fn add(&mut self, id: Uuid) -> Result<bool, TextError> {
        if self.ids.contains(&id) {
            return Ok(false);
        }
        if self.ids.len() >= self.max {
            return Err(TextError::TooManyRevocations { max: self.max });
        }
        Ok(self.ids.insert(id))
    }

    /// Removes an id; `true` if it was there.
    pub fn remove(&mut self, id: &Uuid) -> bool {
        self.ids.remove(id)
    }

    /// Whether the id is revoked.
    pub fn contains(&self, id: &Uuid) -> bool {
        self.ids.contains(id)
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &Uuid> {
        self.ids.iter()
    }

    /// The ceiling on entries.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// SPEC (CAP, `dtp cred revoke`): adds a descriptor id to a revocation list
/// file's text and returns the new text (sorted, deduplicated). An empty
/// input starts a new list.
pub fn revocation_list_add(text: &str, id: Uuid, max: usize) -> Result<String, TextError> {
    let mut list = RevocationList::from_text(text, max)?;
    list.add(id)?;
    Ok(list.to_text())
}
