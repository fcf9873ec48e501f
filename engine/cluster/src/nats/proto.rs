//! The NATS client protocol's server side, sans-IO: [`parse_op`] reads one
//! server operation (INFO, MSG, HMSG, PING, PONG, +OK, -ERR) from the front
//! of a buffer, and the `write_*` functions write client operations. No
//! input makes it panic; every length is bounded by [`Limits`].

use std::fmt::Write as _;

/// Ceilings on what the server may make the client hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest control line (INFO's JSON is the longest), CRLF included.
    pub(crate) max_control_line: usize,
    /// The largest message (headers and payload).
    pub(crate) max_payload: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_control_line: 64 * 1024,
            max_payload: 8 * 1024 * 1024,
        }
    }
}

/// One operation the server sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ServerOp {
    /// `INFO` and its JSON.
    Info(Vec<u8>),
    /// `MSG` or `HMSG`.
    Msg(RawMsg),
    /// `PING`: answer `PONG`.
    Ping,
    /// `PONG`.
    Pong,
    /// `+OK` (verbose mode only).
    Ok,
    /// `-ERR` and its text (quotes removed).
    Err(String),
}

/// A delivered message, headers still encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawMsg {
    pub(crate) subject: String,
    pub(crate) sid: u64,
    pub(crate) reply: Option<String>,
    /// The header block (`NATS/1.0…\r\n\r\n`) of an HMSG, else `None`.
    pub(crate) headers: Option<Vec<u8>>,
    pub(crate) payload: Vec<u8>,
}

/// Why the server's bytes were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtoError {
    #[error("unknown protocol operation")]
    UnknownOp,
    #[error("malformed {0} line")]
    BadArgs(&'static str),
    #[error("control line longer than {0} bytes")]
    LineTooLong(usize),
    #[error("message of {0} bytes over the limit")]
    TooLarge(usize),
    #[error("message not followed by CRLF")]
    MissingCrlf,
}

/// Reads one operation from the front of `buf`: `Ok(None)` if incomplete,
/// `Ok(Some((op, n)))` with `n` the bytes it used.
pub(crate) fn parse_op(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(ServerOp, usize)>, ProtoError> {
    let Some(nl) = buf
        .iter()
        .take(limits.max_control_line)
        .position(|&b| b == b'\n')
    else {
        return if buf.len() >= limits.max_control_line {
            Err(ProtoError::LineTooLong(limits.max_control_line))
        } else {
            Ok(None)
        };
    };
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (op, rest) = split_word(line);
    let after = nl + 1;
    let simple = |op| Ok(Some((op, after)));
    match op.to_ascii_uppercase().as_slice() {
        b"PING" => simple(ServerOp::Ping),
        b"PONG" => simple(ServerOp::Pong),
        b"+OK" => simple(ServerOp::Ok),
        b"-ERR" => {
            let text = String::from_utf8_lossy(rest.trim_ascii());
            simple(ServerOp::Err(text.trim_matches('\'').to_owned()))
        }
        b"INFO" => simple(ServerOp::Info(rest.trim_ascii().to_vec())),
        b"MSG" => parse_msg(buf, rest, after, false, limits),
        b"HMSG" => parse_msg(buf, rest, after, true, limits),
        _ => Err(ProtoError::UnknownOp),
    }
}

fn parse_msg(
    buf: &[u8],
    args: &[u8],
    start: usize,
    with_headers: bool,
    limits: &Limits,
) -> Result<Option<(ServerOp, usize)>, ProtoError> {
    let what = if with_headers { "HMSG" } else { "MSG" };
    let bad = || ProtoError::BadArgs(what);
    let words: Vec<&[u8]> = args
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|w| !w.is_empty())
        .collect();
    // MSG subject sid [reply] size; HMSG subject sid [reply] hdr_size size.
    let sizes = if with_headers { 2 } else { 1 };
    let (subject, sid, reply, nums) = match words.len().checked_sub(sizes) {
        Some(2) => (words[0], words[1], None, &words[2..]),
        Some(3) => (words[0], words[1], Some(words[2]), &words[3..]),
        _ => return Err(bad()),
    };
    let total = number(nums.last().ok_or_else(bad)?).ok_or_else(bad)?;
    let header_len = if with_headers {
        let h = number(nums[0]).ok_or_else(bad)?;
        if h > total {
            return Err(bad());
        }
        Some(h)
    } else {
        None
    };
    if total > limits.max_payload {
        return Err(ProtoError::TooLarge(total));
    }
    let end = start + total;
    let Some(tail) = buf.get(end..end + 2) else {
        return Ok(None);
    };
    if tail != b"\r\n" {
        return Err(ProtoError::MissingCrlf);
    }
    let body = &buf[start..end];
    let (headers, payload) = match header_len {
        Some(h) => (Some(body[..h].to_vec()), body[h..].to_vec()),
        None => (None, body.to_vec()),
    };
    let text = |w: &[u8]| String::from_utf8(w.to_vec()).map_err(|_| bad());
    let msg = RawMsg {
        subject: text(subject)?,
        sid: number(sid).ok_or_else(bad)? as u64,
        reply: reply.map(text).transpose()?,
        headers,
        payload,
    };
    Ok(Some((ServerOp::Msg(msg), end + 2)))
}

/// A decimal of at most 12 digits (no sign, no overflow).
fn number(w: &[u8]) -> Option<usize> {
    if w.is_empty() || w.len() > 12 || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(w).ok()?.parse().ok()
}

fn split_word(line: &[u8]) -> (&[u8], &[u8]) {
    let line = line.trim_ascii_start();
    match line.iter().position(|&b| b == b' ' || b == b'\t') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &[]),
    }
}

