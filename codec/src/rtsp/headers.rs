//! The typed header values RTSP-interleaved needs: `Session` (RFC 2326
//! §12.37) and `Transport` (§12.39). Each reads a value and writes one
//! back (`Display`) that reads to an equal value; a refusal is the byte
//! offset in the value where it went wrong.

use std::fmt;

use super::message::is_tchar;

/// The longest session id taken (RFC 7826 §18.49 caps it at 256).
pub const MAX_SESSION_ID: usize = 256;

/// A `Session` value: `session-id [ ";" "timeout" "=" delta-seconds ]`.
/// Other parameters (RFC 7826 allows extensions) are skipped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Session {
    /// The id: 1 to 256 of `ALPHA / DIGIT / "$" / "-" / "_" / "." / "+"`.
    pub id: String,
    /// The timeout in seconds the server announces (RFC 2326: 60 when
    /// absent).
    pub timeout: Option<u32>,
}

impl Session {
    /// The timeout a session has when the server names none (§12.37).
    pub const DEFAULT_TIMEOUT: u32 = 60;

    /// Reads a `Session` value; the error is the offset in `value`.
    pub fn parse(value: &str) -> Result<Self, usize> {
        let mut parts = Parts::new(value, b';');
        let (at, id) = parts.next().ok_or(0usize)?;
        let id_bad = |b: u8| !(b.is_ascii_alphanumeric() || b"$-_.+".contains(&b));
        if id.is_empty() || id.len() > MAX_SESSION_ID {
            return Err(at);
        }
        if let Some(i) = id.bytes().position(id_bad) {
            return Err(at + i);
        }
        let mut timeout = None;
        for (at, param) in parts {
            let (name, v) = param.split_once('=').unwrap_or((param, ""));
            if !name.trim_end().eq_ignore_ascii_case("timeout") {
                continue;
            }
            let v = v.trim_start();
            let vat = at + param.len() - v.len();
            if timeout.is_some() {
                return Err(at);
            }
            timeout = Some(decimal_u32(v).ok_or(vat)?);
        }
        Ok(Self {
            id: id.to_owned(),
            timeout,
        })
    }

    /// The timeout, or the RFC's default.
    pub fn timeout_or_default(&self) -> u32 {
        self.timeout.unwrap_or(Self::DEFAULT_TIMEOUT)
    }
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)?;
        if let Some(t) = self.timeout {
            write!(f, ";timeout={t}")?;
        }
        Ok(())
    }
}

/// `unicast` or `multicast`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// `unicast`.
    Unicast,
    /// `multicast`.
    Multicast,
}

/// The channels of `interleaved=first[-last]` (RFC 2326 §10.12, §12.39).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Channels {
    /// The data channel.
    pub first: u8,
    /// The control (RTCP) channel, when a range is given.
    pub last: Option<u8>,
}

impl fmt::Display for Channels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.first)?;
        if let Some(l) = self.last {
            write!(f, "-{l}")?;
        }
        Ok(())
    }
}

/// One transport spec of a `Transport` value (RFC 2326 §12.39):
/// `RTP/AVP[/TCP|/UDP]` and its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TransportSpec {
    /// `RTP` (as sent).
    pub protocol: String,
    /// `AVP` (as sent).
    pub profile: String,
    /// `TCP` or `UDP` (as sent; UDP when absent).
    pub lower: Option<String>,
    /// `unicast` or `multicast`, if named.
    pub delivery: Option<Delivery>,
    /// `interleaved=…`, if named.
    pub interleaved: Option<Channels>,
    /// `mode=…` without its quotes (`PLAY`, `RECORD`), if named.
    pub mode: Option<String>,
    /// Every other parameter, in order: its name and its value as sent
    /// (`client_port=4588-4589` is `("client_port", Some("4588-4589"))`).
    pub other: Vec<(String, Option<String>)>,
}

impl TransportSpec {
    /// `RTP/AVP/TCP;unicast;interleaved=first-last`: what DTP asks for
    /// and answers.
    pub fn tcp_interleaved(first: u8, last: u8) -> Self {
        Self {
            protocol: "RTP".into(),
            profile: "AVP".into(),
            lower: Some("TCP".into()),
            delivery: Some(Delivery::Unicast),
            interleaved: Some(Channels {
                first,
                last: Some(last),
            }),
            mode: None,
            other: Vec::new(),
        }
    }

    /// Whether this is RTP/AVP over TCP (case-insensitive).
    pub fn is_rtp_avp_tcp(&self) -> bool {
        self.protocol.eq_ignore_ascii_case("RTP")
            && self.profile.eq_ignore_ascii_case("AVP")
            && self
                .lower
                .as_deref()
                .is_some_and(|l| l.eq_ignore_ascii_case("TCP"))
    }
}

impl fmt::Display for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.profile)?;
        if let Some(l) = &self.lower {
            write!(f, "/{l}")?;
        }
        match self.delivery {
            Some(Delivery::Unicast) => f.write_str(";unicast")?,
            Some(Delivery::Multicast) => f.write_str(";multicast")?,
            None => {}
        }
        if let Some(c) = self.interleaved {
            write!(f, ";interleaved={c}")?;
        }
        if let Some(m) = &self.mode {
            write!(f, ";mode=\"{m}\"")?;
        }
        for (name, value) in &self.other {
            match value {
                Some(v) => write!(f, ";{name}={v}")?,
                None => write!(f, ";{name}")?,
            }
        }
        Ok(())
    }
}

