//! What the endpoints read out of a [`RequestHead`]: connection persistence,
//! query parameters, path segments, cookies, bearer tokens, entity tags and
//! `Last-Event-ID`.

use super::{IfNoneMatch, RequestHead, Version};

impl RequestHead {
    /// The comma-separated elements of every field named `name` (RFC 9110
    /// §5.6.1), trimmed of spaces and tabs, empty elements skipped.
    pub fn list<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.headers(name)
            .flat_map(|v| v.split(','))
            .map(|item| item.trim_matches([' ', '\t']))
            .filter(|item| !item.is_empty())
    }

    /// Does the list in the fields named `name` hold `token`
    /// (case-insensitive)? E.g. `has_token("Connection", "upgrade")`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.list(name).any(|t| t.eq_ignore_ascii_case(token))
    }

    /// RFC 9112 §9.3: may the connection carry another request after this
    /// one's response? HTTP/1.1: yes unless `Connection` holds `close`;
    /// HTTP/1.0: no unless it holds `keep-alive`. `close` wins over
    /// `keep-alive` if both are sent.
    pub fn keep_alive(&self) -> bool {
        if self.has_token("Connection", "close") {
            return false;
        }
        match self.version() {
            Version::Http11 => true,
            Version::Http10 => self.has_token("Connection", "keep-alive"),
        }
    }

    /// The `Host` field (there is at most one: a second is refused with 400).
    pub fn host(&self) -> Option<&str> {
        self.header("Host")
    }

    /// The first query parameter named `name`, decoded
    /// (`application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte).
    /// A parameter without `=` has the value `""`. `None` if absent, or if
    /// its value is malformed (a `%` not followed by two hex digits) or does
    /// not decode to UTF-8. Parameters whose own name is malformed are
    /// skipped.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query()?.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(key)? == name).then(|| form_decode(value))
        })?
    }

    /// The path's segments, percent-decoded: `/v1/streams/a%20b/events` →
    /// `["v1", "streams", "a b", "events"]`, `/` → `[]`. `+` stays a `+`.
    ///
    /// `None` (answer 400 or 404) for anything a router should not have to
    /// think about: the asterisk form, an empty segment (`//`, or a trailing
    /// `/` after a non-root path), a segment that is `.` or `..` before or
    /// after decoding, malformed percent-encoding, a decoded `/`, a control
    /// character, or bytes that are not UTF-8.
    pub fn path_segments(&self) -> Option<Vec<String>> {
        let rest = self.path().strip_prefix('/')?;
        if rest.is_empty() {
            return Some(Vec::new());
        }
        rest.split('/')
            .map(|raw| {
                let seg = percent_decode(raw, false)?;
                let bad = seg.is_empty()
                    || seg == "."
                    || seg == ".."
                    || seg.chars().any(|c| c == '/' || c.is_control());
                (!bad).then_some(seg)
            })
            .collect()
    }

    /// The value of the first cookie named `name` (case-sensitive) in the
    /// `Cookie` field(s) (RFC 6265 §5.4: `a=1; b=2`), without surrounding
    /// double quotes. Pairs without `=` are skipped.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers("Cookie")
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim_matches([' ', '\t']).split_once('='))
            .find(|(k, _)| k.trim_end_matches([' ', '\t']) == name)
            .map(|(_, v)| {
                let v = v.trim_matches([' ', '\t']);
                v.strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .unwrap_or(v)
            })
    }

    /// The token of `Authorization: Bearer <token>` (RFC 6750 §2.1; the
    /// scheme is case-insensitive). `None` if absent, if more than one
    /// `Authorization` field is sent, with another scheme, or if the token
    /// is not `token68` (`A-Z a-z 0-9 - . _ ~ + /`, then any `=`).
    pub fn bearer_token(&self) -> Option<&str> {
        if self.count("Authorization") != 1 {
            return None;
        }
        let value = self.header("Authorization")?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("Bearer") {
            return None;
        }
        let token = token.trim_start_matches(' ');
        let body = token.trim_end_matches('=');
        let ok = !body.is_empty()
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
        ok.then_some(token)
    }

    /// The `If-None-Match` precondition (SPEC RT-11), from every such field.
    /// `None` if absent or malformed in any field; the request is then
    /// served unconditionally.
    pub fn if_none_match(&self) -> Option<IfNoneMatch> {
        if self.headers("If-None-Match").count() != self.count("If-None-Match") {
            return None; // a value that is not UTF-8 is malformed
        }
        IfNoneMatch::parse(self.headers("If-None-Match"))
    }

    /// The SSE resume cursor, `Last-Event-ID` (SPEC RT-8: CURSOR profile).
    /// `None` if absent or empty: a browser sends no header for an empty
    /// last event id, and an empty cursor is never valid.
    pub fn last_event_id(&self) -> Option<&str> {
        self.header("Last-Event-ID").filter(|v| !v.is_empty())
    }
}

/// Decodes `application/x-www-form-urlencoded` text: `+` is a space.
fn form_decode(s: &str) -> Option<String> {
    percent_decode(s, true)
}

/// RFC 3986 §2.1 percent-decoding into UTF-8; `None` on a `%` not followed
/// by two hex digits or on bytes that are not UTF-8.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        out.push(match b {
            b'%' => {
                let hi = hex(bytes.next()?)?;
                let lo = hex(bytes.next()?)?;
                hi << 4 | lo
            }
            b'+' if plus_is_space => b' ',
            b => b,
        });
    }
    String::from_utf8(out).ok()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
