//! SPEC RT-12 end to end through `dtp serve`: a browser's subscription is
//! registered on the realtime port, a publisher's notification reaches the
//! local push service (tests/python/push_service.py: VAPID checked with
//! `cryptography`, the body decrypted with `http_ece`), and a push
//! service's 410 makes the registration read GONE, after which it is
//! never sent to again.
//!
//! The venv comes from tests/python/install.sh on first use. The test
//! skips, saying so, only when python3 is not installed at all.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(dead_code, reason = "this test uses serve() only")]
mod external;
#[path = "../../engine/gateway/tests/push/service.rs"]
mod service;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use dtp_realtime::push::{WebPushHint, base64url_encode, private_key_pem};
use serde_json::{Value, json};

use external::serve;
use service::{Browser, SUBJECT, Service, VAPID, python, scratch};

/// The embedded configuration's demo client: reads, publishes, on loopback.
const TOKEN: &str = "dtp-demo-token";

/// One request on its own connection: (status, body as JSON or Null).
fn call(base: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let addr = base
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} /v1{path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn register(base: &str, browser: &Browser, port: u16) -> String {
    register_to(base, browser, port, &[])
}

/// [`register`], bound to hinted `streams`.
fn register_to(base: &str, browser: &Browser, port: u16, streams: &[&str]) -> String {
    let sub = browser.subscription(port);
    let body = json!({
        "streams": streams,
        "installationId": format!("install-{}", browser.name),
        "subscription": {
            "endpoint": sub.endpoint(),
            "expirationTime": null,
            "keys": {
                "p256dh": base64url_encode(sub.keys().p256dh()),
                "auth": base64url_encode(sub.keys().auth()),
            },
        },
    });
    let (status, v) = call(base, "POST", "/push/subscriptions", &body);
    assert_eq!(status, 201, "{v}");
    v["registrationId"].as_str().unwrap().to_owned()
}

fn notify(base: &str, id: &str) -> (u16, Value) {
    let body = json!({
        "registrationId": id,
        "notificationType": "demo.alert",
        "routeIntent": "demo.open",
        "ttlSeconds": 600,
        "urgency": "normal",
        "topic": "demo",
    });
    call(base, "POST", "/push/notifications", &body)
}

#[test]
fn a_registered_subscription_receives_a_decryptable_notification_and_a_410_reads_gone() {
    let Some(py) = python() else { return };
    let ok = Browser::new("ok", 0x42, json!([{"status": 201}]));
    let gone = Browser::new("gone", 0x43, json!([{"status": 410}]));
    let bound = Browser::new("bound", 0x44, json!([{"status": 201}]));
    let mut service = Service::start(&py, "serve", &[&ok, &gone, &bound]);
    let dir = scratch("serve-config");
    let key = dir.join("vapid.key");
    std::fs::write(&key, private_key_pem(&VAPID).unwrap()).unwrap();
    let config = dir.join("dtp.toml");
    std::fs::write(
        &config,
        format!(
            "[realtime.push]\nvapid_key = {:?}\nsubject = {SUBJECT:?}\nextra_roots = [{:?}]\nallow_private_endpoints = true\nstore = \"push.jsonl\"\n",
            key.display().to_string(),
            service.ca.display().to_string(),
        ),
    )
    .unwrap();
    let mut server = serve(&["--config", config.to_str().unwrap()]);
    let mut base = server.base.clone();

    let ok_id = register(&base, &ok, service.port);
    let (status, v) = notify(&base, &ok_id);
    assert_eq!(status, 202, "{v}");
    let sent_id = v["notificationId"].as_str().unwrap().to_owned();
    let record = service.record();
    assert_eq!(record["sub"], "ok", "{record}");
    assert_eq!(record["vapid"], "ok", "{record}");
    assert_eq!(record["error"], Value::Null, "{record}");
    assert_eq!(record["headers"]["Content-Encoding"], "aes128gcm");
    assert_eq!(record["headers"]["Topic"], "demo");
    let hint = WebPushHint::decode(record["plaintext"].as_str().unwrap().as_bytes()).unwrap();
    assert_eq!(hint.notification_id, sent_id);
    assert_eq!(hint.notification_type, "demo.alert");
    assert_eq!(hint.route_intent, "demo.open");

    let gone_id = register(&base, &gone, service.port);
    assert_eq!(notify(&base, &gone_id).0, 202);
    let record = service.record();
    assert_eq!(
        (record["sub"].as_str(), record["status"].as_u64()),
        (Some("gone"), Some(410))
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, v) = call(
            &base,
            "GET",
            &format!("/push/subscriptions/{gone_id}"),
            &Value::Null,
        );
        assert_eq!(status, 200, "{v}");
        if v["state"] == "GONE" {
            break;
        }
        assert!(Instant::now() < deadline, "never GONE: {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, v) = notify(&base, &gone_id);
    assert_eq!(
        (status, v["error"].as_str()),
        (410, Some("REGISTRATION_GONE"))
    );
    // The other registration is untouched, and the push service saw the
    // GONE one exactly once: the next request it records is this one.
    let (status, v) = call(
        &base,
        "GET",
        &format!("/push/subscriptions/{ok_id}"),
        &Value::Null,
    );
    assert_eq!((status, v["state"].as_str()), (200, Some("ACTIVE")));
    assert_eq!(notify(&base, &ok_id).0, 202);
    assert_eq!(service.record()["sub"], "ok");

    // A registration bound to the demo stream (hinted in the embedded
    // configuration) gets a hint of each publication there.
    let bound_id = register_to(&base, &bound, service.port, &["demo"]);
    let publication = json!({"eventType": "demo.tick", "payload": {"n": 1}});
    let (status, v) = call(&base, "POST", "/streams/demo/events", &publication);
    assert_eq!(status, 201, "{v}");
    let record = service.record();
    assert_eq!(
        (record["sub"].as_str(), record["vapid"].as_str()),
        (Some("bound"), Some("ok")),
        "{record}"
    );
    assert_eq!(record["headers"]["Topic"], "demo");
    let hint = WebPushHint::decode(record["plaintext"].as_str().unwrap().as_bytes()).unwrap();
    assert_eq!(
        (hint.notification_type.as_str(), hint.route_intent.as_str()),
        ("demo.alert", "demo.open")
    );
    let (_, v) = call(
        &base,
        "GET",
        &format!("/push/subscriptions/{bound_id}"),
        &Value::Null,
    );
    assert_eq!(v["streams"], json!(["demo"]));

    // Killed (SIGKILL) and started again on the same store: every answered
    // registration is there as it was, and is sent to.
    let before = server.stderr.lock().unwrap().clone();
    drop(server);
    server = serve(&["--config", config.to_str().unwrap()]);
    base = server.base.clone();
    let state = |id: &str| {
        call(
            &base,
            "GET",
            &format!("/push/subscriptions/{id}"),
            &Value::Null,
        )
        .1
    };
    assert_eq!(state(&ok_id)["state"], "ACTIVE");
    assert_eq!(state(&gone_id)["state"], "GONE");
    assert_eq!(state(&bound_id)["streams"], json!(["demo"]));
    assert_eq!(notify(&base, &ok_id).0, 202);
    let record = service.record();
    assert_eq!(
        (record["sub"].as_str(), record["vapid"].as_str()),
        (Some("ok"), Some("ok")),
        "{record}"
    );
    assert!(WebPushHint::decode(record["plaintext"].as_str().unwrap().as_bytes()).is_ok());
    let (status, v) = call(&base, "POST", "/streams/demo/events", &publication);
    assert_eq!(status, 201, "{v}");
    assert_eq!(service.record()["sub"], "bound");
    let store = std::fs::read_to_string(dir.join("push.jsonl")).unwrap();
    assert!(
        !store.contains("/push/ok") && !store.contains(TOKEN),
        "{store}"
    );
    // Neither the endpoint nor the keys reach the log.
    let log = before + &server.stderr.lock().unwrap();
    assert!(
        !log.contains("/push/ok") && !log.contains("/push/gone"),
        "{log}"
    );
    assert!(
        !log.contains(&base64url_encode(ok.secret.keys().auth())),
        "{log}"
    );
}
