//! The delivery state machine, one test per provider-answer branch, and the
//! whole send path from hint to request.

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

const NOW: u64 = 1_700_000_000_000;
const ENDPOINT: &str = "https://push.example.net/push/abc";
const SUB_ID: SubscriptionId = SubscriptionId(7);
/// The largest random draw: the full jitter waits its whole ceiling.
const MAX: u64 = u64::MAX;

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_backoff_ms: 1_000,
        max_backoff_ms: 1_500,
        max_ttl_secs: 600,
    }
}

fn message(topic: Option<&str>) -> Message {
    Message {
        body: Bytes::from_static(b"ciphertext"),
        urgency: Urgency::Low,
        topic: topic.map(str::to_owned),
    }
}

fn delivery(expires_in_ms: u64) -> Delivery {
    Delivery::new(
        SUB_ID,
        ENDPOINT,
        message(None),
        NOW + expires_in_ms,
        policy(),
    )
    .unwrap()
}

/// Polls at `now` and expects a request; returns it.
fn transmit(d: &mut Delivery, now: u64) -> PushRequest {
    match d.poll(now) {
        Poll::Transmit(req) => req,
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn request_is_plain_data_with_the_rfc_headers() {
    let mut d = Delivery::new(
        SUB_ID,
        ENDPOINT,
        message(Some("order-7")),
        NOW + 3_600_000,
        policy(),
    )
    .unwrap();
    let req = transmit(&mut d, NOW);
    assert_eq!(req.method, "POST");
    assert_eq!(req.url, ENDPOINT);
    assert_eq!(
        req.headers,
        vec![
            ("TTL", "600".to_owned()),
            ("Content-Encoding", "aes128gcm".to_owned()),
            ("Urgency", "low".to_owned()),
            ("Topic", "order-7".to_owned()),
        ]
    );
    assert_eq!(req.body, Bytes::from_static(b"ciphertext"));
    assert_eq!(d.poll(NOW), Poll::AwaitingResponse);
    assert_eq!(d.attempts(), 1);
    assert_eq!(d.subscription(), SUB_ID);
    assert_eq!(
        format!("{req:?}"),
        r#"PushRequest { method: "POST", headers: ["TTL", "Content-Encoding", "Urgency", "Topic"], body_len: 10, .. }"#
    );
}

#[test]
fn urgencies_parse_exactly_their_header_values() {
    for u in [
        Urgency::VeryLow,
        Urgency::Low,
        Urgency::Normal,
        Urgency::High,
    ] {
        assert_eq!(Urgency::parse(u.as_str()), Some(u));
    }
    for bad in ["", "HIGH", "very_low", "urgent", " low"] {
        assert_eq!(Urgency::parse(bad), None, "{bad}");
    }
    assert_eq!(Urgency::default(), Urgency::Normal);
}

#[test]
fn ttl_never_outlives_the_hint() {
    let mut d = delivery(90_500);
    let req = transmit(&mut d, NOW);
    assert_eq!(req.headers[0], ("TTL", "90".to_owned()));
}

#[test]
fn accepted_statuses_deliver() {
    for status in [201, 202] {
        let mut d = delivery(60_000);
        transmit(&mut d, NOW);
        d.on_response(NOW + 5, status, None, MAX);
        assert_eq!(d.poll(NOW + 5), Poll::Done(Outcome::Delivered { status }));
        assert_eq!(d.poll(NOW + 10), Poll::Done(Outcome::Delivered { status }));
    }
}

#[test]
fn gone_statuses_ask_for_cleanup() {
    for status in [404, 410] {
        let mut d = delivery(60_000);
        transmit(&mut d, NOW);
        d.on_response(NOW, status, None, MAX);
        assert_eq!(
            d.poll(NOW),
            Poll::Done(Outcome::Gone {
                subscription: SUB_ID,
                status
            })
        );
    }
}

#[test]
fn client_errors_fail_without_retry() {
    for status in [400, 403, 413] {
        let mut d = delivery(60_000);
        transmit(&mut d, NOW);
        d.on_response(NOW, status, Some(b"1"), MAX);
        assert_eq!(
            d.poll(NOW + 100_000),
            Poll::Done(Outcome::Rejected { status })
        );
        assert_eq!(d.attempts(), 1);
    }
    for status in [200, 204, 301, 401, 418, 499, 600] {
        let mut d = delivery(60_000);
        transmit(&mut d, NOW);
        d.on_response(NOW, status, None, MAX);
        assert_eq!(d.poll(NOW), Poll::Done(Outcome::Unexpected { status }));
    }
}

#[test]
fn server_errors_retry_with_doubling_capped_backoff_then_give_up() {
    let mut d = delivery(3_600_000);
    transmit(&mut d, NOW);
    d.on_response(NOW, 503, None, MAX);
    assert_eq!(
        d.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 1_000
        }
    );
    assert_eq!(
        d.poll(NOW + 999),
        Poll::Wait {
            until_ms: NOW + 1_000
        }
    );
    transmit(&mut d, NOW + 1_000);
    d.on_response(NOW + 1_000, 500, None, MAX);
    // 2 000 ms doubled, capped at 1 500.
    assert_eq!(
        d.poll(NOW + 1_000),
        Poll::Wait {
            until_ms: NOW + 2_500
        }
    );
    transmit(&mut d, NOW + 2_500);
    d.on_response(NOW + 2_500, 599, None, MAX);
    assert_eq!(
        d.poll(NOW + 2_500),
        Poll::Done(Outcome::RetriesExhausted {
            attempts: 3,
            last_status: Some(599)
        })
    );
}

#[test]
fn rate_limits_respect_retry_after() {
    let mut d = delivery(3_600_000);
    transmit(&mut d, NOW);
    d.on_response(NOW, 429, Some(b"30"), MAX);
    assert_eq!(
        d.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 30_000
        }
    );
    transmit(&mut d, NOW + 30_000);
    // An HTTP-date 10 s ahead of the response time.
    d.on_response(
        NOW + 30_000,
        429,
        Some(b"Tue, 14 Nov 2023 22:14:00 GMT"),
        MAX,
    );
    assert_eq!(
        d.poll(NOW + 30_000),
        Poll::Wait {
            until_ms: NOW + 40_000
        }
    );
    transmit(&mut d, NOW + 40_000);
    // Retry-After shorter than the backoff, or malformed: the backoff wins.
    let mut e = delivery(3_600_000);
    transmit(&mut e, NOW);
    e.on_response(NOW, 429, Some(b"soon"), MAX);
    assert_eq!(
        e.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 1_000
        }
    );
}

