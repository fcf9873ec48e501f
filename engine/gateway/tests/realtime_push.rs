//! SPEC RT-12 over real sockets: the Web Push endpoints of the realtime
//! front end (`/v1/push/...`) against the engine with the realtime plane
//! on its control thread, serving Web Push through a stand-in sender that
//! records each job and reports the outcomes a test gives it (the real
//! sender is tested against a push service in push_sender.rs, and end to
//! end through `dtp serve` in the tools' push_serve.rs).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "realtime/client.rs"]
mod client;
#[path = "realtime/server.rs"]
mod server;

use std::sync::{Arc, Mutex};

use dtp_gateway::push::{PushDone, PushJob};
use dtp_gateway::realtime::{
    PushPlane, PushPort, PushSettings, PushStore, PushWake, RtLimits, StreamHint, load_store,
};
use dtp_realtime::push::{
    Outcome, ReceiverSecret, RegistryConfig, Urgency, WebPushHint, base64url_encode,
};
use serde_json::{Value, json};

use client::{Response, bearer, eventually, login_cookie, publish, request};
use server::{ADMIN, BACKENDS, ORIGIN, PUBLISHER, READER, Server, start_with};

/// What the stand-in sender saw and will report.
#[derive(Default)]
struct Seen {
    jobs: Vec<PushJob>,
    done: Vec<PushDone>,
    /// The sender is at its in-flight ceiling: jobs are given back.
    full: bool,
}

struct Fake(Arc<Mutex<Seen>>);

impl PushPort for Fake {
    fn submit(&mut self, job: PushJob) -> Result<(), Box<PushJob>> {
        let mut seen = self.0.lock().unwrap();
        if seen.full {
            return Err(Box::new(job));
        }
        seen.jobs.push(job);
        Ok(())
    }

    fn finished(&mut self) -> Vec<PushDone> {
        std::mem::take(&mut self.0.lock().unwrap().done)
    }
}

struct Rig {
    srv: Server,
    seen: Arc<Mutex<Seen>>,
    wake: PushWake,
    metrics: Arc<dtp_gateway::realtime::PushMetrics>,
}

impl Rig {
    fn start(backend: dtp_transports::BackendPreference, per_client: usize) -> Self {
        Self::start_stored(backend, per_client, None)
    }

    /// [`Rig::start`], registrations persisted in the store at `store`
    /// (path, this run's salt byte).
    fn start_stored(
        backend: dtp_transports::BackendPreference,
        per_client: usize,
        store: Option<(&std::path::Path, u8)>,
    ) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let wake = PushWake::default();
        let settings = PushSettings {
            notification_types: vec!["demo.alert".into()],
            route_intents: vec!["demo.open".into()],
            allow_private_endpoints: false,
            registry: RegistryConfig {
                max_per_principal: per_client,
                ..RegistryConfig::default()
            },
            release_epoch: "test-1".into(),
            streams: vec![StreamHint {
                stream: "ticks".into(),
                notification_type: "demo.alert".into(),
                route_intent: "demo.open".into(),
                ttl_secs: 300,
                urgency: Urgency::High,
                topic: Some("ticks".into()),
            }],
            clients: ["admin", "reader", "publisher"].map(String::from).to_vec(),
            key: [9; 32],
            storage_key: [store.map_or(10, |(_, salt)| salt); 32],
        };
        let mut push = PushPlane::new(settings, Box::new(Fake(seen.clone())), wake.clone());
        if let Some((path, _)) = store {
            let lines = load_store(path).unwrap();
            let writer = PushStore::open(path, wake.callback()).unwrap();
            push = push.with_store(writer, [11; 32]);
            push.restore(lines);
        }
        let metrics = push.metrics();
        let srv = start_with(backend, RtLimits::default(), |p| p.with_push(push));
        Self {
            srv,
            seen,
            wake,
            metrics,
        }
    }

    fn call(&self, line: &str, auth: &str, body: &Value) -> Response {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let head = format!("{line} HTTP/1.1\r\n{auth}Content-Type: application/json");
        request(self.srv.addr, &head, &body)
    }

    fn register(&self, auth: &str, body: &Value) -> Response {
        self.call("POST /v1/push/subscriptions", auth, body)
    }

    fn state(&self, auth: &str, id: &str) -> Response {
        self.call(
            &format!("GET /v1/push/subscriptions/{id}"),
            auth,
            &Value::Null,
        )
    }

    fn revoke(&self, auth: &str, id: &str) -> Response {
        self.call(
            &format!("DELETE /v1/push/subscriptions/{id}"),
            auth,
            &Value::Null,
        )
    }

    fn notify(&self, auth: &str, body: &Value) -> Response {
        self.call("POST /v1/push/notifications", auth, body)
    }

    /// Reports `done` as the sender would and wakes the control thread.
    fn finish(&self, done: PushDone) {
        self.seen.lock().unwrap().done.push(done);
        (self.wake.callback())();
    }
}

