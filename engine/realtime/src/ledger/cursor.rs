//! Resume cursors: opaque, header-safe, bound to stream, scope and epoch
//! (SPEC RT-6, RT-8, RT-9).
//!
//! Text form: `c1.<epoch>.<sequence>.<tag>`, e.g.
//! `c1.00000000deadbeef.42.0f1e…` (at most 73 bytes, ASCII only, so it fits a
//! `Last-Event-ID` header and an SSE `id` line). `<epoch>` is the 16-hex
//! [`Epoch`](super::Epoch); `<sequence>` the last sequence the holder applied
//! (canonical decimal, ≥ 1); `<tag>` 32 lowercase hex digits: the first
//! 128 bits of HMAC-SHA256(key, label ‖ stream id ‖ scope ‖ epoch ‖ sequence),
//! each variable field length-prefixed so no two inputs share a message.
//! The key is the deployment's cursor secret: keep it across restarts so a
//! pre-restart cursor is recognised as another epoch's (`EpochChanged`),
//! not as a forgery (`Tampered`).
//!
//! The cursor carries its fields in clear: it is a position, not a secret
//! and not an authorisation proof (SPEC RT-6 re-checks authorisation on
//! every resume); the tag only makes it unforgeable and unmovable between
//! streams and scopes.

use ring::hmac;

use super::epoch::Epoch;

/// Longest cursor text accepted (SPEC RT-6: header-safe and bounded).
pub(crate) const CURSOR_MAX_LEN: usize = 128;

/// Domain-separation label of cursor tags, version 1.
const LABEL: &[u8] = b"dtp-realtime/resume-cursor/v1";
/// Truncated tag length in bytes (128 bits).
const TAG_LEN: usize = 16;
/// Cursor format version prefix.
const PREFIX: &str = "c1";

/// The HMAC key cursors are tagged with, and the tag's state after the
/// fixed part of its message for the ledger's current stream, scope and
/// epoch ([`CursorKey::bind`]). Issuing a cursor then hashes only its
/// sequence: a profile of the built-in streams showed cursor tags at about
/// a twentieth of the control thread, a third of it the fixed prefix.
pub(crate) struct CursorKey {
    key: hmac::Key,
    /// The context after `LABEL ‖ stream ‖ scope ‖ epoch`, and that epoch.
    bound: Option<(hmac::Context, String)>,
}

impl CursorKey {
    /// A key from the deployment's 32-byte cursor secret.
    pub(crate) fn new(secret: &[u8; 32]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
            bound: None,
        }
    }

    /// Prepares issuing for `epoch` on `stream` under `scope` (called when
    /// the ledger is made and when its epoch changes).
    pub(crate) fn bind(&mut self, stream: &str, scope: &str, epoch: &str) {
        self.bound = Some((self.prefix(stream, scope, epoch), epoch.to_owned()));
    }

    /// The cursor text for `sequence` of `epoch` on `stream` under `scope`.
    pub(crate) fn issue(&self, stream: &str, scope: &str, epoch: &str, sequence: u64) -> String {
        let tag = match &self.bound {
            Some((ctx, bound)) if bound == epoch => finish(ctx.clone(), sequence),
            _ => self.tag(stream, scope, epoch, sequence),
        };
        let mut s = String::with_capacity(CURSOR_MAX_LEN);
        s.push_str(PREFIX);
        s.push('.');
        s.push_str(epoch);
        s.push('.');
        // No `format!`: a cursor is issued for every event published.
        let mut digits = [0u8; 20];
        s.push_str(dtp_codec::realtime::decimal(sequence, &mut digits));
        s.push('.');
        for b in tag {
            s.push(hex_digit(b >> 4));
            s.push(hex_digit(b & 0x0f));
        }
        s
    }

    /// Whether `cursor`'s tag is the one this key gives its fields on
    /// `stream` under `scope` (constant time in the tag bytes).
    pub(crate) fn verify(&self, stream: &str, scope: &str, cursor: &ParsedCursor<'_>) -> bool {
        let want = self.tag(stream, scope, cursor.epoch, cursor.sequence);
        // Constant-time comparison: the tag must not leak how many leading
        // bytes an attacker guessed right.
        let diff = want
            .iter()
            .zip(cursor.tag.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }

    fn tag(&self, stream: &str, scope: &str, epoch: &str, sequence: u64) -> [u8; TAG_LEN] {
        finish(self.prefix(stream, scope, epoch), sequence)
    }

    /// The tag's context after its fixed fields.
    fn prefix(&self, stream: &str, scope: &str, epoch: &str) -> hmac::Context {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(LABEL);
        for field in [stream, scope, epoch] {
            // Lengths are bounded by the callers (≤ 64, 256 and 16 bytes);
            // u64 keeps the framing total even if that ever changes.
            ctx.update(&(field.len() as u64).to_be_bytes());
            ctx.update(field.as_bytes());
        }
        ctx
    }
}

/// The truncated tag of a prefix context and `sequence`.
fn finish(mut ctx: hmac::Context, sequence: u64) -> [u8; TAG_LEN] {
    ctx.update(&sequence.to_be_bytes());
    let full = ctx.sign();
    let mut tag = [0u8; TAG_LEN];
    for (t, f) in tag.iter_mut().zip(full.as_ref()) {
        *t = *f;
    }
    tag
}

