//! The opening handshake of DTP over WebSocket (RFC 6455 §4), both sides,
//! sans-IO: what to answer a request head, what to send as a client and
//! whether a response accepts it. The heads are parsed by `dtp_codec::http`.

use bytes::BytesMut;
use dtp_codec::http::{
    HttpError, ParsedResponse, RequestHead, accept_key, base64_encode, simple_response,
    websocket_upgrade,
};

/// The subprotocol DTP is carried under (`Sec-WebSocket-Protocol`).
pub const SUBPROTOCOL: &str = "dtp.v1";

/// The server's answer to a request head on a WebSocket listener whose
/// path is `path`: the 101 (the connection is open) or a refusal to write
/// before closing.
pub(crate) fn answer(head: &RequestHead, path: &str) -> Result<BytesMut, BytesMut> {
    let refuse =
        |status: u16, why: &str| Err(simple_response(status, "text/plain", why.as_bytes(), false));
    if head.path() != path {
        return refuse(404, "no DTP WebSocket endpoint at this path\n");
    }
    let upgrade = match websocket_upgrade(head) {
        Ok(Some(upgrade)) => upgrade,
        Ok(None) => return refuse(426, "this endpoint speaks DTP over WebSocket only\n"),
        Err(e) => return Err(e.to_response()),
    };
    if !upgrade.offers(SUBPROTOCOL) {
        return refuse(400, "Sec-WebSocket-Protocol must offer dtp.v1\n");
    }
    match upgrade.response(Some(SUBPROTOCOL)) {
        Ok(head) => Ok(head.to_bytes()),
        Err(e) => Err(e.to_response()),
    }
}

/// A request head that could not be read: the refusal to write.
pub(crate) fn refusal(e: HttpError) -> BytesMut {
    e.to_response()
}

/// The client's opening request for `path` on `host`, with `nonce` as the
/// key's 16 bytes; returns the request and the key.
pub(crate) fn request(host: &str, path: &str, nonce: [u8; 16]) -> (Vec<u8>, String) {
    let key = base64_encode(&nonce);
    let text = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
    );
    (text.into_bytes(), key)
}

/// Whether `resp` accepts the handshake made with `key` (RFC 6455 §4.1:
/// 101, `Upgrade: websocket`, `Connection: Upgrade`, the key's accept
/// value, and the subprotocol asked for). The error says what was wrong.
pub(crate) fn accepted(resp: &ParsedResponse, key: &str) -> Result<(), &'static str> {
    let is = |name: &str, want: &str| {
        resp.headers(name)
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(want))
    };
    if resp.status() != 101 {
        return Err("the server did not switch protocols");
    }
    if !is("Upgrade", "websocket") || !is("Connection", "upgrade") {
        return Err("the response lacks Upgrade: websocket or Connection: Upgrade");
    }
    if resp.header("Sec-WebSocket-Accept") != Some(accept_key(key).as_str()) {
        return Err("the response's Sec-WebSocket-Accept does not match the key");
    }
    if resp.header("Sec-WebSocket-Protocol") != Some(SUBPROTOCOL) {
        return Err("the server did not choose the dtp.v1 subprotocol");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;
    use dtp_codec::http::{HttpLimits, ResponseLimits, parse_request_head, parse_response_head};

    fn head(text: &str) -> RequestHead {
        parse_request_head(text.as_bytes(), &HttpLimits::default())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn a_client_request_is_answered_with_101_that_the_client_accepts() {
        let (req, key) = request("127.0.0.1:1", "/dtp", [7; 16]);
        let req = head(std::str::from_utf8(&req).unwrap());
        let answer = answer(&req, "/dtp").unwrap();
        let (resp, n) = parse_response_head(&answer, &ResponseLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(n, answer.len());
        accepted(&resp, &key).unwrap();
        // Another key's answer is not accepted.
        let (_, other) = request("127.0.0.1:1", "/dtp", [8; 16]);
        assert!(accepted(&resp, &other).is_err());
    }

    #[test]
    fn wrong_paths_plain_requests_and_missing_subprotocols_are_refused() {
        let (req, _) = request("h", "/dtp", [1; 16]);
        let text = std::str::from_utf8(&req).unwrap();
        let status = |b: BytesMut| std::str::from_utf8(&b[9..12]).unwrap().to_owned();
        assert_eq!(status(answer(&head(text), "/other").unwrap_err()), "404");
        let plain = head("GET /dtp HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(status(answer(&plain, "/dtp").unwrap_err()), "426");
        let other = text.replace("dtp.v1", "realtime.v1");
        assert_eq!(status(answer(&head(&other), "/dtp").unwrap_err()), "400");
    }
}
