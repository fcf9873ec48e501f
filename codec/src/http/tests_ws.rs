//! The WebSocket opening handshake (RFC 6455 §4.2.1–4.2.2).

use super::*;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

const VALID: &[&str] = &[
    "Host: server.example.com",
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Origin: http://example.com",
    "Sec-WebSocket-Protocol: chat, realtime.v1",
    "Sec-WebSocket-Version: 13",
];

fn request(request_line: &str, fields: &[&str]) -> RequestHead {
    let mut wire = format!("{request_line}\r\n");
    for f in fields {
        wire.push_str(f);
        wire.push_str("\r\n");
    }
    wire.push_str("\r\n");
    parse_request_head(wire.as_bytes(), &HttpLimits::default())
        .unwrap()
        .unwrap()
        .0
}

/// VALID with the field named like `replace`'s name replaced (or removed if
/// `replace` is just a name with a colon and nothing after).
fn with(replace: &str) -> Vec<String> {
    let name = replace.split(':').next().unwrap();
    let mut out: Vec<String> = VALID
        .iter()
        .filter(|f| !f.starts_with(&format!("{name}:")))
        .map(|f| f.to_string())
        .collect();
    if !replace.ends_with(':') {
        out.push(replace.to_owned());
    }
    out
}

fn upgrade(request_line: &str, fields: &[String]) -> Result<Option<WsUpgrade>, HttpError> {
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    websocket_upgrade(&request(request_line, &fields))
}

#[test]
fn rfc6455_accept_example() {
    // RFC 6455 §1.3 (the brief quoted it with a typo; this is the RFC's value).
    assert_eq!(accept_key(KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#[test]
fn the_rfc_example_handshake_is_valid() {
    let up = websocket_upgrade(&request("GET /chat HTTP/1.1", VALID))
        .unwrap()
        .unwrap();
    assert_eq!(
        up,
        WsUpgrade {
            key: KEY.into(),
            protocols: vec!["chat".into(), "realtime.v1".into()],
            origin: Some("http://example.com".into()),
            extensions: vec![],
        }
    );
    assert!(up.offers("realtime.v1"));
    assert!(!up.offers("REALTIME.V1"));
    let resp = up.response(Some("realtime.v1")).unwrap().to_bytes();
    assert_eq!(
        &resp[..],
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: realtime.v1\r\n\r\n"
    );
    assert_eq!(
        up.response(Some("other")),
        Err(HttpError::InvalidResponseHeader)
    );
    assert_eq!(up.response(None).unwrap().to_bytes().len(), resp.len() - 37);
}

#[test]
fn tokens_are_case_insensitive_and_lists_combine() {
    let fields = with("Connection: keep-alive, UPGRADE");
    let mut fields = [fields, vec!["upgrade: WebSocket".into()]].concat();
    fields.retain(|f| f != "Upgrade: websocket");
    fields.push("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits".into());
    fields.push("Sec-WebSocket-Protocol: third".into());
    let up = upgrade("GET /v1/ws HTTP/1.1", &fields).unwrap().unwrap();
    assert_eq!(up.protocols, ["chat", "realtime.v1", "third"]);
    assert_eq!(
        up.extensions,
        ["permessage-deflate; client_max_window_bits"]
    );
}

#[test]
fn plain_requests_are_not_upgrades() {
    assert_eq!(
        websocket_upgrade(&request("GET / HTTP/1.1", &["Host: h"])),
        Ok(None)
    );
    let h2c = [
        "Host: h",
        "Connection: Upgrade, HTTP2-Settings",
        "Upgrade: h2c",
    ];
    assert_eq!(
        websocket_upgrade(&request("GET / HTTP/1.1", &h2c)),
        Ok(None)
    );
    let post = ["Host: h", "Content-Length: 0"];
    assert_eq!(
        websocket_upgrade(&request("POST / HTTP/1.1", &post)),
        Ok(None)
    );
}

#[test]
fn refusals_with_their_status() {
    let all = with("Origin: http://example.com");
    let cases: Vec<(&str, Vec<String>, HttpError, u16)> = vec![
        (
            "POST /ws HTTP/1.1",
            all.clone(),
            HttpError::WsMethodNotAllowed,
            405,
        ),
        (
            "HEAD /ws HTTP/1.1",
            all.clone(),
            HttpError::WsMethodNotAllowed,
            405,
        ),
        ("GET /ws HTTP/1.0", all.clone(), HttpError::WsNotHttp11, 400),
        (
            "GET /ws HTTP/1.1",
            with("Host:"),
            HttpError::WsMissingHost,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Host: "),
            HttpError::WsMissingHost,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Upgrade:"),
            HttpError::WsMissingUpgrade,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Upgrade: h2c"),
            HttpError::WsMissingUpgrade,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Connection:"),
            HttpError::WsMissingConnectionUpgrade,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Connection: keep-alive"),
            HttpError::WsMissingConnectionUpgrade,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Version:"),
            HttpError::WsUnsupportedVersion,
            426,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Version: 8"),
            HttpError::WsUnsupportedVersion,
            426,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Version: 13, 8"),
            HttpError::WsUnsupportedVersion,
            426,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Key:"),
            HttpError::WsInvalidKey,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Key: abc"),
            HttpError::WsInvalidKey,
            400,
        ),
        // base64 of 15 and 17 bytes.
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA"),
            HttpError::WsInvalidKey,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAA="),
            HttpError::WsInvalidKey,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=!"),
            HttpError::WsInvalidKey,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Protocol: a b"),
            HttpError::WsInvalidHandshakeField,
            400,
        ),
        (
            "GET /ws HTTP/1.1",
            with("Sec-WebSocket-Protocol: a/b"),
            HttpError::WsInvalidHandshakeField,
            400,
        ),
    ];
    for (line, fields, want, status) in cases {
        let got = upgrade(line, &fields).unwrap_err();
        assert_eq!((got, got.status()), (want, status), "{line} {fields:?}");
    }
    let twice = [all.clone(), vec![format!("Sec-WebSocket-Key: {KEY}")]].concat();
    assert_eq!(
        upgrade("GET /ws HTTP/1.1", &twice),
        Err(HttpError::WsInvalidKey)
    );
    let origins = [
        all.clone(),
        vec!["Origin: http://a".into(), "Origin: http://b".into()],
    ]
    .concat();
    assert_eq!(
        upgrade("GET /ws HTTP/1.1", &origins),
        Err(HttpError::WsInvalidHandshakeField)
    );
    // A version header alone (no Upgrade) is an attempt, refused.
    let bare = ["Host: h", "Sec-WebSocket-Version: 13"];
    assert_eq!(
        websocket_upgrade(&request("GET / HTTP/1.1", &bare)),
        Err(HttpError::WsMissingUpgrade)
    );
}

#[test]
fn the_426_and_405_responses_carry_their_headers() {
    let r = HttpError::WsUnsupportedVersion.to_response();
    let text = std::str::from_utf8(&r).unwrap();
    let body = "unsupported WebSocket version; send Sec-WebSocket-Version: 13";
    assert_eq!(
        text,
        format!(
            "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n\
Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    );
    let r = HttpError::WsMethodNotAllowed.to_response();
    assert!(r.starts_with(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\n"));
}
