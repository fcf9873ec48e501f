//! HTTP status mapping of the realtime endpoints (SPEC RT-8, RT-11, RT-14):
//! authentication, authorisation, routing, publication bodies, bad request
//! heads, keep-alive.

use crate::client::{Http, bearer, exchange, publication, request};
use crate::server::{ADMIN, BACKENDS, PUBLISHER, READER, Server, start_default};

/// `method path` with `extra` header lines (no blank line).
fn call(
    srv: &Server,
    method: &str,
    path: &str,
    extra: &str,
    body: &[u8],
) -> crate::client::Response {
    let head = format!("{method} {path} HTTP/1.1\r\n{extra}");
    request(srv.addr, head.trim_end(), body)
}

#[test]
fn authentication_and_authorisation_are_checked_on_every_endpoint() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let json = "Content-Type: application/json\r\n";
        let body = publication("tick", "{}");
        for (method, path) in [
            ("GET", "/v1/streams/ticks/sse"),
            ("GET", "/v1/streams/ticks/snapshot"),
            ("POST", "/v1/streams/ticks/events"),
            ("POST", "/v1/streams/ticks/cut"),
        ] {
            for creds in ["", "Authorization: Bearer not-a-token-at-all\r\n"] {
                let r = call(
                    &srv,
                    method,
                    path,
                    &format!("{creds}{json}"),
                    body.as_bytes(),
                );
                assert_eq!(r.status, 401, "{method} {path} {creds:?}");
                assert_eq!(r.header("www-authenticate"), Some("Bearer"));
                assert_eq!(r.refusal(), "AUTH_REQUIRED");
            }
        }
        // READER may not read `state`; READER may not publish, PUBLISHER
        // may not cut.
        for (method, path, token) in [
            ("GET", "/v1/streams/state/sse", READER),
            ("GET", "/v1/streams/state/snapshot", READER),
            ("POST", "/v1/streams/ticks/events", READER),
            ("POST", "/v1/streams/state/events", PUBLISHER),
            ("POST", "/v1/streams/ticks/cut", PUBLISHER),
        ] {
            let r = call(
                &srv,
                method,
                path,
                &format!("{}{json}", bearer(token)),
                body.as_bytes(),
            );
            assert_eq!(r.status, 403, "{method} {path} {token}");
            assert_eq!(r.refusal(), "FORBIDDEN");
        }
        // The session cookie from a login authenticates like the bearer
        // token; the token itself as the cookie's value does not (SPEC
        // RT-9), nor does an altered session id.
        let id = crate::client::login_cookie(srv.addr, READER);
        let cookie = format!("Cookie: theme=dark; {}", id.trim_start_matches("Cookie: "));
        let r = call(&srv, "GET", "/v1/streams/ticks/snapshot", &cookie, b"");
        assert_eq!(r.status, 200, "{}", r.text());
        let token = format!("Cookie: dtp_session={READER}\r\n");
        let r = call(&srv, "GET", "/v1/streams/ticks/snapshot", &token, b"");
        assert_eq!(r.status, 401, "{}", r.text());
        let altered = id.replacen("v1.", "v1.9", 1);
        let r = call(&srv, "GET", "/v1/streams/ticks/snapshot", &altered, b"");
        assert_eq!(r.status, 401, "{}", r.text());
        let r = call(
            &srv,
            "POST",
            "/v1/streams/ticks/events",
            &format!("{}{json}", bearer(PUBLISHER)),
            body.as_bytes(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
    }
}

#[test]
fn unknown_paths_and_streams_are_404_and_wrong_methods_405_with_allow() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let admin = format!("{}Content-Type: application/json\r\n", bearer(ADMIN));
        let body = publication("tick", "{}");
        for (method, path) in [
            ("GET", "/v1/streams/nope/sse"),
            ("GET", "/v1/streams/nope/snapshot"),
            ("POST", "/v1/streams/nope/events"),
            ("POST", "/v1/streams/nope/cut"),
            ("GET", "/v1/streams/ticks"),
            ("GET", "/v2/health"),
            ("GET", "/v1"),
        ] {
            let r = call(&srv, method, path, &admin, body.as_bytes());
            assert_eq!(r.status, 404, "{method} {path}: {}", r.text());
        }
        for (method, path, allow) in [
            ("POST", "/v1/streams/ticks/sse", "GET"),
            ("PUT", "/v1/streams/ticks/snapshot", "GET"),
            ("DELETE", "/v1/ws", "GET"),
            ("GET", "/v1/streams/ticks/events", "POST"),
            ("GET", "/v1/streams/ticks/cut", "POST"),
        ] {
            let r = call(&srv, method, path, &admin, b"");
            assert_eq!(r.status, 405, "{method} {path}: {}", r.text());
            assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
        }
        let r = call(&srv, "GET", "/v1/health", "", b"");
        assert_eq!((r.status, r.text().as_str()), (200, "{\"status\":\"ok\"}"));
    }
}