#[test]
fn backoff_is_full_jitter_below_the_doubling_ceiling() {
    // random = 0 retries at once; a middle draw waits about half the ceiling.
    let mut d = delivery(3_600_000);
    transmit(&mut d, NOW);
    d.on_response(NOW, 503, None, 0);
    transmit(&mut d, NOW);
    d.on_transport_error(NOW, u64::MAX / 2);
    // Second retry: ceiling min(1 000 × 2, 1 500) = 1 500, half of it.
    assert_eq!(
        d.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 750
        }
    );
}

#[test]
fn retry_after_is_a_floor_the_jitter_never_undercuts() {
    for random in [0, 1 << 63, u64::MAX] {
        let mut d = delivery(3_600_000);
        transmit(&mut d, NOW);
        d.on_response(NOW, 429, Some(b"7"), random);
        assert_eq!(
            d.poll(NOW + 6_999),
            Poll::Wait {
                until_ms: NOW + 7_000
            }
        );
        transmit(&mut d, NOW + 7_000);
        d.on_response(NOW + 7_000, 503, Some(b"2"), random);
        assert_eq!(
            d.poll(NOW + 7_000),
            Poll::Wait {
                until_ms: NOW + 9_000
            }
        );
    }
}

#[test]
fn vapid_tokens_are_cached_per_origin_until_shortly_before_expiry() {
    let now = NOW / 1_000;
    let mut cache = VapidCache::new(
        VapidKey::from_bytes(&[0x11; 32]).unwrap(),
        "mailto:ops@example.com",
    )
    .unwrap();
    let a = cache
        .authorization("https://push.example.net", now)
        .unwrap()
        .to_owned();
    let b = cache
        .authorization("https://other.example.org", now)
        .unwrap()
        .to_owned();
    assert_ne!(a, b);
    assert_eq!(cache.len(), 2);
    let reuse_until = now + VAPID_TOKEN_LIFETIME_SECS - VAPID_REFRESH_BEFORE_SECS - 1;
    assert_eq!(
        cache
            .authorization("https://push.example.net", reuse_until)
            .unwrap(),
        a
    );
    let renewed = cache
        .authorization("https://push.example.net", reuse_until + 1)
        .unwrap()
        .to_owned();
    assert_ne!(renewed, a);
    let claims = renewed
        .strip_prefix("vapid t=")
        .and_then(|t| t.split('.').nth(1))
        .and_then(base64url_decode)
        .unwrap();
    let claims: serde_json::Value = serde_json::from_slice(&claims).unwrap();
    assert_eq!(
        claims,
        serde_json::json!({"aud": "https://push.example.net", "exp": reuse_until + 1 + VAPID_TOKEN_LIFETIME_SECS, "sub": "mailto:ops@example.com"})
    );
    assert!(!format!("{cache:?}").contains("push.example"));
    assert_eq!(
        VapidCache::new(
            VapidKey::from_bytes(&[0x11; 32]).unwrap(),
            "ops@example.com"
        )
        .err(),
        Some(VapidError::InvalidSubject)
    );
    assert_eq!(
        cache.authorization("http://push.example.net", now).err(),
        Some(VapidError::InvalidAudience)
    );
    // Bounded: the soonest-expiring origin goes first.
    for i in 0..MAX_CACHED_AUDIENCES {
        cache
            .authorization(&format!("https://h{i}.example"), now + 1)
            .unwrap();
    }
    assert_eq!(cache.len(), MAX_CACHED_AUDIENCES);
    assert!(cache.authorization("https://h0.example", now + 1).is_ok());
}