/// Whether `s` may be a subject (or a reply subject) on the wire: not
/// empty, no whitespace or control bytes.
pub(crate) fn valid_subject(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b > b' ' && b != 0x7f)
}

/// Appends `PUB subject [reply] size` or `HPUB subject [reply] hsize size`
/// and the message. The caller checked the subjects.
pub(crate) fn write_pub(
    out: &mut Vec<u8>,
    subject: &str,
    reply: Option<&str>,
    headers: &[u8],
    payload: &[u8],
) {
    let mut line = String::new();
    let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
    if headers.is_empty() {
        let _ = write!(line, "PUB {subject}{reply} {}\r\n", payload.len());
    } else {
        let total = headers.len() + payload.len();
        let _ = write!(line, "HPUB {subject}{reply} {} {total}\r\n", headers.len());
    }
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(headers);
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn one(wire: &[u8]) -> Result<Option<(ServerOp, usize)>, ProtoError> {
        parse_op(wire, &Limits::default())
    }

    #[test]
    fn control_lines() {
        assert_eq!(one(b"PING\r\n"), Ok(Some((ServerOp::Ping, 6))));
        assert_eq!(one(b"pong\r\nPING"), Ok(Some((ServerOp::Pong, 6))));
        assert_eq!(one(b"+OK\r\n"), Ok(Some((ServerOp::Ok, 5))));
        assert_eq!(
            one(b"-ERR 'Authorization Violation'\r\n")
                .unwrap()
                .unwrap()
                .0,
            ServerOp::Err("Authorization Violation".into())
        );
        assert_eq!(
            one(b"INFO {\"max_payload\":1048576}\r\n")
                .unwrap()
                .unwrap()
                .0,
            ServerOp::Info(b"{\"max_payload\":1048576}".to_vec())
        );
        assert_eq!(one(b"PIN"), Ok(None));
        assert_eq!(one(b"HELLO\r\n"), Err(ProtoError::UnknownOp));
    }

    #[test]
    fn msg_and_hmsg() {
        let (op, n) = one(b"MSG a.b 7 _INBOX.x 5\r\nhello\r\nPING\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(n, 29);
        let ServerOp::Msg(m) = op else { panic!() };
        assert_eq!(
            (m.subject.as_str(), m.sid, m.reply.as_deref()),
            ("a.b", 7, Some("_INBOX.x"))
        );
        assert_eq!(m.payload, b"hello");
        let wire = b"HMSG r 1 21 23\r\nNATS/1.0 404 Nope\r\n\r\nhi\r\n";
        let (op, n) = one(wire).unwrap().unwrap();
        assert_eq!(n, wire.len());
        let ServerOp::Msg(m) = op else { panic!() };
        assert_eq!(
            m.headers.as_deref(),
            Some(&b"NATS/1.0 404 Nope\r\n\r\n"[..])
        );
        assert_eq!((m.reply, m.payload.as_slice()), (None, &b"hi"[..]));
        // Incomplete payload: wait.
        assert_eq!(one(b"MSG a 1 5\r\nhel"), Ok(None));
    }

    #[test]
    fn bad_messages() {
        assert_eq!(one(b"MSG a 1\r\n"), Err(ProtoError::BadArgs("MSG")));
        assert_eq!(one(b"MSG a 1 -5\r\n"), Err(ProtoError::BadArgs("MSG")));
        assert_eq!(
            one(b"MSG a 1 99999999999999999999\r\n"),
            Err(ProtoError::BadArgs("MSG"))
        );
        assert_eq!(one(b"HMSG a 1 9 5\r\n"), Err(ProtoError::BadArgs("HMSG")));
        assert_eq!(one(b"MSG a 1 2\r\nabXY"), Err(ProtoError::MissingCrlf));
        assert_eq!(
            one(b"MSG a 1 999999999\r\n"),
            Err(ProtoError::TooLarge(999_999_999))
        );
        let limits = Limits {
            max_control_line: 8,
            max_payload: 10,
        };
        assert_eq!(
            parse_op(b"INFO {....}", &limits),
            Err(ProtoError::LineTooLong(8))
        );
    }

    #[test]
    fn pub_lines() {
        let mut out = Vec::new();
        write_pub(&mut out, "s", Some("r"), b"", b"xy");
        write_pub(&mut out, "s", None, b"NATS/1.0\r\n\r\n", b"z");
        assert_eq!(
            out,
            b"PUB s r 2\r\nxy\r\nHPUB s 12 13\r\nNATS/1.0\r\n\r\nz\r\n"
        );
        assert!(valid_subject("$JS.API.STREAM.INFO.x"));
        assert!(!valid_subject("a b") && !valid_subject("") && !valid_subject("a\r\n"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(wire in prop::collection::vec(any::<u8>(), 0..200)) {
            let limits = Limits { max_control_line: 64, max_payload: 64 };
            if let Ok(Some((_, n))) = parse_op(&wire, &limits) {
                prop_assert!(n <= wire.len());
            }
        }

        #[test]
        fn msg_round_trip_at_any_split(payload in prop::collection::vec(any::<u8>(), 0..64), cut in 0usize..100) {
            let mut wire = format!("MSG subj 3 {}\r\n", payload.len()).into_bytes();
            wire.extend_from_slice(&payload);
            wire.extend_from_slice(b"\r\n");
            let cut = cut.min(wire.len());
            if cut < wire.len() {
                prop_assert_eq!(one(&wire[..cut]), Ok(None));
            }
            let (op, n) = one(&wire).unwrap().unwrap();
            prop_assert_eq!(n, wire.len());
            let ServerOp::Msg(m) = op else { panic!() };
            prop_assert_eq!(m.payload, payload);
        }
    }
}
