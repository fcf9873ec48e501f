//! The envelope around every record and its one-line JSON encoding.

use serde::{Deserialize, Serialize};

use crate::AuditError;

/// SPEC HO-10, TS-12: one line of the audit log,
/// `{"seq":…,"at_unix_ms":…,"record":…}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// Position in the log: 1 for the first record ever, +1 for each record,
    /// continuing across reopen and rotation.
    pub seq: u64,
    /// When the event happened, as the caller said (milliseconds since the Unix epoch).
    pub at_unix_ms: u64,
    /// The caller's record.
    pub record: T,
}

/// SPEC HO-10, TS-12: encodes one record as a complete line, newline
/// included, or fails without side effects (what the writer appends).
pub fn encode_line<T: Serialize>(
    seq: u64,
    at_unix_ms: u64,
    record: &T,
) -> Result<Vec<u8>, AuditError> {
    let envelope = Envelope {
        seq,
        at_unix_ms,
        record,
    };
    let mut line = serde_json::to_vec(&envelope).map_err(AuditError::Serialize)?;
    ensure_single_line(&line)?;
    line.push(b'\n');
    Ok(line)
}

/// serde_json's compact form escapes every newline inside strings, so only a
/// raw JSON value could smuggle one in; a line break would split the record
/// and make the reader see corruption, so it is refused here.
fn ensure_single_line(json: &[u8]) -> Result<(), AuditError> {
    if json.contains(&b'\n') {
        return Err(AuditError::Newline);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn newlines_in_strings_are_escaped_into_one_line() {
        let line = encode_line(7, 9, &"a\nb\r\nc\u{2028}ü").unwrap();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(line.last(), Some(&b'\n'));
        let back: Envelope<String> = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            back,
            Envelope {
                seq: 7,
                at_unix_ms: 9,
                record: "a\nb\r\nc\u{2028}ü".into()
            }
        );
    }

    #[test]
    fn raw_newline_is_refused() {
        assert!(matches!(
            ensure_single_line(b"{\"a\":\n1}"),
            Err(AuditError::Newline)
        ));
        assert!(ensure_single_line(b"{\"a\":1}").is_ok());
    }

    #[test]
    fn unserialisable_record_is_an_error() {
        let record: BTreeMap<Vec<u8>, u8> = BTreeMap::from([(vec![1], 2)]);
        assert!(matches!(
            encode_line(1, 0, &record),
            Err(AuditError::Serialize(_))
        ));
    }
}