/// A browser's `PushSubscription.toJSON()` with `installationId`.
fn subscription(host: &str, seed: u8) -> Value {
    let secret = ReceiverSecret::new(&[seed; 32], [seed ^ 0x5a; 16]).unwrap();
    json!({
        "installationId": format!("inst-{seed}"),
        "subscription": {
            "endpoint": format!("https://{host}/push/{seed}"),
            "expirationTime": null,
            "keys": {
                "p256dh": base64url_encode(secret.keys().p256dh()),
                "auth": base64url_encode(secret.keys().auth()),
            },
        },
    })
}

fn notification(id: &str, kind: &str, intent: &str) -> Value {
    json!({
        "registrationId": id,
        "notificationType": kind,
        "routeIntent": intent,
        "ttlSeconds": 600,
        "urgency": "low",
        "topic": "demo",
    })
}

#[test]
fn register_read_revoke_and_notify_through_the_realtime_port() {
    for backend in BACKENDS {
        let rig = Rig::start(backend, 4);
        let reader = bearer(READER);
        let sub = subscription("push.example.com", 1);
        // Register: 201 after commit, then the same again is the same id.
        let r = rig.register(&reader, &sub);
        assert_eq!(r.status, 201, "{}", r.text());
        let first = r.json();
        let id = first["registrationId"].as_str().unwrap().to_owned();
        assert!(first["associationEpoch"].as_str().is_some(), "{first}");
        assert!(first["sessionBindingEpoch"].as_str().is_some(), "{first}");
        let again = rig.register(&reader, &sub);
        assert_eq!(again.status, 200, "{}", again.text());
        assert_eq!(again.json(), first);
        assert!(!again.text().contains("push.example.com"));

        // GET: ACTIVE, no key material; another client cannot read it.
        let r = rig.state(&reader, &id);
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert_eq!(v["state"], "ACTIVE");
        assert_eq!(v["associationEpoch"], first["associationEpoch"]);
        let text = r.text();
        for secret in ["p256dh", "auth", "endpoint", "push.example.com"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert_eq!(rig.state(&bearer(PUBLISHER), &id).status, 404);
        // A forged id is unknown.
        let forged = format!("{}.AAAAAAAAAAAAAAAA", id.split('.').next().unwrap());
        assert_eq!(
            rig.state(&reader, &forged).refusal(),
            "UNKNOWN_REGISTRATION"
        );

        // A notification: 202, the hint handed to the sender.
        let r = rig.notify(
            &bearer(PUBLISHER),
            &notification(&id, "demo.alert", "demo.open"),
        );
        assert_eq!(r.status, 202, "{}", r.text());
        let notification_id = r.json()["notificationId"].as_str().unwrap().to_owned();
        {
            let seen = rig.seen.lock().unwrap();
            assert_eq!(seen.jobs.len(), 1);
            let job = &seen.jobs[0];
            assert_eq!(job.hint.notification_id, notification_id);
            assert_eq!(job.hint.notification_type, "demo.alert");
            assert_eq!(job.hint.route_intent, "demo.open");
            assert_eq!(job.hint.association_epoch, first["associationEpoch"]);
            assert_eq!(job.hint.expires_at_ms - job.hint.issued_at_ms, 600_000);
            assert_eq!(job.urgency, Urgency::Low);
            assert_eq!(job.topic.as_deref(), Some("demo"));
            assert!(WebPushHint::decode(&job.hint.encode().unwrap()).is_ok());
        }
        // Unknown type or intent: refused with a closed code.
        let r = rig.notify(
            &bearer(PUBLISHER),
            &notification(&id, "demo.other", "demo.open"),
        );
        assert_eq!(
            (r.status, r.refusal().as_str()),
            (400, "UNKNOWN_NOTIFICATION_TYPE")
        );
        let r = rig.notify(
            &bearer(PUBLISHER),
            &notification(&id, "demo.alert", "demo.close"),
        );
        assert_eq!(
            (r.status, r.refusal().as_str()),
            (400, "UNKNOWN_ROUTE_INTENT")
        );
        // A reader is no publisher.
        let r = rig.notify(&reader, &notification(&id, "demo.alert", "demo.open"));
        assert_eq!((r.status, r.refusal().as_str()), (403, "FORBIDDEN"));

        // DELETE twice: 204 twice; then REVOKED, and notifications refused.
        for _ in 0..2 {
            let r = rig.revoke(&reader, &id);
            assert_eq!(r.status, 204, "{}", r.text());
            assert!(r.body.is_empty());
        }
        assert_eq!(rig.state(&reader, &id).json()["state"], "REVOKED");
        let r = rig.notify(
            &bearer(PUBLISHER),
            &notification(&id, "demo.alert", "demo.open"),
        );
        assert_eq!(
            (r.status, r.refusal().as_str()),
            (410, "REGISTRATION_REVOKED")
        );
        assert_eq!(
            rig.seen.lock().unwrap().jobs.len(),
            1,
            "nothing more was sent"
        );
    }
}

#[test]
fn a_gone_outcome_marks_the_registration_gone_and_is_counted() {
    let rig = Rig::start(BACKENDS[1], 4);
    let reader = bearer(READER);
    let id = rig
        .register(&reader, &subscription("push.example.com", 2))
        .json()["registrationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let publisher = bearer(ADMIN);
    assert_eq!(
        rig.notify(&publisher, &notification(&id, "demo.alert", "demo.open"))
            .status,
        202
    );
    let job = rig.seen.lock().unwrap().jobs.remove(0);
    assert_eq!(
        rig.metrics
            .in_flight
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    rig.finish(PushDone {
        id: job.id,
        subscription_id: job.subscription_id,
        attempts: 2,
        result: Ok(Outcome::Gone {
            subscription: job.subscription_id,
            status: 410,
        }),
    });
    eventually("the registration reads GONE", || {
        rig.state(&reader, &id).json()["state"] == "GONE"
    });
    let m = &rig.metrics;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((n(&m.gone), n(&m.retried), n(&m.in_flight)), (1, 1, 0));
    let r = rig.notify(&publisher, &notification(&id, "demo.alert", "demo.open"));
    assert_eq!((r.status, r.refusal().as_str()), (410, "REGISTRATION_GONE"));
    // DELETE of a gone registration is a success too, and it stays GONE.
    assert_eq!(rig.revoke(&reader, &id).status, 204);
    assert_eq!(rig.state(&reader, &id).json()["state"], "GONE");
}

#[test]
fn subscriptions_are_validated_and_bounded_per_client() {
    let rig = Rig::start(BACKENDS[1], 2);
    let reader = bearer(READER);
    let code = |r: Response| (r.status, r.refusal());
    // SSRF rule: loopback, private and link-local literals, and localhost.
    for host in [
        "127.0.0.1:8443",
        "10.1.2.3",
        "169.254.0.1",
        "localhost",
        "a.localhost",
    ] {
        let r = rig.register(&reader, &subscription(host, 3));
        assert_eq!(code(r), (400, "ENDPOINT_REFUSED".into()), "{host}");
    }
    let mut plain = subscription("push.example.com", 3);
    plain["subscription"]["endpoint"] = json!("http://push.example.com/x");
    assert_eq!(
        code(rig.register(&reader, &plain)).1,
        "INVALID_SUBSCRIPTION"
    );
    let mut short = subscription("push.example.com", 3);
    short["subscription"]["keys"]["auth"] = json!(base64url_encode(&[1; 15]));
    assert_eq!(
        code(rig.register(&reader, &short)).1,
        "INVALID_SUBSCRIPTION"
    );
    let mut compressed = subscription("push.example.com", 3);
    compressed["subscription"]["keys"]["p256dh"] = json!(base64url_encode(&[2; 33]));
    assert_eq!(
        code(rig.register(&reader, &compressed)).1,
        "INVALID_SUBSCRIPTION"
    );
    let mut extra = subscription("push.example.com", 3);
    extra["web_push"] = json!(8030);
    assert_eq!(code(rig.register(&reader, &extra)).1, "MALFORMED_REQUEST");
    // No credentials: 401.
    assert_eq!(
        code(rig.register("", &subscription("push.example.com", 3))).0,
        401
    );
    // Two per client, then LIMIT_EXCEEDED.
    for seed in [4, 5] {
        assert_eq!(
            rig.register(&reader, &subscription("push.example.com", seed))
                .status,
            201
        );
    }
    let r = rig.register(&reader, &subscription("push.example.com", 6));
    assert_eq!(code(r), (409, "LIMIT_EXCEEDED".into()));
    // Wrong method: 405 with Allow.
    let r = rig.call("PUT /v1/push/subscriptions", &reader, &Value::Null);
    assert_eq!((r.status, r.header("allow")), (405, Some("POST")));
}

#[test]
fn a_cookie_session_needs_the_csrf_header_and_an_allowed_origin() {
    let rig = Rig::start(BACKENDS[1], 4);
    let cookie = login_cookie(rig.srv.addr, READER);
    let sub = subscription("push.example.com", 7);
    let r = rig.register(&cookie, &sub);
    assert_eq!((r.status, r.refusal().as_str()), (403, "FORBIDDEN"));
    let evil = format!("{cookie}X-DTP-CSRF: 1\r\nOrigin: http://evil.example\r\n");
    assert_eq!(rig.register(&evil, &sub).status, 403);
    let good = format!("{cookie}X-DTP-CSRF: 1\r\nOrigin: {ORIGIN}\r\n");
    let r = rig.register(&good, &sub);
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["registrationId"].as_str().unwrap().to_owned();
    // The session binding is the login session's: the same on reading,
    // another for another login of the same client or for its token.
    let binding = r.json()["sessionBindingEpoch"].clone();
    assert!(
        binding.as_str().is_some_and(|b| b.starts_with("s.")),
        "{binding}"
    );
    assert_eq!(
        rig.state(&cookie, &id).json()["sessionBindingEpoch"],
        binding
    );
    let other = login_cookie(rig.srv.addr, READER);
    assert_ne!(
        rig.state(&other, &id).json()["sessionBindingEpoch"],
        binding
    );
    assert_ne!(
        rig.state(&bearer(READER), &id).json()["sessionBindingEpoch"],
        binding
    );
    // Reading needs no CSRF header; revoking does.
    assert_eq!(rig.state(&cookie, &id).json()["state"], "ACTIVE");
    assert_eq!(rig.revoke(&cookie, &id).status, 403);
    assert_eq!(rig.revoke(&good, &id).status, 204);
}

#[test]
fn a_full_sender_is_a_503_queue_overflow_and_nothing_is_counted_in_flight() {
    let rig = Rig::start(BACKENDS[1], 4);
    let reader = bearer(READER);
    let r = rig.register(&reader, &subscription("push.example.com", 8));
    let id = r.json()["registrationId"].as_str().unwrap().to_owned();
    rig.seen.lock().unwrap().full = true;
    let r = rig.notify(
        &bearer(ADMIN),
        &notification(&id, "demo.alert", "demo.open"),
    );
    assert_eq!((r.status, r.refusal().as_str()), (503, "QUEUE_OVERFLOW"));
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        (n(&rig.metrics.in_flight), n(&rig.metrics.accepted)),
        (0, 0)
    );
    rig.seen.lock().unwrap().full = false;
    let r = rig.notify(
        &bearer(ADMIN),
        &notification(&id, "demo.alert", "demo.open"),
    );
    assert_eq!(r.status, 202, "{}", r.text());
}

/// SPEC RT-12: a hinted stream sends one hint per publication to each
/// registration bound to it, with the stream's configured hint; an
/// unbound registration, a revoked one and an unhinted stream get none.
#[test]
fn a_hinted_stream_sends_each_publication_to_the_registrations_bound_to_it() {
    let rig = Rig::start(BACKENDS[0], 4);
    let reader = bearer(READER);
    let code = |r: Response| (r.status, r.refusal());
    let mut bound = subscription("push.example.com", 11);
    bound["streams"] = json!(["ticks"]);
    let r = rig.register(&reader, &bound);
    assert_eq!(r.status, 201, "{}", r.text());
    let bound_id = r.json()["registrationId"].as_str().unwrap().to_owned();
    assert_eq!(
        rig.state(&reader, &bound_id).json()["streams"],
        json!(["ticks"])
    );
    let r = rig.register(&reader, &subscription("push.example.com", 12));
    assert_eq!(r.status, 201, "{}", r.text());
    // A stream the client may not read; one that sends no hints; a list
    // that is not one.
    let mut other = subscription("push.example.com", 13);
    other["streams"] = json!(["state"]);
    assert_eq!(
        code(rig.register(&reader, &other)),
        (403, "FORBIDDEN".into())
    );
    assert_eq!(
        code(rig.register(&bearer(ADMIN), &other)),
        (400, "UNKNOWN_STREAM".into())
    );
    other["streams"] = json!(["ticks", "ticks"]);
    assert_eq!(code(rig.register(&reader, &other)).1, "MALFORMED_REQUEST");

    for n in 1..=3 {
        let r = publish(
            rig.srv.addr,
            PUBLISHER,
            "ticks",
            "tick",
            &format!("{{\"n\":{n}}}"),
        );
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let r = publish(rig.srv.addr, ADMIN, "state", "changed", "{}");
    assert!(r.status < 300, "{}", r.text());
    let epoch = rig.state(&reader, &bound_id).json()["associationEpoch"].clone();
    {
        let seen = rig.seen.lock().unwrap();
        assert_eq!(
            seen.jobs.len(),
            3,
            "one hint per publication, to the bound one only"
        );
        let mut ids: Vec<&str> = Vec::new();
        for job in &seen.jobs {
            assert_eq!(
                job.subscription_id.get().to_string(),
                bound_id.split('.').next().unwrap()
            );
            assert_eq!(job.hint.notification_type, "demo.alert");
            assert_eq!(job.hint.route_intent, "demo.open");
            assert_eq!(job.hint.association_epoch, epoch);
            assert_eq!(job.hint.expires_at_ms - job.hint.issued_at_ms, 300_000);
            assert_eq!(job.urgency, Urgency::High);
            assert_eq!(job.topic.as_deref(), Some("ticks"));
            ids.push(&job.hint.notification_id);
        }
        ids.dedup();
        assert_eq!(ids.len(), 3, "each hint has its own id");
    }
    // Revoked: the next publication sends nothing.
    assert_eq!(rig.revoke(&reader, &bound_id).status, 204);
    let r = publish(rig.srv.addr, PUBLISHER, "ticks", "tick", "{\"n\":4}");
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(rig.seen.lock().unwrap().jobs.len(), 3);
}

/// SPEC RT-12: with a store, registrations outlive a restart: the same id
/// reads ACTIVE with its streams, a revoked one stays REVOKED, ids are not
/// issued twice, and the file holds no endpoint or key in the clear.
#[test]
fn registrations_outlive_a_restart_with_a_store() {
    let dir = std::env::temp_dir().join(format!("dtp-push-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("push.jsonl");
    let reader = bearer(READER);
    let mut kept = subscription("push.example.com", 21);
    kept["streams"] = json!(["ticks"]);
    let (kept_id, revoked_id, (epoch, binding)) = {
        let rig = Rig::start_stored(BACKENDS[0], 4, Some((&path, 1)));
        let r = rig.register(&reader, &kept);
        assert_eq!(r.status, 201, "{}", r.text());
        let v = r.json();
        let r = rig.register(&reader, &subscription("push.example.com", 22));
        let revoked = r.json()["registrationId"].as_str().unwrap().to_owned();
        assert_eq!(rig.revoke(&reader, &revoked).status, 204);
        (
            v["registrationId"].as_str().unwrap().to_owned(),
            revoked,
            (
                v["associationEpoch"].clone(),
                v["sessionBindingEpoch"].clone(),
            ),
        )
    };
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("push.example.com"), "{text}");
    let secret = ReceiverSecret::new(&[21; 32], [21 ^ 0x5a; 16]).unwrap();
    assert!(!text.contains(&base64url_encode(secret.keys().auth())));

    let rig = Rig::start_stored(BACKENDS[1], 4, Some((&path, 2)));
    let v = rig.state(&reader, &kept_id).json();
    assert_eq!(v["state"], "ACTIVE", "{v}");
    assert_eq!(v["associationEpoch"], epoch);
    assert_eq!(
        v["sessionBindingEpoch"], binding,
        "a token's session outlives a restart"
    );
    assert_eq!(v["streams"], json!(["ticks"]));
    assert_eq!(rig.state(&reader, &revoked_id).json()["state"], "REVOKED");
    // The same subscription again is the same registration.
    let r = rig.register(&reader, &kept);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["registrationId"], kept_id.as_str());
    // It is sent to, with its subscription opened from the store.
    let r = rig.notify(
        &bearer(PUBLISHER),
        &notification(&kept_id, "demo.alert", "demo.open"),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let r = publish(rig.srv.addr, PUBLISHER, "ticks", "tick", "{\"n\":1}");
    assert_eq!(r.status, 201, "{}", r.text());
    {
        let seen = rig.seen.lock().unwrap();
        assert_eq!(
            seen.jobs.len(),
            2,
            "the notification and the hinted publication"
        );
        for job in &seen.jobs {
            assert_eq!(
                job.subscription.endpoint(),
                "https://push.example.com/push/21"
            );
            assert_eq!(job.subscription.keys(), secret.keys());
        }
    }
    // A new registration takes a new number.
    let r = rig.register(&reader, &subscription("push.example.com", 23));
    assert_eq!(r.status, 201, "{}", r.text());
    let n = |id: &str| id.split('.').next().unwrap().parse::<u64>().unwrap();
    let fresh = r.json()["registrationId"].as_str().unwrap().to_owned();
    assert!(n(&fresh) > n(&revoked_id), "{fresh} after {revoked_id}");
    let _ = std::fs::remove_dir_all(&dir);
}
