//! SPEC RT-12 against code we did not write: the push sender
//! (`dtp_gateway::push`) posts to a local push service
//! (tests/python/push_service.py: Python's `http.server` and `ssl` on
//! loopback, with a CA this test makes) that verifies each VAPID JWT's
//! ES256 signature, `aud` and `exp` with `cryptography` and decrypts each
//! body with `http_ece`, the reference RFC 8188/8291 implementation
//! pywebpush uses; it answers 201, 410, 429 or 503 per subscription as
//! told. A unit-level check feeds the request bytes the sender writes to
//! the same decryption, with no network between.
//!
//! The venv comes from tests/python/install.sh on first use. The tests
//! skip, saying so, only when python3 is not installed at all. The service
//! and its helpers are in push/service.rs, shared with the end-to-end test
//! through `dtp serve`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dtp_gateway::push::{PushDone, PushJob, PushSender, PushSenderConfig, SendError};
use dtp_realtime::push::{
    AssociationEpoch, EphemeralKey, Outcome, Outgoing, Poll, PushSubscription, PushTarget,
    RegistrationState, Registry, RegistryConfig, RetryPolicy, Subscribed, SubscriptionId, Urgency,
    VapidCache, VapidKey, WebPushHint, base64url_encode, prepare, write_request,
};
use serde_json::Value;

#[path = "push/service.rs"]
mod service;

use service::{Browser, SUBJECT, Service, VAPID, python, script};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn hint(id: &str) -> WebPushHint {
    let now = now_ms();
    WebPushHint {
        notification_type: "demo.alert".into(),
        notification_id: id.into(),
        association_epoch: "ae-1".into(),
        release_epoch: "r-1".into(),
        issued_at_ms: now,
        expires_at_ms: now + 600_000,
        route_intent: "demo.open".into(),
    }
}

fn sender(service: &Service, allow_private: bool, policy: RetryPolicy) -> PushSender {
    let mut config = PushSenderConfig::new(VapidKey::from_bytes(&VAPID).unwrap(), SUBJECT);
    config.extra_roots = vec![service.ca.clone()];
    config.allow_private_endpoints = allow_private;
    config.workers = 2;
    config.policy = policy;
    PushSender::start(config, Arc::new(|| {})).unwrap()
}

fn job(id: u64, sub: SubscriptionId, browser: &Browser, port: u16) -> PushJob {
    PushJob {
        id,
        subscription_id: sub,
        subscription: browser.subscription(port),
        hint: hint(&format!("n-{id}")),
        urgency: Urgency::Low,
        topic: Some("demo".into()),
    }
}

fn wait(sender: &PushSender) -> PushDone {
    sender
        .wait_finished(Duration::from_secs(60))
        .expect("a delivery did not finish within a minute")
}

/// Checks one record: VAPID valid, the RFC 8030 headers, and the body
/// decrypted by http_ece to exactly the hint sent.
fn assert_verified(record: &Value, sent: &WebPushHint) {
    assert_eq!(record["vapid"], "ok", "{record}");
    assert_eq!(record["error"], Value::Null, "{record}");
    assert_eq!(record["headers"]["Content-Encoding"], "aes128gcm");
    assert_eq!(record["headers"]["Urgency"], "low");
    assert_eq!(record["headers"]["Topic"], "demo");
    let ttl: u64 = record["headers"]["TTL"].as_str().unwrap().parse().unwrap();
    assert!((1..=600).contains(&ttl), "{record}");
    let plaintext = record["plaintext"].as_str().unwrap();
    assert_eq!(&WebPushHint::decode(plaintext.as_bytes()).unwrap(), sent);
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_backoff_ms: 20,
        max_backoff_ms: 50,
        max_ttl_secs: 3_600,
    }
}

#[test]
fn delivered_notifications_decrypt_with_http_ece_under_a_valid_vapid_jwt() {
    let Some(py) = python() else { return };
    let ok = Browser::new("ok", 0x42, serde_json::json!([{"status": 201}]));
    let mut service = Service::start(&py, "ok", &[&ok]);
    let mut push = sender(&service, true, fast());
    let jobs: Vec<PushJob> = (1..=4)
        .map(|i| job(i, SubscriptionId::from_raw(7), &ok, service.port))
        .collect();
    let hints: Vec<WebPushHint> = jobs.iter().map(|j| j.hint.clone()).collect();
    for j in jobs {
        push.submit(j).unwrap();
    }
    let mut ids = Vec::new();
    for _ in 0..4 {
        let done = wait(&push);
        assert_eq!(done.result, Ok(Outcome::Delivered { status: 201 }));
        assert_eq!(done.attempts, 1);
        ids.push(done.id);
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4]);
    let mut seen = Vec::new();
    let mut connections = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let record = service.record();
        connections.insert(record["peer_port"].as_u64().unwrap());
        let id = record["plaintext"].as_str().map(|p| {
            WebPushHint::decode(p.as_bytes())
                .unwrap()
                .notification_id
                .clone()
        });
        let sent = hints
            .iter()
            .find(|h| Some(&h.notification_id) == id.as_ref())
            .unwrap_or_else(|| panic!("record of no hint sent: {record}"));
        assert_verified(&record, sent);
        seen.push(sent.notification_id.clone());
    }
    assert_eq!(seen.len(), 4);
    assert_eq!(push.in_flight(), 0);
    // Keep-alive: each of the two workers sent its jobs over one
    // connection.
    assert!(connections.len() <= 2, "{connections:?}");
}

