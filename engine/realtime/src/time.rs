//! Dates as unix time: RFC 3339 timestamps (an envelope's `occurredAt`,
//! SPEC RT-3; a Web Push hint's `issuedAt`/`expiresAt`, RT-12; people's
//! reading of credential times) and an HTTP `Retry-After` header (RFC 9110
//! §10.2.3). Pure arithmetic: no clock is read here.

/// The latest instant a hint timestamp may carry: 9999-12-31T23:59:59.999Z.
pub const MAX_TIMESTAMP_MS: u64 = 253_402_300_799_999;

/// The hint timestamp profile (a choice the seed leaves open, see the module
/// doc of [`super`]): exactly `YYYY-MM-DDTHH:MM:SS.sssZ` — UTC, three
/// fraction digits, years 1970–9999 — which is what JavaScript's
/// `Date.prototype.toISOString()` writes, so one instant has one spelling.
/// Returns unix milliseconds.
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let b: &[u8; 24] = s.as_bytes().try_into().ok()?;
    let sep = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if sep.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let (hour, minute, second) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    let millis = digits(&b[20..23])?;
    if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(secs * 1_000 + millis)
}

/// Writes unix milliseconds in the hint timestamp profile
/// ([`parse_timestamp`]); `None` beyond [`MAX_TIMESTAMP_MS`].
pub fn format_timestamp(ms: u64) -> Option<String> {
    if ms > MAX_TIMESTAMP_MS {
        return None;
    }
    let (secs, millis) = (ms / 1_000, ms % 1_000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    ))
}

/// Unix seconds as RFC 3339 UTC without a fraction
/// (`2026-12-01T00:00:00Z`); `None` beyond the year 9999.
pub fn format_rfc3339(secs: u64) -> Option<String> {
    let mut s = format_timestamp(secs.checked_mul(1_000)?)?;
    // `….000Z` → `…Z`
    s.replace_range(s.len() - 5..s.len() - 1, "");
    Some(s)
}

/// `Retry-After` (RFC 9110 §10.2.3) as seconds to wait from `now_secs`:
/// `delay-seconds` (1*DIGIT), or an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37
/// GMT`; a date in the past means 0). The obsolete RFC 850 and asctime forms
/// and anything else give `None` (treated as absent).
pub fn parse_retry_after(value: &[u8], now_secs: u64) -> Option<u64> {
    let value = value.trim_ascii();
    if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
        // Saturate rather than refuse a huge delay: it will exceed any
        // deadline anyway.
        return Some(value.iter().fold(0u64, |n, &c| {
            n.saturating_mul(10).saturating_add(u64::from(c - b'0'))
        }));
    }
    let at = parse_imf_fixdate(value)?;
    Some(at.saturating_sub(now_secs))
}

/// `day-name "," SP DD SP mon SP YYYY SP HH:MM:SS SP "GMT"` → unix seconds.
fn parse_imf_fixdate(v: &[u8]) -> Option<u64> {
    let b: &[u8; 29] = v.try_into().ok()?;
    const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let weekday = DAYS.iter().position(|d| *d == &b[0..3])?;
    let sep = [
        (3, b','),
        (4, b' '),
        (7, b' '),
        (11, b' '),
        (16, b' '),
        (19, b':'),
        (22, b':'),
        (25, b' '),
    ];
    if sep.iter().any(|&(i, c)| b[i] != c) || &b[26..29] != b"GMT" {
        return None;
    }
    let day = digits(&b[5..7])?;
    let month = MONTHS.iter().position(|m| *m == &b[8..11])? as u64 + 1;
    let year = digits(&b[12..16])?;
    let (hour, minute, second) = (
        digits(&b[17..19])?,
        digits(&b[20..22])?,
        digits(&b[23..25])?,
    );
    if year < 1970 || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // 1970-01-01 was a Thursday (index 3); a wrong day name is a malformed date.
    if (days + 3) % 7 != weekday as u64 {
        return None;
    }
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second.min(59))
}

fn digits(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0'))
    })
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date with `year ≥ 1970`
/// (H. Hinnant's `days_from_civil`, restricted to non-negative results).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rfc3339_without_a_fraction() {
        assert_eq!(format_rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            format_rfc3339(1_709_208_000).as_deref(),
            Some("2024-02-29T12:00:00Z")
        );
        assert_eq!(
            format_rfc3339(253_402_300_799).as_deref(),
            Some("9999-12-31T23:59:59Z")
        );
        assert_eq!(format_rfc3339(253_402_300_800), None);
        assert_eq!(format_rfc3339(u64::MAX), None);
    }

    #[test]
    fn timestamps_known_instants() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_timestamp("2024-02-29T12:34:56.789Z"),
            Some(1_709_210_096_789)
        );
        assert_eq!(
            format_timestamp(1_709_210_096_789).as_deref(),
            Some("2024-02-29T12:34:56.789Z")
        );
        assert_eq!(
            format_timestamp(MAX_TIMESTAMP_MS).as_deref(),
            Some("9999-12-31T23:59:59.999Z")
        );
        assert_eq!(format_timestamp(MAX_TIMESTAMP_MS + 1), None);
    }

    #[test]
    fn timestamps_outside_the_profile_are_refused() {
        for bad in [
            "2024-02-29T12:34:56Z",
            "2024-02-29T12:34:56.78Z",
            "2024-02-29T12:34:56.789+00:00",
            "2024-02-29t12:34:56.789Z",
            "2023-02-29T12:34:56.789Z",
            "2024-13-01T00:00:00.000Z",
            "2024-01-01T24:00:00.000Z",
            "2024-01-01T00:60:00.000Z",
            "2024-01-01T00:00:60.000Z",
            "1969-12-31T23:59:59.999Z",
            "2024-01-01T00:00:00.00aZ",
            "+024-01-01T00:00:00.000Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after(b"120", now), Some(120));
        assert_eq!(parse_retry_after(b" 0 ", now), Some(0));
        assert_eq!(
            parse_retry_after(b"99999999999999999999999", now),
            Some(u64::MAX)
        );
        assert_eq!(
            parse_retry_after(b"Sun, 06 Nov 1994 08:51:37 GMT", now),
            Some(120)
        );
        assert_eq!(
            parse_retry_after(b"Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(0)
        );
        for bad in [
            &b""[..],
            b"-1",
            b"1.5",
            b"Mon, 06 Nov 1994 08:49:37 GMT",
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 1994",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now), None);
        }
    }

    proptest! {
        #[test]
        fn timestamp_round_trip(ms in 0..=MAX_TIMESTAMP_MS) {
            let text = format_timestamp(ms);
            prop_assert!(text.is_some());
            let text = text.unwrap_or_default();
            prop_assert_eq!(parse_timestamp(&text), Some(ms));
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}", bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse_timestamp(&s);
            let _ = parse_retry_after(&bytes, 0);
            let _ = parse_retry_after(s.as_bytes(), u64::MAX);
        }
    }
}