#[test]
fn publication_bodies_are_checked_exactly() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let post = |ctype: &str, body: &[u8]| {
            let extra = format!("{}{ctype}", bearer(ADMIN));
            call(&srv, "POST", "/v1/streams/ticks/events", &extra, body)
        };
        let json = "Content-Type: application/json\r\n";
        let ok = publication("tick", "{\"n\":1}");
        for ctype in [
            "",
            "Content-Type: text/plain\r\n",
            "Content-Type: application/jsonx\r\n",
        ] {
            let r = post(ctype, ok.as_bytes());
            assert_eq!(r.status, 415, "{ctype:?}");
            assert_eq!(r.refusal(), "UNSUPPORTED");
        }
        let deep = format!(
            "{{\"eventType\":\"tick\",\"payload\":{{\"a\":{}1{}}}}}",
            "[".repeat(40),
            "]".repeat(40)
        );
        let malformed: [&[u8]; 9] = [
            br#"{"eventType":"tick","payload":{},"extra":1}"#,
            br#"{"eventType":"tick"}"#,
            br#"{"eventType":"tick","payload":[1]}"#,
            br#"{"eventType":"tick","payload":"x"}"#,
            br#"{"eventType":"tick","payload":null}"#,
            b"{\"eventType\":\"tick\",\"payload\":{\"s\":\"\xff\xfe\"}}",
            deep.as_bytes(),
            br#"{"eventType":"tick","payload":{}"#,
            b"not json",
        ];
        for body in malformed {
            let r = post(json, body);
            assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
            assert_eq!(
                r.refusal(),
                "MALFORMED_EVENT",
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let r = post(json, publication("nope", "{}").as_bytes());
        assert_eq!(r.status, 400);
        assert_eq!(r.refusal(), "MAPPING_CONTRACT_VIOLATION");
        // None of the refused ones took a sequence.
        let r = post(
            "Content-Type: application/json; charset=utf-8\r\n",
            ok.as_bytes(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        assert_eq!(r.json()["sequence"], "1");
    }
}

#[test]
fn a_publication_with_a_duplicate_key_is_refused() {
    // SPEC RT-3/RT-4: exact-key schemas fail closed; the codec's decoders
    // refuse duplicate keys, so the publication endpoint must too (a JSON
    // object with a key twice is ambiguous: parsers keep the first or the
    // last).
    for backend in BACKENDS {
        let srv = start_default(backend);
        let extra = format!("{}Content-Type: application/json\r\n", bearer(ADMIN));
        for body in [
            &br#"{"eventType":"tick","eventType":"big","payload":{}}"#[..],
            br#"{"eventType":"tick","payload":{"n":1,"n":2}}"#,
        ] {
            let r = call(&srv, "POST", "/v1/streams/ticks/events", &extra, body);
            assert_eq!(
                r.status,
                400,
                "{}: {}",
                String::from_utf8_lossy(body),
                r.text()
            );
            assert_eq!(r.refusal(), "MALFORMED_EVENT");
        }
    }
}

#[test]
fn an_oversize_body_is_refused_413_from_its_head() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        // The head alone: the refusal must not wait for the body.
        let head = format!(
            "POST /v1/streams/ticks/events HTTP/1.1\r\nHost: t\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            bearer(ADMIN),
            64 * 1024 + 1
        );
        let all = exchange(srv.addr, head.as_bytes());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].status, 413);
    }
}

#[test]
fn a_publication_whose_envelope_would_pass_64_kib_is_refused_without_a_gap() {
    // SPEC RT-13: an event is at most 64 KiB. The body fits the body
    // ceiling, but the envelope around the payload would not: the server
    // must refuse it (413) and must not spend a sequence on it (RT-6:
    // contiguous sequences), nor send subscribers an event they refuse.
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut sse = crate::ssec::Sse::ticks(srv.addr, "");
        let pad = "x".repeat(64 * 1024 - 60);
        let body = publication("tick", &format!("{{\"p\":\"{pad}\"}}"));
        assert!(body.len() <= 64 * 1024);
        let extra = format!("{}Content-Type: application/json\r\n", bearer(ADMIN));
        let r = call(
            &srv,
            "POST",
            "/v1/streams/ticks/events",
            &extra,
            body.as_bytes(),
        );
        assert_eq!(r.status, 413, "{}", r.text());
        assert_eq!(r.refusal(), "EVENT_TOO_LARGE");
        let cursors = crate::client::publish_ticks(srv.addr, 1..=1);
        let events = sse.wait_for(1).to_vec();
        assert_eq!(crate::ssec::sequences(&events), [1]);
        assert_eq!(events[0].id.as_deref(), Some(cursors[0].as_str()));
    }
}