/// A cursor's fields after the syntax check, before the tag check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParsedCursor<'a> {
    /// The epoch text (well-formed, maybe not current).
    pub(crate) epoch: &'a str,
    /// The last applied sequence (≥ 1).
    pub(crate) sequence: u64,
    /// The presented tag.
    pub(crate) tag: [u8; TAG_LEN],
}

/// Parses cursor text strictly; `None` for anything this crate would not
/// have issued syntactically.
pub(crate) fn parse(s: &str) -> Option<ParsedCursor<'_>> {
    if s.len() > CURSOR_MAX_LEN {
        return None;
    }
    let mut parts = s.split('.');
    let (prefix, epoch, seq, tag) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || prefix != PREFIX || !Epoch::is_well_formed(epoch) {
        return None;
    }
    // Position 0 is the epoch's start (the checkpoint of an empty stream).
    let sequence = parse_canonical_u64(seq)?;
    Some(ParsedCursor {
        epoch,
        sequence,
        tag: parse_tag(tag)?,
    })
}

/// A canonical unsigned decimal: digits only, no leading zero, fits u64.
fn parse_canonical_u64(s: &str) -> Option<u64> {
    let bytes = s.as_bytes();
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes.first() == Some(&b'0') {
        return None;
    }
    s.parse().ok()
}

fn parse_tag(s: &str) -> Option<[u8; TAG_LEN]> {
    let bytes = s.as_bytes();
    if bytes.len() != TAG_LEN * 2 {
        return None;
    }
    let mut tag = [0u8; TAG_LEN];
    for (t, pair) in tag.iter_mut().zip(bytes.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (hex_value(*hi)?, hex_value(*lo)?),
            _ => return None,
        };
        *t = (hi << 4) | lo;
    }
    Some(tag)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

fn hex_digit(v: u8) -> char {
    char::from(
        b"0123456789abcdef"
            .get(usize::from(v & 0x0f))
            .copied()
            .unwrap_or(b'0'),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: &str = "00000000deadbeef";

    fn key() -> CursorKey {
        CursorKey::new(&[7u8; 32])
    }

    #[test]
    fn issued_cursor_parses_and_verifies() {
        let c = key().issue("orders", "tenant-1", EPOCH, 42);
        assert_eq!(c.len(), 2 + 1 + 16 + 1 + 2 + 1 + 32);
        assert!(c.starts_with("c1.00000000deadbeef.42."));
        let p = parse(&c).unwrap();
        assert_eq!((p.epoch, p.sequence), (EPOCH, 42));
        assert!(key().verify("orders", "tenant-1", &p));
        let max = key().issue("orders", "tenant-1", EPOCH, u64::MAX);
        assert!(max.len() <= CURSOR_MAX_LEN && max.is_ascii());
        assert_eq!(parse(&max).unwrap().sequence, u64::MAX);
    }

    #[test]
    fn a_bound_key_issues_what_an_unbound_one_does() {
        let mut bound = key();
        bound.bind("orders", "tenant-1", EPOCH);
        for seq in [0, 1, 9, 10, 42, 1_000_007, u64::MAX] {
            let c = bound.issue("orders", "tenant-1", EPOCH, seq);
            assert_eq!(c, key().issue("orders", "tenant-1", EPOCH, seq));
            assert!(key().verify("orders", "tenant-1", &parse(&c).unwrap()));
        }
        // Another epoch than the bound one is tagged in full, not with the
        // bound prefix.
        let other = "00000000deadbeee";
        let c = bound.issue("orders", "tenant-1", other, 5);
        assert_eq!(c, key().issue("orders", "tenant-1", other, 5));
    }

    #[test]
    fn tag_binds_stream_scope_epoch_sequence_and_key() {
        let c = key().issue("orders", "tenant-1", EPOCH, 42);
        let p = parse(&c).unwrap();
        assert!(!key().verify("orders2", "tenant-1", &p));
        assert!(!key().verify("orders", "tenant-2", &p));
        // Length framing: moving a byte between stream and scope changes the tag.
        assert!(!key().verify("order", "stenant-1", &p));
        assert!(!CursorKey::new(&[8u8; 32]).verify("orders", "tenant-1", &p));
        let moved = c.replacen(".42.", ".43.", 1);
        assert!(!key().verify("orders", "tenant-1", &parse(&moved).unwrap()));
        let other_epoch = c.replacen(EPOCH, "00000000deadbeee", 1);
        assert!(!key().verify("orders", "tenant-1", &parse(&other_epoch).unwrap()));
    }

    #[test]
    fn malformed_cursors_do_not_parse() {
        let good = key().issue("s", "", EPOCH, 5);
        let tag = good.rsplit('.').next().unwrap();
        let bad = [
            String::new(),
            "c1".into(),
            format!("c2.{EPOCH}.5.{tag}"),
            format!("c1.{EPOCH}.05.{tag}"),
            format!("c1.{EPOCH}.00.{tag}"),
            format!("c1.{EPOCH}.+5.{tag}"),
            format!("c1.{EPOCH}.18446744073709551616.{tag}"),
            format!("c1.00000000DEADBEEF.5.{tag}"),
            format!("c1.{EPOCH}.5.{}", tag.to_uppercase()),
            format!("c1.{EPOCH}.5.{}", &tag[1..]),
            format!("c1.{EPOCH}.5.{tag}."),
            format!("c1.{EPOCH}.5.{tag}{}", "0".repeat(100)),
            format!("c1.{EPOCH}.5.{}é", &tag[2..]),
        ];
        for s in bad {
            assert_eq!(parse(&s), None, "{s}");
        }
    }
}
