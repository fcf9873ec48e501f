//! RFC 3339 timestamps for envelopes (`occurredAt`, SPEC RT-3) and for
//! people (`dtp cred`).

const DAY: u64 = 86_400;

/// The RFC 3339 UTC form of Unix seconds (`2026-12-01T00:00:00Z`), or `None`
/// past the year 9999, which RFC 3339 cannot write.
pub fn format_rfc3339(secs: u64) -> Option<String> {
    civil(secs).map(|(date, rem)| {
        format!(
            "{date}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    })
}

/// [`format_rfc3339`] of Unix milliseconds, with three fraction digits
/// (`2026-12-01T00:00:00.250Z`).
pub fn format_rfc3339_ms(ms: u64) -> Option<String> {
    civil(ms / 1000).map(|(date, rem)| {
        format!(
            "{date}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            ms % 1000
        )
    })
}

/// The date (`YYYY-MM-DD`) of Unix seconds and the seconds into that day.
fn civil(secs: u64) -> Option<(String, u64)> {
    // 9999-12-31T23:59:59Z
    if secs > 253_402_300_799 {
        return None;
    }
    let days = (secs / DAY) as i64;
    // H. Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Some((format!("{year:04}-{month:02}-{day:02}"), secs % DAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            format_rfc3339(1_709_208_000).as_deref(),
            Some("2024-02-29T12:00:00Z")
        );
        assert_eq!(
            format_rfc3339_ms(1_709_208_000_250).as_deref(),
            Some("2024-02-29T12:00:00.250Z")
        );
        assert_eq!(
            format_rfc3339(253_402_300_799).as_deref(),
            Some("9999-12-31T23:59:59Z")
        );
        assert_eq!(format_rfc3339(253_402_300_800), None);
    }
}
