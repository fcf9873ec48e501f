//! Field accessors: keep-alive, query, path segments, cookies, bearer
//! tokens, entity tags, `Last-Event-ID`, and base64 (RFC 4648 §10).

use super::*;

/// A GET for `target` with `fields` (each `Name: value`).
fn get(version: &str, target: &str, fields: &[&str]) -> RequestHead {
    let mut wire = format!("GET {target} HTTP/{version}\r\n");
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

#[test]
fn keep_alive_matrix() {
    let cases: [(&str, &[&str], bool); 12] = [
        ("1.1", &[], true),
        ("1.1", &["Connection: close"], false),
        ("1.1", &["Connection: CLOSE"], false),
        ("1.1", &["Connection: upgrade, Close"], false),
        ("1.1", &["Connection: keep-alive"], true),
        (
            "1.1",
            &["Connection: keep-alive", "Connection: close"],
            false,
        ),
        ("1.1", &["Connection: closed"], true),
        ("1.0", &[], false),
        ("1.0", &["Connection: keep-alive"], true),
        ("1.0", &["Connection: Keep-Alive , foo"], true),
        ("1.0", &["Connection: keep-alive, close"], false),
        ("1.0", &["Connection: keep-alive-ish"], false),
    ];
    for (v, fields, want) in cases {
        assert_eq!(get(v, "/", fields).keep_alive(), want, "{v} {fields:?}");
    }
}

#[test]
fn query_params_are_decoded() {
    let h = get(
        "1.1",
        "/p?a=1&b=x+y%20z&empty=&flag&a=2&bad=%zz&pct=%E2%82%AC&k%61y=v&h=%4",
        &[],
    );
    assert_eq!(h.query_param("a").as_deref(), Some("1"));
    assert_eq!(h.query_param("b").as_deref(), Some("x y z"));
    assert_eq!(h.query_param("empty").as_deref(), Some(""));
    assert_eq!(h.query_param("flag").as_deref(), Some(""));
    assert_eq!(h.query_param("bad"), None);
    assert_eq!(h.query_param("h"), None);
    assert_eq!(h.query_param("pct").as_deref(), Some("\u{20ac}"));
    assert_eq!(h.query_param("kay").as_deref(), Some("v"));
    assert_eq!(h.query_param("missing"), None);
    assert_eq!(get("1.1", "/p", &[]).query_param("a"), None);
    // Not UTF-8 after decoding; a malformed name is skipped, not fatal.
    let h = get("1.1", "/p?x=%FF&%G=1&y=2", &[]);
    assert_eq!(h.query_param("x"), None);
    assert_eq!(h.query_param("y").as_deref(), Some("2"));
}

#[test]
fn path_segments_are_decoded_and_weird_paths_refused() {
    let h = get("1.1", "/v1/streams/a%20b+c/events?q", &[]);
    assert_eq!(
        h.path_segments().unwrap(),
        ["v1", "streams", "a b+c", "events"]
    );
    assert_eq!(
        get("1.1", "/", &[]).path_segments().unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        get("1.1", "http://h", &[]).path_segments().unwrap(),
        Vec::<String>::new()
    );
    for target in [
        "/a//b",
        "/a/",
        "/a/../b",
        "/a/./b",
        "/a/%2e%2E/b",
        "/a/%2F",
        "/a/%00",
        "/a/%zz",
        "/a/%FF",
    ] {
        assert_eq!(get("1.1", target, &[]).path_segments(), None, "{target}");
    }
    let star = parse_request_head(b"OPTIONS * HTTP/1.1\r\n\r\n", &HttpLimits::default());
    assert_eq!(star.unwrap().unwrap().0.path_segments(), None);
}

#[test]
fn cookies_are_found_by_exact_name() {
    let h = get(
        "1.1",
        "/",
        &[
            "Cookie: a=1; sid=\"xyz\";b=2",
            "Cookie: novalue; c = 3 ",
            "Cookie: a=late",
        ],
    );
    assert_eq!(h.cookie("a"), Some("1"));
    assert_eq!(h.cookie("sid"), Some("xyz"));
    assert_eq!(h.cookie("b"), Some("2"));
    assert_eq!(h.cookie("c"), Some("3"));
    assert_eq!(h.cookie("A"), None);
    assert_eq!(h.cookie("novalue"), None);
    assert_eq!(get("1.1", "/", &[]).cookie("a"), None);
}

#[test]
fn bearer_tokens() {
    let token = |fields: &[&str]| get("1.1", "/", fields).bearer_token().map(str::to_owned);
    assert_eq!(
        token(&["Authorization: Bearer abc.DEF-1_~+/=="]).as_deref(),
        Some("abc.DEF-1_~+/==")
    );
    assert_eq!(
        token(&["authorization: bEaReR   t0k"]).as_deref(),
        Some("t0k")
    );
    assert_eq!(token(&["Authorization: Basic dXNlcjpwYXNz"]), None);
    assert_eq!(token(&["Authorization: Bearer"]), None);
    assert_eq!(token(&["Authorization: Bearer "]), None);
    assert_eq!(token(&["Authorization: Bearer a b"]), None);
    assert_eq!(token(&["Authorization: Bearer ==="]), None);
    assert_eq!(token(&["Authorization: Bearer a=b"]), None);
    assert_eq!(
        token(&["Authorization: Bearer a", "Authorization: Bearer b"]),
        None
    );
    assert_eq!(token(&[]), None);
}

#[test]
fn if_none_match_lists() {
    let inm = |fields: &[&str]| get("1.1", "/", fields).if_none_match();
    let strong = |t: &str| EntityTag {
        weak: false,
        tag: t.into(),
    };
    let weak = |t: &str| EntityTag {
        weak: true,
        tag: t.into(),
    };
    assert_eq!(inm(&[]), None);
    assert_eq!(inm(&["If-None-Match: *"]), Some(IfNoneMatch::Any));
    assert_eq!(
        inm(&[
            "If-None-Match: \"a\", W/\"b\" ,,\"c,d\"",
            "If-None-Match: \"\""
        ]),
        Some(IfNoneMatch::Tags(vec![
            strong("a"),
            weak("b"),
            strong("c,d"),
            strong("")
        ]))
    );
    for bad in [
        "a",
        "\"a",
        "\"a\" \"b\"",
        "w/\"a\"",
        "W/ \"a\"",
        "\"a\"b",
        "*, \"a\"",
        "",
        "\"a b\"",
    ] {
        let field = format!("If-None-Match: {bad}");
        assert_eq!(inm(&[&field]), None, "{bad}");
    }
    assert_eq!(inm(&["If-None-Match: *", "If-None-Match: \"a\""]), None);
    let list = inm(&["If-None-Match: W/\"v1\", \"v2\""]).unwrap();
    assert!(list.matches(&strong("v1")));
    assert!(list.matches(&weak("v2")));
    assert!(!list.matches(&strong("v3")));
    assert!(IfNoneMatch::Any.matches(&strong("anything")));
}

#[test]
fn entity_tags_parse_and_render() {
    assert_eq!(EntityTag::parse("W/\"x\"").unwrap().to_string(), "W/\"x\"");
    assert_eq!(EntityTag::strong("r-12").unwrap().to_string(), "\"r-12\"");
    assert_eq!(EntityTag::strong("a\"b"), None);
    assert_eq!(EntityTag::strong("a b"), None);
    assert_eq!(EntityTag::parse("\"x\"\"y\""), None);
}

#[test]
fn last_event_id() {
    assert_eq!(
        get("1.1", "/", &["Last-Event-ID: c-42"]).last_event_id(),
        Some("c-42")
    );
    assert_eq!(get("1.1", "/", &["last-event-id:"]).last_event_id(), None);
    assert_eq!(get("1.1", "/", &[]).last_event_id(), None);
}

#[test]
fn base64_rfc4648_vectors() {
    let vectors: [(&[u8], &str); 7] = [
        (b"", ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
        (b"fooba", "Zm9vYmE="),
        (b"foobar", "Zm9vYmFy"),
    ];
    for (raw, text) in vectors {
        assert_eq!(base64_encode(raw), text);
        assert_eq!(base64_decode(text).as_deref(), Some(raw));
    }
    assert_eq!(base64_encode(&[0xfb, 0xff, 0xbf]), "+/+/");
    for bad in [
        "Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zg==Zg==", "Zm 9", "Zm9v\n", "=Zm9", "Zm-_",
    ] {
        assert_eq!(base64_decode(bad), None, "{bad}");
    }
}