#[test]
fn vapid_keys_read_the_pem_and_raw_forms() {
    let pem = private_key_pem(&[0x11; 32]).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
    let key = VapidKey::from_bytes(&[0x11; 32]).unwrap();
    assert_eq!(
        VapidKey::from_text(&pem).unwrap().public_key(),
        key.public_key()
    );
    let raw = base64url_encode(&[0x11; 32]);
    assert_eq!(
        VapidKey::from_text(&format!("{raw}\n"))
            .unwrap()
            .public_key(),
        key.public_key()
    );
    assert_eq!(
        VapidKey::from_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----").err(),
        Some(KeyError::InvalidPrivateKey)
    );
    assert_eq!(
        VapidKey::from_text("not a key").err(),
        Some(KeyError::NotBase64Url)
    );
    assert_eq!(
        private_key_pem(&[0; 32]).err(),
        Some(KeyError::InvalidPrivateKey)
    );
}

#[test]
fn retries_stop_at_the_hint_expiry() {
    let mut d = delivery(20_000);
    transmit(&mut d, NOW);
    d.on_response(NOW, 429, Some(b"20"), MAX);
    assert_eq!(d.poll(NOW), Poll::Done(Outcome::Expired { attempts: 1 }));
    // A retry due before expiry that is polled after it also expires.
    let mut e = delivery(1_500);
    transmit(&mut e, NOW);
    e.on_response(NOW, 502, None, MAX);
    assert_eq!(
        e.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 1_000
        }
    );
    assert_eq!(
        e.poll(NOW + 1_500),
        Poll::Done(Outcome::Expired { attempts: 1 })
    );
    // Never sent at all once expired.
    let mut f = delivery(0);
    assert_eq!(f.poll(NOW), Poll::Done(Outcome::Expired { attempts: 0 }));
}

#[test]
fn transport_errors_retry_like_5xx() {
    let mut d = delivery(3_600_000);
    transmit(&mut d, NOW);
    d.on_transport_error(NOW, MAX);
    assert_eq!(
        d.poll(NOW),
        Poll::Wait {
            until_ms: NOW + 1_000
        }
    );
    transmit(&mut d, NOW + 1_000);
    d.on_response(NOW + 1_000, 500, None, MAX);
    transmit(&mut d, NOW + 2_500);
    d.on_transport_error(NOW + 2_500, MAX);
    assert_eq!(
        d.poll(NOW + 2_500),
        Poll::Done(Outcome::RetriesExhausted {
            attempts: 3,
            last_status: None
        })
    );
}

#[test]
fn answers_without_a_request_are_ignored() {
    let mut d = delivery(60_000);
    d.on_response(NOW, 201, None, MAX);
    d.on_transport_error(NOW, MAX);
    assert_eq!(d.attempts(), 0);
    transmit(&mut d, NOW);
    d.on_response(NOW, 201, None, MAX);
    d.on_response(NOW, 410, None, MAX);
    d.on_transport_error(NOW, MAX);
    assert_eq!(d.poll(NOW), Poll::Done(Outcome::Delivered { status: 201 }));
}

