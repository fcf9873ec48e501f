//! The small parsers behind `dtp cred`'s arguments: times (Unix seconds,
//! RFC 3339, `now`), durations (`30d`, `12h`, `1d12h`), grants
//! (`RESOURCE=MODES`) and Noise public keys in hex.
//!
//! Pure functions of their input (and of `now`, passed in): no files, no
//! clock. Errors are strings worded for the user; the caller adds the error
//! code.

use dtp_codec::AccessMode;
use dtp_crypto::cred::{AccessModes, Grant};

/// Seconds in a day.
const DAY: u64 = 86_400;

/// A point in time as the user typed it, in Unix seconds.
///
/// Accepted forms:
/// - `now` — the time passed in;
/// - Unix seconds — `1798761600`;
/// - an RFC 3339 date-time — `2026-12-01T00:00:00Z`, `2026-12-01T09:30:00+02:00`
///   (`t` or a space may replace `T`, `z` may replace `Z`; a fraction of a
///   second is allowed and dropped: credentials count whole seconds);
/// - a date alone — `2026-12-01`, meaning its midnight UTC.
///
/// Times before 1970 are refused.
pub(crate) fn parse_time(text: &str, now: u64) -> Result<u64, String> {
    let t = text.trim();
    if t == "now" {
        return Ok(now);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map_err(|_| format!("`{t}` is too large for Unix seconds"));
    }
    parse_rfc3339(t).ok_or_else(|| {
        format!(
            "`{t}` is not a time: use Unix seconds, `now`, a date `2026-12-01` or RFC 3339 `2026-12-01T00:00:00Z`"
        )
    })?
}

/// An RFC 3339 date-time or a date; `None` when the shape is wrong, an
/// error when the shape is right but a value is not (month 13, 1969, …).
fn parse_rfc3339(t: &str) -> Option<Result<u64, String>> {
    let b = t.as_bytes();
    let year = digits(b, 0, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let (secs_of_day, offset) = if b.len() == 10 {
        (0, 0)
    } else {
        if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.len() < 19 {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (h, m, s) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
        let mut rest = &b[19..];
        if rest.first() == Some(&b'.') {
            let frac = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if frac == 0 {
                return None;
            }
            rest = &rest[1 + frac..];
        }
        let offset = match rest {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let oh = digits(&[*h1, *h2], 0, 2)?;
                let om = digits(&[*m1, *m2], 0, 2)?;
                if oh > 23 || om > 59 {
                    return Some(Err(format!("`{t}`: time zone offset out of range")));
                }
                let off = (oh * 60 + om) as i64 * 60;
                if *sign == b'-' { -off } else { off }
            }
            [] => {
                return Some(Err(format!(
                    "`{t}` has no time zone: add `Z` for UTC or an offset such as `+02:00`"
                )));
            }
            _ => return None,
        };
        // RFC 3339 allows a leap second (:60); Unix time folds it into the
        // next second, as plain arithmetic does here.
        if h > 23 || m > 59 || s > 60 {
            return Some(Err(format!("`{t}`: hour, minute or second out of range")));
        }
        (h * 3600 + m * 60 + s, offset)
    };
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Some(Err(format!("`{t}`: no such date")));
    }
    let days = days_from_civil(year, month, day);
    let secs = days * DAY as i64 + secs_of_day as i64 - offset;
    Some(u64::try_from(secs).map_err(|_| format!("`{t}` is before 1970")))
}

/// `n` ASCII digits of `b` from `at`, as a number.
fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let s = b.get(at..at + n)?;
    s.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(crate) use dtp_gateway::realtime::format_rfc3339;

/// Unix seconds with their RFC 3339 form when there is one:
/// `1798761600 (2027-01-01T00:00:00Z)`.
pub(crate) fn show_time(secs: u64) -> String {
    match format_rfc3339(secs) {
        Some(s) => format!("{secs} ({s})"),
        None => secs.to_string(),
    }
}

