//! The server's side of the WebSocket opening handshake (RFC 6455
//! §4.2.1–4.2.2) for the `realtime.v1` endpoint (SPEC RT-9). Framing after
//! the handshake lives in [`crate::ws`].

use super::response::is_token;
use super::{HttpError, Method, RequestHead, ResponseHead, Version, base64};

/// The GUID RFC 6455 §1.3 appends to the key before hashing.
pub const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A valid opening handshake, as far as RFC 6455 goes. The caller still owns
/// the policy: the exact `Origin` check and the choice of subprotocol (SPEC
/// RT-9: `realtime.v1`, fixed), then answers with [`WsUpgrade::response`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WsUpgrade {
    /// `Sec-WebSocket-Key`, as sent (the base64 of 16 bytes).
    pub key: String,
    /// `Sec-WebSocket-Protocol` entries, in the order offered.
    pub protocols: Vec<String>,
    /// `Origin`, if sent (browsers always send it).
    pub origin: Option<String>,
    /// `Sec-WebSocket-Extensions` entries with their parameters, as sent
    /// (split on commas; none is negotiated by this server).
    pub extensions: Vec<String>,
}

impl WsUpgrade {
    /// Did the client offer `protocol` (compared exactly)?
    pub fn offers(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p == protocol)
    }

    /// The `Sec-WebSocket-Accept` value for this handshake.
    pub fn accept(&self) -> String {
        accept_key(&self.key)
    }

    /// The 101 response (RFC 6455 §4.2.2 item 5): `Upgrade: websocket`,
    /// `Connection: Upgrade`, `Sec-WebSocket-Accept` and, if `protocol` is
    /// given, `Sec-WebSocket-Protocol`. More headers may be added to the
    /// returned head before writing it.
    ///
    /// Errs with [`HttpError::InvalidResponseHeader`] if `protocol` is not
    /// one the client offered: RFC 6455 §4.2.2 lets the server pick only
    /// among those (the client fails the connection otherwise).
    pub fn response(&self, protocol: Option<&str>) -> Result<ResponseHead, HttpError> {
        let head = ResponseHead::new(101)
            .header("Upgrade", "websocket")?
            .header("Connection", "Upgrade")?
            .header("Sec-WebSocket-Accept", &self.accept())?;
        match protocol {
            None => Ok(head),
            Some(p) if self.offers(p) => head.header("Sec-WebSocket-Protocol", p),
            Some(_) => Err(HttpError::InvalidResponseHeader),
        }
    }
}

/// RFC 6455 §4.2.2 item 5.4: base64(SHA-1(key + [`WS_GUID`])).
pub fn accept_key(key: &str) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key.as_bytes());
    sha.update(WS_GUID.as_bytes());
    base64::encode(&sha.digest().bytes())
}

/// Is `head` a WebSocket opening handshake (RFC 6455 §4.2.1; SPEC RT-9)?
///
/// - `Ok(None)`: not an attempt at all: no `websocket` token in `Upgrade`
///   and no `Sec-WebSocket-*` field. Serve it as plain HTTP.
/// - `Ok(Some(upgrade))`: a valid handshake.
/// - `Err(e)`: an attempt that is refused, checked in this order: not GET
///   (405), not HTTP/1.1 (400), no `Host` (400), no `websocket` in
///   `Upgrade` (400), no `upgrade` in `Connection` (400), a
///   `Sec-WebSocket-Version` other than exactly one `13` (426, answer with
///   [`HttpError::to_response`], which carries `Sec-WebSocket-Version: 13`),
///   a `Sec-WebSocket-Key` that is missing, repeated or not the base64 of
///   16 bytes (400), more than one `Origin` or a subprotocol that is not a
///   token (400). The version is checked before the key: a client speaking
///   another version may use another key format, and 426 tells it what to
///   retry with.
pub fn websocket_upgrade(head: &RequestHead) -> Result<Option<WsUpgrade>, HttpError> {
    let attempt = head.has_token("Upgrade", "websocket")
        || head.fields().iter().any(|f| {
            f.name
                .get(..14)
                .is_some_and(|p| p.eq_ignore_ascii_case("sec-websocket-"))
        });
    if !attempt {
        return Ok(None);
    }
    if head.method() != &Method::Get {
        return Err(HttpError::WsMethodNotAllowed);
    }
    if head.version() != Version::Http11 {
        return Err(HttpError::WsNotHttp11);
    }
    if head.host().is_none_or(str::is_empty) {
        return Err(HttpError::WsMissingHost);
    }
    if !head.has_token("Upgrade", "websocket") {
        return Err(HttpError::WsMissingUpgrade);
    }
    if !head.has_token("Connection", "upgrade") {
        return Err(HttpError::WsMissingConnectionUpgrade);
    }
    if head.count("Sec-WebSocket-Version") != 1
        || head.header("Sec-WebSocket-Version") != Some("13")
    {
        return Err(HttpError::WsUnsupportedVersion);
    }
    let key = match head.header("Sec-WebSocket-Key") {
        Some(k) if head.count("Sec-WebSocket-Key") == 1 => k,
        _ => return Err(HttpError::WsInvalidKey),
    };
    if base64::decode(key).is_none_or(|raw| raw.len() != 16) {
        return Err(HttpError::WsInvalidKey);
    }
    let origin = match head.count("Origin") {
        0 => None,
        1 => Some(
            head.header("Origin")
                .ok_or(HttpError::WsInvalidHandshakeField)?,
        ),
        _ => return Err(HttpError::WsInvalidHandshakeField),
    };
    all_utf8(head, "Sec-WebSocket-Protocol")?;
    all_utf8(head, "Sec-WebSocket-Extensions")?;
    let protocols: Vec<String> = head
        .list("Sec-WebSocket-Protocol")
        .map(str::to_owned)
        .collect();
    if !protocols.iter().all(|p| is_token(p)) {
        return Err(HttpError::WsInvalidHandshakeField);
    }
    Ok(Some(WsUpgrade {
        key: key.to_owned(),
        protocols,
        origin: origin.map(str::to_owned),
        extensions: head
            .list("Sec-WebSocket-Extensions")
            .map(str::to_owned)
            .collect(),
    }))
}

/// Every field named `name` has a UTF-8 value (else [`RequestHead::list`]
/// would skip it silently).
fn all_utf8(head: &RequestHead, name: &str) -> Result<(), HttpError> {
    if head.headers(name).count() == head.count(name) {
        Ok(())
    } else {
        Err(HttpError::WsInvalidHandshakeField)
    }
}
