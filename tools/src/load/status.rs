//! Whether a load run worked: the share of what it attempted that
//! succeeded, and why the rest failed — refusal and CAP codes by name with
//! a hint, and connections nobody answered — so that `dtp load` exits 1
//! with the reason instead of printing zeros as a result.
//!
//! **Owns**: [`Failures`] (codes seen, counted, with the first message of
//! each) and the verdict ([`check`]). **Never touches**: the runs that
//! fill them (`super`, `crate::load_dtp`), the exit status (the CLI's).

use std::collections::BTreeMap;

use dtp_codec::ErrorCode;

/// The `--min-success` default: a run in which fewer than 90% of the
/// connections (sessions, requests) succeeded is a failed run.
pub(crate) const DEFAULT_MIN_SUCCESS: f64 = 0.9;

/// Why operations failed: each code seen, how often, and the first message
/// that came with it. Bounded: at most one entry per 16-bit code.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Failures {
    by_code: BTreeMap<u16, (u64, String)>,
}

impl Failures {
    /// Counts one failure with `code`; `message` is kept if it is the
    /// code's first non-empty one.
    pub(crate) fn record(&mut self, code: ErrorCode, message: &str) {
        let entry = self.by_code.entry(code.0).or_default();
        entry.0 += 1;
        if entry.1.is_empty() {
            // Bounded: a peer's reason is at most the codec's string limit,
            // but keep the report readable whatever it is.
            entry.1 = message.chars().take(200).collect();
        }
    }

    /// Adds `o`'s counts (messages already kept win).
    pub(crate) fn merge(&mut self, o: &Failures) {
        for (code, (n, message)) in &o.by_code {
            let entry = self.by_code.entry(*code).or_default();
            entry.0 += n;
            if entry.1.is_empty() {
                entry.1.clone_from(message);
            }
        }
    }

    /// Each code, its count and message, most frequent first.
    pub(crate) fn iter(&self) -> Vec<(ErrorCode, u64, &str)> {
        let mut v: Vec<_> = self
            .by_code
            .iter()
            .map(|(c, (n, m))| (ErrorCode(*c), *n, m.as_str()))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// One line per code: `2005 CREDENTIAL_REVOKED ×4: <message>; <hint>`.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.iter()
            .into_iter()
            .map(|(code, n, message)| {
                let mut line = format!("{code} ×{n}");
                if !message.is_empty() {
                    line += &format!(": {message}");
                }
                if let Some(h) = hint(code) {
                    line += &format!(" ({h})");
                }
                line
            })
            .collect()
    }

    /// JSON: `{"2005 CREDENTIAL_REVOKED": {"count": 4, "message": "…"}}`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .iter()
            .into_iter()
            .map(|(code, n, message)| {
                (
                    code.to_string(),
                    serde_json::json!({"count": n, "message": message}),
                )
            })
            .collect();
        serde_json::Value::Object(map)
    }
}

/// A DTP error's text without the code it starts with (the report names
/// the code already).
pub(crate) fn reason(e: &dtp_gateway::dtp::DtpError) -> String {
    let text = e.to_string();
    let code = e.code().to_string();
    text.strip_prefix(&code)
        .map_or(text.as_str(), str::trim_start)
        .to_owned()
}

/// What a user can do about a code a load run met.
pub(crate) fn hint(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::CAP_FAILED => {
            "CAP failed: check --pin-terminal against the terminal's key, and that the credential names this --fay-key"
        }
        ErrorCode::CAP_TIMEOUT => "the handshake did not finish in time",
        ErrorCode::CREDENTIAL_INVALID => {
            "the terminal found the credential invalid or not yet valid"
        }
        ErrorCode::CREDENTIAL_EXPIRED => "the credential expired: issue a new one (dtp cred issue)",
        ErrorCode::CREDENTIAL_REVOKED => {
            "the terminal revoked this credential: issue a new one (dtp cred issue)"
        }
        ErrorCode::UNKNOWN_ISSUER => {
            "the terminal does not trust the credential's issuer: add its key to [dtp] trust"
        }
        ErrorCode::AGREEMENT_REJECTED => "the terminal rejected the workload's agreement",
        ErrorCode::E_UNAUTHORIZED => {
            "the credential does not grant that resource in that mode (dtp cred issue --grant)"
        }
        ErrorCode::E_RESOURCE_BUSY => "the resource is held, or unavailable",
        ErrorCode::E_SESSION_LIMIT_EXCEEDED => "the terminal's session limit was reached",
        _ => return None,
    })
}