#[test]
fn construction_refusals() {
    let zero = RetryPolicy {
        max_attempts: 0,
        ..policy()
    };
    assert_eq!(
        Delivery::new(SUB_ID, ENDPOINT, message(None), NOW, zero).err(),
        Some(DeliveryError::NoAttempts)
    );
    let long = "a".repeat(33);
    for bad in ["", "a b", "a+b", long.as_str()] {
        assert_eq!(
            Delivery::new(SUB_ID, ENDPOINT, message(Some(bad)), NOW, policy()).err(),
            Some(DeliveryError::InvalidTopic),
            "{bad}"
        );
    }
    let d = Delivery::new(SUB_ID, ENDPOINT, message(None), NOW, policy()).unwrap();
    assert!(!format!("{d:?}").contains("push.example.net"));
    assert!(!format!("{:?}", message(None)).contains("vapid"));
}

#[test]
fn prepare_builds_a_request_the_browser_can_open() {
    let receiver = ReceiverSecret::new(&[0x42; 32], [9; 16]).unwrap();
    let subscription = PushSubscription::new(ENDPOINT, receiver.keys().clone()).unwrap();
    let ephemeral = EphemeralKey::from_bytes(&[0x33; 32]).unwrap();
    let hint = WebPushHint {
        notification_type: "order.shipped".into(),
        notification_id: "n-1".into(),
        association_epoch: "ae-1".into(),
        release_epoch: "r-1".into(),
        issued_at_ms: NOW,
        expires_at_ms: NOW + 7_200_500,
        route_intent: "orders.detail".into(),
    };
    let out = |hint| Outgoing {
        hint,
        subscription_id: SUB_ID,
        subscription: &subscription,
        ephemeral: &ephemeral,
        salt: [5; 16],
        urgency: Urgency::Normal,
        topic: None,
        policy: policy(),
    };
    let mut d = prepare(out(&hint), NOW + 1_000).unwrap();
    let req = transmit(&mut d, NOW + 1_000);
    assert_eq!(req.url, ENDPOINT);
    assert_eq!(req.headers[0], ("TTL", "600".to_owned()));
    assert_eq!(req.headers[2], ("Urgency", "normal".to_owned()));
    let plaintext = decrypt(&receiver, &req.body).unwrap();
    assert_eq!(WebPushHint::decode(&plaintext).unwrap(), hint);
    assert_eq!(req.headers.len(), 3, "Authorization is the driver's");
    assert_eq!(
        prepare(out(&hint), hint.expires_at_ms).err(),
        Some(PrepareError::Expired)
    );
    let mut bad = hint.clone();
    bad.notification_id = "free text".into();
    assert_eq!(
        prepare(out(&bad), NOW).err(),
        Some(PrepareError::Hint(HintError::InvalidId("notificationId")))
    );
    let mut o = out(&hint);
    o.topic = Some("no spaces".into());
    assert_eq!(
        prepare(o, NOW).err(),
        Some(PrepareError::Delivery(DeliveryError::InvalidTopic))
    );
}

proptest! {
    /// Whatever the provider answers, a delivery ends within
    /// `max_attempts` requests and never sends after expiry.
    #[test]
    fn always_terminates_within_bounds(
        answers in proptest::collection::vec((prop_oneof![Just(None), (100u16..700).prop_map(Some)], proptest::option::of("[0-9]{0,4}")), 1..10),
        life in 1u64..100_000,
        random in any::<u64>(),
    ) {
        let mut d = delivery(life);
        let mut now = NOW;
        let mut sent = 0;
        for (status, retry_after) in answers {
            match d.poll(now) {
                Poll::Transmit(_) => {
                    prop_assert!(now < NOW + life);
                    sent += 1;
                    match status {
                        Some(s) => d.on_response(now, s, retry_after.as_deref().map(str::as_bytes), random),
                        None => d.on_transport_error(now, random),
                    }
                }
                Poll::Wait { until_ms } => { prop_assert!(until_ms > now); now = until_ms; }
                Poll::Done(_) => break,
                Poll::AwaitingResponse => prop_assert!(false, "no request outstanding"),
            }
        }
        prop_assert!(sent <= 3);
        prop_assert_eq!(d.attempts(), sent);
    }
}

/// RFC 8030 §5.4: a topic is 1–32 base64url characters.
#[test]
fn topics_are_short_base64url() {
    assert!(is_valid_topic("demo"));
    assert!(is_valid_topic(&"a".repeat(32)));
    assert!(!is_valid_topic(&"a".repeat(33)));
    assert!(!is_valid_topic(""));
    assert!(!is_valid_topic("a b"));
    assert!(!is_valid_topic("a=b"));
}