#[test]
fn rate_limits_and_unavailability_are_retried_no_earlier_than_retry_after() {
    let Some(py) = python() else { return };
    let busy = Browser::new(
        "busy",
        0x43,
        serde_json::json!([
            {"status": 429, "retry_after": "1"},
            {"status": 503, "retry_after": "2"},
            {"status": 201}
        ]),
    );
    let mut service = Service::start(&py, "busy", &[&busy]);
    let mut push = sender(&service, true, fast());
    let j = job(1, SubscriptionId::from_raw(1), &busy, service.port);
    let sent = j.hint.clone();
    push.submit(j).unwrap();
    let done = wait(&push);
    assert_eq!(done.result, Ok(Outcome::Delivered { status: 201 }));
    assert_eq!(done.attempts, 3);
    let records: Vec<Value> = (0..3).map(|_| service.record()).collect();
    let t: Vec<f64> = records.iter().map(|r| r["t"].as_f64().unwrap()).collect();
    // Each answer went out after its request arrived, and the sender waited
    // at least Retry-After from the answer: so at least that between
    // arrivals, whatever the backoff (20–50 ms here) said.
    assert!(t[1] - t[0] >= 1.0, "429 Retry-After: 1 not honoured: {t:?}");
    assert!(t[2] - t[1] >= 2.0, "503 Retry-After: 2 not honoured: {t:?}");
    for r in &records {
        assert_verified(r, &sent);
    }
}

#[test]
fn server_errors_and_dead_ports_are_retried_within_the_attempt_bound() {
    let Some(py) = python() else { return };
    let down = Browser::new("down", 0x44, serde_json::json!([{"status": 503}]));
    let mut service = Service::start(&py, "down", &[&down]);
    let mut push = sender(&service, true, fast());
    push.submit(job(1, SubscriptionId::from_raw(1), &down, service.port))
        .unwrap();
    let done = wait(&push);
    assert_eq!(
        done.result,
        Ok(Outcome::RetriesExhausted {
            attempts: 3,
            last_status: Some(503)
        })
    );
    for n in 0..3 {
        assert_eq!(service.record()["n"], n);
    }
    // Nothing listens there: every attempt is a connection error.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    push.submit(job(2, SubscriptionId::from_raw(2), &down, closed))
        .unwrap();
    assert_eq!(
        wait(&push).result,
        Ok(Outcome::RetriesExhausted {
            attempts: 3,
            last_status: None
        })
    );
}

#[test]
fn a_gone_subscription_is_sent_once_then_reads_gone() {
    let Some(py) = python() else { return };
    let gone = Browser::new("gone", 0x45, serde_json::json!([{"status": 410}]));
    let ok = Browser::new("ok", 0x46, serde_json::json!([{"status": 201}]));
    let mut service = Service::start(&py, "gone", &[&gone, &ok]);
    let mut push = sender(&service, true, fast());

    // The owner's side: a registry with both registrations.
    let mut registry = Registry::new(RegistryConfig::default());
    let epoch = AssociationEpoch::from_random([1; 16]);
    registry.associate(&"alice", epoch.clone()).unwrap();
    let mut register = |b: &Browser| match registry
        .subscribe(&"alice", &epoch, b.subscription(service.port))
        .unwrap()
    {
        Subscribed::Created(id) => id,
        other => panic!("{other:?}"),
    };
    let gone_id = register(&gone);
    let ok_id = register(&ok);

    push.submit(job(1, gone_id, &gone, service.port)).unwrap();
    let done = wait(&push);
    assert_eq!(
        done.result,
        Ok(Outcome::Gone {
            subscription: gone_id,
            status: 410
        })
    );
    assert_eq!(done.attempts, 1);
    if let Ok(Outcome::Gone { subscription, .. }) = done.result {
        registry.remove(subscription);
    }
    assert_eq!(registry.state(gone_id), Some(RegistrationState::Gone));
    // The owner sends only to live registrations: the next notification
    // reaches the other one only.
    let live: Vec<SubscriptionId> = registry.live(&"alice").map(|(id, _)| id).collect();
    assert_eq!(live, [ok_id]);
    for id in live {
        push.submit(job(2, id, &ok, service.port)).unwrap();
    }
    assert_eq!(wait(&push).result, Ok(Outcome::Delivered { status: 201 }));
    // Exactly one request reached the gone subscription.
    let first = service.record();
    let second = service.record();
    assert_eq!(
        (first["sub"].as_str(), first["n"].as_u64()),
        (Some("gone"), Some(0))
    );
    assert_eq!(second["sub"], "ok");
}