/// Why connections could not be made, worded for the user: `nothing
/// listens on ADDR` for a refused connect.
pub(crate) fn connect_failure(target: &dtp_transports::Endpoint, errno: i32) -> String {
    let e = std::io::Error::from_raw_os_error(errno);
    // TCP targets as they were given (`127.0.0.1:7700`), others with their scheme.
    let target = match target {
        dtp_transports::Endpoint::Tcp(addr) => addr.to_string(),
        other => other.to_string(),
    };
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("nothing listens on {target} (no such socket)")
        }
        std::io::ErrorKind::ConnectionRefused => {
            format!("nothing listens on {target} (no connection could be made: refused)")
        }
        std::io::ErrorKind::TimedOut => format!("no answer from {target} (connect timed out)"),
        _ if errno == 0 => format!("no connection to {target} could be made"),
        _ => format!("no connection to {target} could be made ({e})"),
    }
}

/// One share a run is judged by: `succeeded` of `attempted` `what`
/// (e.g. 3 of 4 "connections established a DTP session").
#[derive(Clone, Copy, Debug)]
pub(crate) struct Share {
    pub(crate) what: &'static str,
    pub(crate) attempted: u64,
    pub(crate) succeeded: u64,
}

/// The verdict of a run: `Err` with the reason when any share is below
/// `min` (or nothing at all was attempted), naming the codes met and
/// `connect` (why connections failed, when some did).
pub(crate) fn check(
    shares: &[Share],
    min: f64,
    failures: &Failures,
    connect: Option<String>,
) -> Result<(), String> {
    for s in shares {
        let ok = s.attempted > 0 && (s.succeeded as f64) >= min * s.attempted as f64;
        if ok {
            continue;
        }
        let mut why = format!(
            "{} of {} {} (--min-success {min})",
            s.succeeded, s.attempted, s.what
        );
        let mut lines = failures.lines();
        lines.extend(connect);
        if !lines.is_empty() {
            why += ": ";
            why += &lines.join("; ");
        }
        return Err(why);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_by_code_and_keep_the_first_message() {
        let mut f = Failures::default();
        f.record(ErrorCode::CREDENTIAL_REVOKED, "");
        f.record(ErrorCode::CREDENTIAL_REVOKED, "credential x was revoked");
        f.record(ErrorCode::CREDENTIAL_REVOKED, "another");
        f.record(
            ErrorCode::INVALID_VALUE,
            "this terminal has no resource \"res-0\"",
        );
        let mut g = Failures::default();
        g.record(ErrorCode::INVALID_VALUE, "later");
        f.merge(&g);
        assert_eq!(f.iter().iter().map(|(_, n, _)| n).sum::<u64>(), 5);
        let lines = f.lines();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with(
                "2005 CREDENTIAL_REVOKED ×3: credential x was revoked (the terminal revoked"
            ),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "1009 INVALID_VALUE ×2: this terminal has no resource \"res-0\""
        );
    }

    #[test]
    fn a_share_below_the_minimum_fails_with_the_codes() {
        let mut f = Failures::default();
        f.record(
            ErrorCode::CAP_FAILED,
            "the terminal's static key is not the pinned key",
        );
        let share = |succeeded| Share {
            what: "connections established a DTP session",
            attempted: 10,
            succeeded,
        };
        assert!(check(&[share(9)], 0.9, &f, None).is_ok());
        let e = check(&[share(8)], 0.9, &f, None).unwrap_err();
        assert!(e.starts_with("8 of 10 connections established a DTP session (--min-success 0.9): 2001 CAP_FAILED ×1: the terminal's static key"), "{e}");
        // Nothing attempted is never a success.
        let none = Share {
            what: "operations",
            attempted: 0,
            succeeded: 0,
        };
        let e = check(
            &[none],
            0.5,
            &Failures::default(),
            Some("nothing listens on x".into()),
        );
        assert!(e.unwrap_err().ends_with(": nothing listens on x"));
    }

    #[test]
    fn a_refused_connect_says_nothing_listens() {
        let addr = "127.0.0.1:7700".parse().unwrap();
        assert!(connect_failure(&addr, 111).starts_with("nothing listens on 127.0.0.1:7700 ("));
        let path = "unix:/run/nowhere.sock".parse().unwrap();
        assert_eq!(
            connect_failure(&path, 2), // ENOENT
            "nothing listens on unix:/run/nowhere.sock (no such socket)"
        );
    }
}
