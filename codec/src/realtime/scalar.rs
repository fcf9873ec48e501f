//! The two scalar formats SPEC RT-3 fixes: canonical unsigned decimal
//! sequences and strict RFC 3339 timestamps.

/// SPEC RT-3: `sequence` (and `nextExpectedSequence`, `lastAppliedSequence`)
/// is a canonical unsigned decimal string: ASCII digits only, no sign, no
/// leading zero except `"0"` itself, at most 20 digits, within `u64`.
/// Returns `None` for anything else (`""`, `"01"`, `"+1"`, `"1.0"`, `"1e3"`,
/// `"18446744073709551616"`).
pub fn parse_canonical_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 20 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

/// SPEC RT-3: `occurredAt` is a strict RFC 3339 timestamp:
/// `YYYY-MM-DDTHH:MM:SS[.F]` then `Z` or `±HH:MM`, with
///
/// - an uppercase `T` and `Z` only (RFC 3339 §5.6 permits lowercase; strict
///   profiles and our encoders do not use it);
/// - month 01–12, a day that exists in that month (leap years by the
///   Gregorian rule), hour 00–23, minute 00–59, second 00–59 — a leap second
///   `:60` is refused: servers smear leap seconds and a browser's
///   `Date.parse` refuses it;
/// - 1 to 9 fraction digits (nanoseconds at most);
/// - an offset hour 00–23 and minute 00–59 (`-00:00` is allowed).
pub fn is_valid_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 {
        return false;
    }
    let (date, rest) = b.split_at(10);
    let Some(year) = num(date, 0, 4) else {
        return false;
    };
    let (Some(month), Some(day)) = (num(date, 5, 2), num(date, 8, 2)) else {
        return false;
    };
    if date[4] != b'-' || date[7] != b'-' || !(1..=12).contains(&month) {
        return false;
    }
    if day < 1 || day > days_in_month(year, month) {
        return false;
    }
    // rest: THH:MM:SS …
    if rest.len() < 10 || rest[0] != b'T' || rest[3] != b':' || rest[6] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(sec)) = (num(rest, 1, 2), num(rest, 4, 2), num(rest, 7, 2)) else {
        return false;
    };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    let mut zone = &rest[9..];
    if let Some((&b'.', frac)) = zone.split_first() {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) {
            return false;
        }
        zone = &frac[digits..];
    }
    match zone {
        [b'Z'] => true,
        [b'+' | b'-', _, _, b':', _, _] => {
            matches!((num(zone, 1, 2), num(zone, 4, 2)), (Some(oh), Some(om)) if oh <= 23 && om <= 59)
        }
        _ => false,
    }
}

/// The decimal number in `b[at..at + len]`, all ASCII digits.
fn num(b: &[u8], at: usize, len: usize) -> Option<u32> {
    let digits = b.get(at..at + len)?;
    digits.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