#[test]
fn sends_in_flight_are_bounded_and_a_waiting_retry_counts() {
    let Some(py) = python() else { return };
    // Told to come back in a minute: the job stays in flight, waiting.
    let later = Browser::new(
        "later",
        0x49,
        serde_json::json!([{"status": 503, "retry_after": "60"}]),
    );
    let mut service = Service::start(&py, "bound", &[&later]);
    let mut config = PushSenderConfig::new(VapidKey::from_bytes(&VAPID).unwrap(), SUBJECT);
    config.extra_roots = vec![service.ca.clone()];
    config.allow_private_endpoints = true;
    config.max_in_flight = 1;
    config.policy = fast();
    let mut push = PushSender::start(config, Arc::new(|| {})).unwrap();
    push.submit(job(1, SubscriptionId::from_raw(1), &later, service.port))
        .unwrap();
    // Its first request reached the service, and no answer ends it yet.
    assert_eq!(service.record()["status"], 503);
    assert_eq!(push.in_flight(), 1);
    let refused = push
        .submit(job(2, SubscriptionId::from_raw(1), &later, service.port))
        .unwrap_err();
    assert_eq!(refused.id, 2);
    assert!(push.finished().is_empty());
}

#[test]
fn the_ssrf_guard_refuses_loopback_endpoints_before_sending() {
    let Some(py) = python() else { return };
    let ok = Browser::new("ok", 0x47, serde_json::json!([{"status": 201}]));
    let mut service = Service::start(&py, "ssrf", &[&ok]);
    let mut guarded = sender(&service, false, fast());
    guarded
        .submit(job(1, SubscriptionId::from_raw(1), &ok, service.port))
        .unwrap();
    let done = wait(&guarded);
    assert!(
        matches!(done.result, Err(SendError::Refused(_))),
        "{:?}",
        done.result
    );
    assert_eq!(done.attempts, 0);
    // The next request the service sees is the one the open sender makes.
    let mut open = sender(&service, true, fast());
    open.submit(job(2, SubscriptionId::from_raw(1), &ok, service.port))
        .unwrap();
    assert_eq!(wait(&open).result, Ok(Outcome::Delivered { status: 201 }));
    let record = service.record();
    let plaintext = record["plaintext"].as_str().unwrap();
    assert_eq!(
        WebPushHint::decode(plaintext.as_bytes())
            .unwrap()
            .notification_id,
        "n-2"
    );
}

#[test]
fn the_senders_request_bytes_decrypt_with_http_ece() {
    let Some(py) = python() else { return };
    let browser = Browser::new("unit", 0x48, Value::Null);
    let endpoint = "https://push.example.net:8443/wpush/v2/unit?x=1";
    let subscription = PushSubscription::new(endpoint, browser.secret.keys().clone()).unwrap();
    let sent = hint("n-unit");
    let now = now_ms();
    let ephemeral = EphemeralKey::from_bytes(&[0x33; 32]).unwrap();
    let mut delivery = prepare(
        Outgoing {
            hint: &sent,
            subscription_id: SubscriptionId::from_raw(1),
            subscription: &subscription,
            ephemeral: &ephemeral,
            salt: [7; 16],
            urgency: Urgency::Low,
            topic: Some("demo".into()),
            policy: fast(),
        },
        now,
    )
    .unwrap();
    let Poll::Transmit(request) = delivery.poll(now) else {
        panic!("no request")
    };
    let target = PushTarget::parse(endpoint).unwrap();
    let mut vapid = VapidCache::new(VapidKey::from_bytes(&VAPID).unwrap(), SUBJECT).unwrap();
    let auth = vapid.authorization(target.origin(), now / 1_000).unwrap();
    let bytes = write_request(&request, &target, auth);

    let decrypt = |auth: &[u8], origin: &str| -> Value {
        let mut child = Command::new(&py)
            .arg(script())
            .args(["decrypt", "--private"])
            .arg(base64url_encode(&browser.private))
            .arg("--auth")
            .arg(base64url_encode(auth))
            .arg("--vapid-public")
            .arg(base64url_encode(
                VapidKey::from_bytes(&VAPID).unwrap().public_key(),
            ))
            .args(["--origin", origin])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let record = decrypt(
        browser.secret.keys().auth(),
        "https://push.example.net:8443",
    );
    assert_eq!(record["request_line"], "POST /wpush/v2/unit?x=1 HTTP/1.1");
    assert_eq!(record["host"], "push.example.net:8443");
    assert_eq!(record["length_ok"], true);
    assert_verified(&record, &sent);
    // The checks are not vacuous: another origin fails the JWT's `aud`,
    // another auth secret fails the decryption.
    let other = decrypt(browser.secret.keys().auth(), "https://push.example.org");
    assert!(
        other["vapid"].as_str().unwrap().starts_with("aud "),
        "{other}"
    );
    let other = decrypt(&[0; 16], "https://push.example.net:8443");
    assert_eq!(other["plaintext"], Value::Null, "{other}");
    assert!(
        other["error"].as_str().unwrap().starts_with("decrypt: "),
        "{other}"
    );
}