/// A duration in seconds: one or more `<number><unit>` parts, units `s`,
/// `m`, `h`, `d` (86 400 s), `w` (7 d); a bare number is seconds. `30d`,
/// `12h`, `1d12h`, `3600`.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "`{t}` is not a duration: use a number with a unit s, m, h, d or w, such as `30d` or `1d12h`"
        )
    };
    let too_long = || format!("`{t}` is too long a duration");
    if t.is_empty() {
        return Err(bad());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().map_err(|_| too_long());
    }
    let mut total: u64 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err(bad());
        }
        let value: u64 = rest[..n].parse().map_err(|_| too_long())?;
        let unit = match rest.as_bytes().get(n) {
            Some(b's') => 1,
            Some(b'm') => 60,
            Some(b'h') => 3600,
            Some(b'd') => DAY,
            Some(b'w') => 7 * DAY,
            _ => return Err(bad()),
        };
        total = value
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_long)?;
        rest = &rest[n + 1..];
    }
    Ok(total)
}

/// One `--grant RESOURCE=MODES`: the resource id is everything before the
/// last `=`, the modes a comma-separated list of `read`, `write`, `execute`,
/// `configure` (at least one).
pub(crate) fn parse_grant(text: &str) -> Result<Grant, String> {
    let (resource, modes) = text.rsplit_once('=').ok_or_else(|| {
        format!("`{text}` is not RESOURCE=MODES (for example `camera-1=read,write`)")
    })?;
    if resource.is_empty() {
        return Err(format!("`{text}` names no resource before `=`"));
    }
    let mut set = AccessModes::empty();
    for name in modes.split(',').map(str::trim) {
        let mode = access_mode(name).ok_or_else(|| {
            format!(
                "unknown access mode `{name}` in `{text}` (modes: read, write, execute, configure)"
            )
        })?;
        set = set.with(mode);
    }
    Ok(Grant {
        resource_id: resource.to_owned(),
        modes: set,
    })
}

fn access_mode(name: &str) -> Option<AccessMode> {
    [
        AccessMode::Read,
        AccessMode::Write,
        AccessMode::Execute,
        AccessMode::Configure,
    ]
    .into_iter()
    .find(|m| m.name() == name)
}

/// All `--grant` values: each resource at most once.
pub(crate) fn parse_grants(texts: &[String]) -> Result<Vec<Grant>, String> {
    let mut grants: Vec<Grant> = Vec::with_capacity(texts.len());
    for text in texts {
        let g = parse_grant(text)?;
        if grants.iter().any(|h| h.resource_id == g.resource_id) {
            return Err(format!(
                "resource `{}` is granted twice: list all its modes in one --grant, such as `{}=read,write`",
                g.resource_id, g.resource_id
            ));
        }
        grants.push(g);
    }
    Ok(grants)
}

/// The modes of a grant as the user writes them: `read,write`.
pub(crate) fn modes_text(modes: AccessModes) -> String {
    modes
        .iter()
        .map(AccessMode::name)
        .collect::<Vec<_>>()
        .join(",")
}