/// Writes a `Transport` value: the specs, comma-separated.
pub fn format_transport(specs: &[TransportSpec]) -> String {
    let parts: Vec<String> = specs.iter().map(ToString::to_string).collect();
    parts.join(",")
}

/// Reads a `Transport` value: one or more specs, comma-separated (quoted
/// strings may hold commas and semicolons). The error is the offset in
/// `value`.
pub fn parse_transport(value: &str) -> Result<Vec<TransportSpec>, usize> {
    let mut specs = Vec::new();
    for (at, spec) in Parts::new(value, b',') {
        specs.push(parse_spec(spec).map_err(|i| at + i)?);
    }
    if specs.is_empty() {
        return Err(0);
    }
    Ok(specs)
}

fn parse_spec(spec: &str) -> Result<TransportSpec, usize> {
    let mut params = Parts::new(spec, b';');
    let (at, head) = params.next().ok_or(0usize)?;
    let mut names = head.split('/');
    let mut piece = |off: &mut usize| -> Result<Option<String>, usize> {
        let Some(p) = names.next() else {
            return Ok(None);
        };
        if p.is_empty() || !p.bytes().all(is_tchar) {
            return Err(at + *off);
        }
        *off += p.len() + 1;
        Ok(Some(p.to_owned()))
    };
    let mut off = 0;
    let protocol = piece(&mut off)?.ok_or(at)?;
    let profile = piece(&mut off)?.ok_or(at + off)?;
    let lower = piece(&mut off)?;
    if piece(&mut off)?.is_some() {
        return Err(at + off);
    }
    let mut out = TransportSpec {
        protocol,
        profile,
        lower,
        delivery: None,
        interleaved: None,
        mode: None,
        other: Vec::new(),
    };
    for (at, param) in params {
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim_end(), Some(v.trim_start())),
            None => (param, None),
        };
        let vat = at + value.map_or(0, |v| param.len() - v.len());
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(at);
        }
        let lower = name.to_ascii_lowercase();
        let twice = |seen: bool| if seen { Err(at) } else { Ok(()) };
        match (lower.as_str(), value) {
            ("unicast" | "multicast", None) => {
                twice(out.delivery.is_some())?;
                out.delivery = Some(if lower == "unicast" {
                    Delivery::Unicast
                } else {
                    Delivery::Multicast
                });
            }
            ("interleaved", Some(v)) => {
                twice(out.interleaved.is_some())?;
                out.interleaved = Some(channels(v).map_err(|i| vat + i)?);
            }
            ("mode", Some(v)) => {
                twice(out.mode.is_some())?;
                out.mode = Some(unquote(v).ok_or(vat)?.to_owned());
            }
            ("unicast" | "multicast" | "interleaved" | "mode", _) => return Err(at),
            (_, v) => {
                if let Some(v) = v
                    && (v.is_empty() || !value_ok(v))
                {
                    return Err(vat);
                }
                out.other.push((name.to_owned(), v.map(str::to_owned)));
            }
        }
    }
    Ok(out)
}

/// `channel [ "-" channel ]`, each 1 to 3 digits up to 255.
fn channels(v: &str) -> Result<Channels, usize> {
    let (first, last) = match v.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    };
    let channel = |s: &str, at: usize| {
        if s.is_empty() || s.len() > 3 {
            return Err(at);
        }
        decimal_u32(s).and_then(|n| u8::try_from(n).ok()).ok_or(at)
    };
    Ok(Channels {
        first: channel(first, 0)?,
        last: last.map(|l| channel(l, first.len() + 1)).transpose()?,
    })
}

/// A parameter value: a token-ish run or a quoted string, with no
/// whitespace, comma or semicolon outside quotes.
fn value_ok(v: &str) -> bool {
    if v.starts_with('"') {
        return unquote(v).is_some();
    }
    v.bytes()
        .all(|b| b.is_ascii_graphic() && b != b';' && b != b',' && b != b'"')
}

/// The inside of `"…"` (no quote or backslash inside), or a bare token.
fn unquote(v: &str) -> Option<&str> {
    let inner = match v.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?,
        None => v,
    };
    let ok = !inner.is_empty()
        && inner
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\' && b != b';');
    ok.then_some(inner)
}

/// `1*DIGIT` as a u32 (at most ten digits).
pub(crate) fn decimal_u32(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Pieces of `s` between `sep` bytes outside double quotes, each trimmed
/// of spaces and tabs, with their offsets in `s`.
struct Parts<'a> {
    s: &'a str,
    at: usize,
    sep: u8,
    done: bool,
}

impl<'a> Parts<'a> {
    fn new(s: &'a str, sep: u8) -> Self {
        Self {
            s,
            at: 0,
            sep,
            done: false,
        }
    }
}

impl<'a> Iterator for Parts<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.s.get(self.at..)?;
        let mut quoted = false;
        let mut end = rest.len();
        for (i, b) in rest.bytes().enumerate() {
            if b == b'"' {
                quoted = !quoted;
            } else if b == self.sep && !quoted {
                end = i;
                break;
            }
        }
        let raw = rest.get(..end)?;
        let start = self.at;
        if end == rest.len() {
            self.done = true;
        } else {
            self.at += end + 1;
        }
        let trimmed = raw.trim_start_matches([' ', '\t']);
        let lead = raw.len() - trimmed.len();
        Some((start + lead, trimmed.trim_end_matches([' ', '\t'])))
    }
}