#[test]
fn bad_request_heads_are_refused_and_the_connection_closed() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let huge = format!(
            "GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
            "a".repeat(17 * 1024)
        );
        let long_uri = format!("GET /v1/{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(5000));
        let cases: [(&[u8], u16); 7] = [
            (b"\x16\x03\x01\x02\x00garbage\r\n\r\n", 400),
            (b"GET /v1/health HTTP/2.0\r\nHost: t\r\n\r\n", 505),
            (b"GET /v1/health HTTP/1.1\r\n\r\n", 400),
            (huge.as_bytes(), 431),
            (long_uri.as_bytes(), 414),
            (b"POST /v1/streams/ticks/events HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            (b"GET /v1/health HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n", 400),
        ];
        for (raw, status) in cases {
            // exchange() reads to the orderly close: one answer, then EOF.
            let all = exchange(srv.addr, raw);
            let what = String::from_utf8_lossy(&raw[..raw.len().min(60)]).into_owned();
            assert_eq!(all.len(), 1, "{what}");
            assert_eq!(all[0].status, status, "{what}");
            // The same JSON refusal as every other answer of the port.
            all[0].refusal();
        }
    }
}

#[test]
fn pipelined_requests_on_one_connection_are_answered_in_order() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let auth = bearer(READER);
        // A request that waits for the control thread between two that do
        // not: the answers still come in request order.
        let raw = format!(
            "GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /v1/streams/ticks/snapshot HTTP/1.1\r\nHost: t\r\n{auth}\r\n\
             GET /v1/streams/nope/snapshot HTTP/1.1\r\nHost: t\r\n{auth}\r\n\
             GET /v1/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        );
        let all = exchange(srv.addr, raw.as_bytes());
        let statuses: Vec<u16> = all.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [200, 200, 403, 200]);
        assert_eq!(all[1].json()["streamId"], "ticks");
        assert_eq!(all[3].text(), "{\"status\":\"ok\"}");
        // And one after another on a kept connection.
        let mut c = Http::open(srv.addr);
        for _ in 0..3 {
            let r = c.call("GET /v1/health HTTP/1.1", b"");
            assert_eq!(r.status, 200);
            assert_eq!(r.header("connection"), None);
        }
    }
}

#[test]
fn refusals_say_what_was_wrong_and_echo_no_secret() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let json = "Content-Type: application/json\r\n";
        // The event type and stream the client named, nothing else.
        let r = crate::client::publish(srv.addr, ADMIN, "ticks", "nope", "{\"p4yl0ad\":1}");
        assert_eq!(
            (r.status, r.refusal(), r.message()),
            (
                400,
                "MAPPING_CONTRACT_VIOLATION".into(),
                "event type nope is not registered for stream ticks".into()
            )
        );
        assert!(!r.text().contains("p4yl0ad"), "{}", r.text());
        // A token or a stream id that is not a valid name is never shown.
        let secret = "s3cret-token-never-echoed";
        let long = format!("/v1/streams/{}%20{secret}/snapshot", "x".repeat(100));
        let cases = [
            (
                "GET",
                "/v1/streams/state/sse",
                READER,
                403,
                "FORBIDDEN",
                "this client may not read stream state",
            ),
            (
                "POST",
                "/v1/streams/ticks/cut",
                PUBLISHER,
                403,
                "FORBIDDEN",
                "this client may not administer stream ticks",
            ),
            (
                "GET",
                "/v1/streams/nope/snapshot",
                ADMIN,
                404,
                "UNSUPPORTED",
                "no stream nope",
            ),
            (
                "GET",
                &long,
                READER,
                403,
                "FORBIDDEN",
                "this client may not read stream (not a valid name)",
            ),
            (
                "GET",
                &long,
                ADMIN,
                404,
                "UNSUPPORTED",
                "stream ids are 1-64 characters of [A-Za-z0-9._-]",
            ),
            (
                "GET",
                "/v1/streams/ticks/sse",
                secret,
                401,
                "AUTH_REQUIRED",
                "a valid bearer token or session cookie is required",
            ),
        ];
        for (method, path, token, status, kind, message) in cases {
            let r = call(&srv, method, path, &format!("{}{json}", bearer(token)), b"");
            let got = (r.status, r.refusal(), r.message());
            assert_eq!(
                got,
                (status, kind.into(), message.into()),
                "{method} {path}"
            );
            assert!(!r.text().contains(secret), "{}", r.text());
        }
        let r = call(
            &srv,
            "POST",
            "/v1/streams/ticks/events",
            &format!("{}{json}", bearer(ADMIN)),
            b"{\"eventType\":\"tick\",\"payload\":{\"s3cret\":1},\"x\":2}",
        );
        assert_eq!(r.refusal(), "MALFORMED_EVENT");
        assert!(!r.text().contains("s3cret"), "{}", r.text());
        // A head the codec refuses: the same JSON form, its fixed reason.
        let all = exchange(srv.addr, b"GET /v1/health HTTP/2.0\r\nHost: t\r\n\r\n");
        assert_eq!(
            (all[0].status, all[0].refusal(), all[0].message()),
            (
                505,
                "UNSUPPORTED".into(),
                "only HTTP/1.0 and HTTP/1.1 are supported".into()
            )
        );
    }
}