/// A 32-byte key as 64 hex digits (either case); `None` otherwise.
pub(crate) fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let t = text.trim().as_bytes();
    if t.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(t.chunks_exact(2)) {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        *o = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use super::*;

    #[test]
    fn times_in_every_accepted_form() {
        let now = 1_700_000_000;
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("0", now), Ok(0));
        assert_eq!(parse_time(" 1798761600 ", now), Ok(1_798_761_600));
        assert_eq!(parse_time("2027-01-01T00:00:00Z", now), Ok(1_798_761_600));
        assert_eq!(parse_time("2027-01-01", now), Ok(1_798_761_600));
        assert_eq!(parse_time("2027-01-01t00:00:00z", now), Ok(1_798_761_600));
        assert_eq!(parse_time("2027-01-01 00:00:00Z", now), Ok(1_798_761_600));
        assert_eq!(
            parse_time("2027-01-01T00:00:00.999Z", now),
            Ok(1_798_761_600)
        );
        assert_eq!(
            parse_time("2027-01-01T02:00:00+02:00", now),
            Ok(1_798_761_600)
        );
        assert_eq!(
            parse_time("2026-12-31T22:30:00-01:30", now),
            Ok(1_798_761_600)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z", now), Ok(0));
        assert_eq!(parse_time("2024-02-29T12:00:00Z", now), Ok(1_709_208_000));
        assert_eq!(parse_time("9999-12-31T23:59:59Z", now), Ok(253_402_300_799));
    }

    #[test]
    fn bad_times_are_refused_with_a_reason() {
        for (t, why) in [
            ("", "not a time"),
            ("tomorrow", "not a time"),
            ("2027-01-01T00:00:00", "no time zone"),
            ("2027-13-01", "no such date"),
            ("2023-02-29", "no such date"),
            ("2027-04-31T00:00:00Z", "no such date"),
            ("2027-01-01T24:00:00Z", "out of range"),
            ("2027-01-01T00:00:00+24:00", "offset out of range"),
            ("1969-12-31T23:59:59Z", "before 1970"),
            ("1970-01-01T00:00:00+00:01", "before 1970"),
            ("2027-01-01T00:00:00.Z", "not a time"),
            ("2027-01-01T00:00Z", "not a time"),
            ("99999999999999999999999", "too large"),
            ("-5", "not a time"),
        ] {
            let e = parse_time(t, 0).unwrap_err();
            assert!(e.contains(why), "{t}: {e}");
        }
    }

    #[test]
    fn format_and_parse_round_trip_over_four_centuries() {
        // Every 7919th day (a prime: hits every month and leap day pattern)
        // and a spread of seconds within the day.
        let mut day = 0u64;
        while day * DAY <= 253_402_300_799 {
            let secs = day * DAY + (day * 7_777) % DAY;
            let text = format_rfc3339(secs).unwrap();
            assert_eq!(parse_time(&text, 0), Ok(secs), "{text}");
            day += 79;
        }
        assert_eq!(format_rfc3339(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339(1_709_208_000).unwrap(),
            "2024-02-29T12:00:00Z"
        );
        assert_eq!(format_rfc3339(253_402_300_800), None);
        assert_eq!(show_time(u64::MAX), u64::MAX.to_string());
        assert_eq!(show_time(0), "0 (1970-01-01T00:00:00Z)");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3600"), Ok(3600));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("15m"), Ok(900));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("30d"), Ok(2_592_000));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        assert_eq!(parse_duration("1d12h"), Ok(129_600));
        for bad in ["", "d", "30x", "30d5", "1.5h", "-1d"] {
            assert!(
                parse_duration(bad).unwrap_err().contains("not a duration"),
                "{bad}"
            );
        }
        assert!(
            parse_duration("99999999999999999999w")
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            parse_duration("9999999999999999w")
                .unwrap_err()
                .contains("too long")
        );
    }

    #[test]
    fn grants() {
        let g = parse_grant("camera-1=read,write").unwrap();
        assert_eq!(g.resource_id, "camera-1");
        assert_eq!(modes_text(g.modes), "read,write");
        let g = parse_grant("k=v=configure,execute").unwrap();
        assert_eq!(g.resource_id, "k=v");
        assert_eq!(modes_text(g.modes), "execute,configure");
        assert!(
            parse_grant("cam=read,fly")
                .unwrap_err()
                .contains("unknown access mode `fly`")
        );
        assert!(
            parse_grant("cam=")
                .unwrap_err()
                .contains("unknown access mode")
        );
        assert!(parse_grant("cam").unwrap_err().contains("RESOURCE=MODES"));
        assert!(parse_grant("=read").unwrap_err().contains("no resource"));
        let twice = parse_grants(&["a=read".into(), "a=write".into()]).unwrap_err();
        assert!(twice.contains("granted twice"), "{twice}");
        assert_eq!(parse_grants(&[]).unwrap(), vec![]);
    }

    #[test]
    fn hex_keys() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
        assert_eq!(parse_hex32(&hex(&key)), Some(key));
        assert_eq!(parse_hex32(&hex(&key).to_uppercase()), Some(key));
        assert_eq!(parse_hex32(&format!("{}\n", hex(&key))), Some(key));
        assert_eq!(parse_hex32(&hex(&key[..31])), None);
        assert_eq!(parse_hex32(&"zz".repeat(32)), None);
        assert_eq!(parse_hex32("key.pub"), None);
    }
}