#[test]
fn an_unknown_method_is_501_and_a_known_one_on_the_wrong_path_405() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        for path in ["/", "/v1/health", "/v1/streams/ticks/sse", "/v1/nope"] {
            let r = call(&srv, "BREW", path, &bearer(ADMIN), b"");
            assert_eq!(
                (r.status, r.refusal().as_str()),
                (501, "UNSUPPORTED"),
                "{path}"
            );
            assert_eq!(r.header("allow"), None);
        }
        for (method, path, allow) in [
            ("PUT", "/v1/streams/ticks/sse", "GET"),
            ("POST", "/", "GET"),
            ("DELETE", "/favicon.ico", "GET"),
            ("PATCH", "/v1/login", "POST"),
        ] {
            let r = call(&srv, method, path, &bearer(ADMIN), b"");
            assert_eq!(
                (r.status, r.refusal().as_str()),
                (405, "UNSUPPORTED"),
                "{method} {path}"
            );
            assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
            assert_eq!(r.message(), format!("this path takes {allow} only"));
        }
    }
}

#[test]
fn the_demo_page_shows_the_demo_token_and_has_an_icon() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let page = call(&srv, "GET", "/", "", b"");
        assert_eq!(page.status, 200);
        let html = page.text();
        assert!(
            html.contains("Bearer <span class=\"token\">dtp-demo-token</span>"),
            "{html}"
        );
        assert!(html.contains("<link rel=\"icon\" type=\"image/svg+xml\" href=\"data:"));
        // Tabs that open an endpoint directly ask for /favicon.ico.
        let icon = call(&srv, "GET", "/favicon.ico", "", b"");
        assert_eq!(icon.status, 200);
        assert_eq!(icon.header("content-type"), Some("image/svg+xml"));
        assert!(icon.text().starts_with("<svg "), "{}", icon.text());
    }
}

/// A request head trickled byte by byte (slowloris) holds its connection
/// no longer than the head timeout from its first byte, however often a
/// byte comes.
#[test]
fn a_trickled_request_head_is_cut_at_the_head_timeout() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    for backend in BACKENDS {
        let limits = dtp_gateway::realtime::RtLimits {
            head_timeout: Duration::from_millis(400),
            ..dtp_gateway::realtime::RtLimits::default()
        };
        let srv = crate::server::start(backend, limits);
        let mut s = crate::client::connect(srv.addr);
        let start = Instant::now();
        let mut closed = false;
        // A byte every 50 ms for up to 5 s: far past the 400 ms.
        for b in b"GET /v1/health HTTP/1.1\r\nX-Slow: "
            .iter()
            .chain([b'a'; 100].iter())
        {
            if s.write_all(&[*b]).is_err() {
                closed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            s.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 64];
            let gone = matches!(s.read(&mut buf), Ok(0));
            s.set_nonblocking(false).unwrap();
            if gone {
                closed = true;
                break;
            }
        }
        // The trickle lasts ~6.7 s; the keep-alive timeout alone (60 s)
        // would have kept the connection through all of it.
        assert!(
            closed,
            "{backend:?}: still open after {:?}",
            start.elapsed()
        );
    }
}
