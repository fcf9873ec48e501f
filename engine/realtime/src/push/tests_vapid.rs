//! RFC 8292 VAPID: the header's shape, the JWT's claims and signature, and
//! every refusal.

use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const NOW: u64 = 1_700_000_000;
const AUD: &str = "https://push.example.net";
const SUB: &str = "mailto:push-ops@example.com";

fn key() -> VapidKey {
    VapidKey::from_bytes(&[0x11; 32]).unwrap()
}

/// Splits `vapid t=<jwt>, k=<key>`, verifies the ES256 signature with `k`
/// and returns (JOSE header, claims, k).
fn open(header: &str) -> (Value, Value, Vec<u8>) {
    let rest = header.strip_prefix("vapid t=").unwrap();
    let (jwt, k) = rest.split_once(", k=").unwrap();
    let k = base64url_decode(k).unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3);
    let sig = Signature::from_slice(&base64url_decode(parts[2]).unwrap()).unwrap();
    let signing_input = format!("{}.{}", parts[0], parts[1]);
    VerifyingKey::from_sec1_bytes(&k)
        .unwrap()
        .verify(signing_input.as_bytes(), &sig)
        .unwrap();
    let jose = serde_json::from_slice(&base64url_decode(parts[0]).unwrap()).unwrap();
    let claims = serde_json::from_slice(&base64url_decode(parts[1]).unwrap()).unwrap();
    (jose, claims, k)
}

#[test]
fn header_carries_a_verifiable_es256_jwt_with_exactly_aud_exp_sub() {
    let k = key();
    let header = vapid_header(&k, AUD, SUB, NOW + 3_600, NOW).unwrap();
    let (jose, claims, public) = open(&header);
    assert_eq!(jose, json!({"typ": "JWT", "alg": "ES256"}));
    assert_eq!(claims, json!({"aud": AUD, "exp": NOW + 3_600, "sub": SUB}));
    assert_eq!(public.as_slice(), k.public_key());
    assert_eq!(public.len(), 65);
    assert_eq!(public[0], 0x04);
}

#[test]
fn signature_fails_under_another_key_or_altered_claims() {
    let header = key().header(AUD, SUB, NOW + 60, NOW).unwrap();
    let jwt = header
        .strip_prefix("vapid t=")
        .and_then(|r| r.split_once(", k="))
        .unwrap()
        .0;
    let parts: Vec<&str> = jwt.split('.').collect();
    let sig = Signature::from_slice(&base64url_decode(parts[2]).unwrap()).unwrap();
    let other = VapidKey::from_bytes(&[0x22; 32]).unwrap();
    let other_vk = VerifyingKey::from_sec1_bytes(other.public_key()).unwrap();
    let input = format!("{}.{}", parts[0], parts[1]);
    assert!(other_vk.verify(input.as_bytes(), &sig).is_err());
    let vk = VerifyingKey::from_sec1_bytes(key().public_key()).unwrap();
    let forged = format!(
        "{}.{}",
        parts[0],
        base64url_encode(br#"{"aud":"https://push.example.net","exp":9999999999,"sub":"mailto:push-ops@example.com"}"#)
    );
    assert!(vk.verify(forged.as_bytes(), &sig).is_err());
}

#[test]
fn signing_is_deterministic() {
    let k = key();
    assert_eq!(
        k.header(AUD, SUB, NOW + 60, NOW).unwrap(),
        k.header(AUD, SUB, NOW + 60, NOW).unwrap()
    );
}

#[test]
fn expiry_bounds() {
    let k = key();
    let day = MAX_VAPID_LIFETIME_SECS;
    assert!(k.header(AUD, SUB, NOW + day, NOW).is_ok());
    assert_eq!(
        k.header(AUD, SUB, NOW + day + 1, NOW),
        Err(VapidError::ExpiryTooFar {
            exp: NOW + day + 1,
            now: NOW
        })
    );
    assert!(k.header(AUD, SUB, NOW + 1, NOW).is_ok());
    assert_eq!(
        k.header(AUD, SUB, NOW, NOW),
        Err(VapidError::AlreadyExpired { exp: NOW, now: NOW })
    );
    assert_eq!(
        k.header(AUD, SUB, 0, NOW),
        Err(VapidError::AlreadyExpired { exp: 0, now: NOW })
    );
}

#[test]
fn audience_must_be_an_https_origin() {
    let k = key();
    for ok in [
        AUD,
        "https://push.example.net:8443",
        "https://10.0.0.1",
        "https://fcm.googleapis.com",
    ] {
        assert!(k.header(ok, SUB, NOW + 60, NOW).is_ok(), "{ok}");
    }
    let long_host = format!("https://{}", "a".repeat(254));
    for bad in [
        "http://push.example.net",
        "https://push.example.net/",
        "https://push.example.net/path",
        "https://user@push.example.net",
        "https://",
        "https://push.example.net:",
        "https://push.example.net:0",
        "https://push.example.net:08443",
        "https://push.example.net:65536",
        "https://-push.example.net",
        "https://push.example.net.",
        "https://push.example.net?x",
        "https://push example.net",
        "https://push.example.net\"",
        long_host.as_str(),
    ] {
        assert_eq!(
            k.header(bad, SUB, NOW + 60, NOW),
            Err(VapidError::InvalidAudience),
            "{bad}"
        );
    }
}

#[test]
fn subject_must_be_mailto_or_https() {
    let k = key();
    assert!(
        k.header(AUD, "https://example.com/contact", NOW + 60, NOW)
            .is_ok()
    );
    let long = format!("mailto:{}", "a".repeat(MAX_SUBJECT_LEN - 6));
    for bad in [
        "mailto:",
        "https://",
        "push-ops@example.com",
        "http://example.com",
        "mailto:a\"b@example.com",
        "mailto:a\\b@example.com",
        "mailto:a b@example.com",
        "mailto:ops@exämple.com",
        long.as_str(),
    ] {
        assert_eq!(
            k.header(AUD, bad, NOW + 60, NOW),
            Err(VapidError::InvalidSubject),
            "{bad}"
        );
    }
    let longest = format!("mailto:{}", "a".repeat(MAX_SUBJECT_LEN - 7));
    assert!(k.header(AUD, &longest, NOW + 60, NOW).is_ok());
}

#[test]
fn key_refusals_and_debug() {
    assert_eq!(
        VapidKey::from_bytes(&[0; 32]).err(),
        Some(KeyError::InvalidPrivateKey)
    );
    assert_eq!(
        VapidKey::from_bytes(&[0xff; 32]).err(),
        Some(KeyError::InvalidPrivateKey)
    );
    let k = key();
    assert_eq!(
        format!("{k:?}"),
        format!(
            "VapidKey {{ public: {:?}, .. }}",
            base64url_encode(k.public_key())
        )
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn any_valid_key_signs_a_verifiable_header(secret in any::<[u8; 32]>(), ttl in 1u64..=86_400) {
        let Ok(k) = VapidKey::from_bytes(&secret) else { return Ok(()) };
        let header = k.header(AUD, SUB, NOW + ttl, NOW).unwrap();
        let (_, claims, _) = open(&header);
        prop_assert_eq!(claims, json!({"aud": AUD, "exp": NOW + ttl, "sub": SUB}));
    }

    #[test]
    fn header_never_panics(aud in "\\PC{0,80}", sub in "\\PC{0,80}", exp in any::<u64>(), now in any::<u64>()) {
        let _ = key().header(&aud, &sub, exp, now);
    }
}

/// A derived secret is stable for one key and label, and differs for
/// another label or key; it is not the private scalar.
#[test]
fn derived_secrets_belong_to_their_key_and_label() {
    let a = VapidKey::from_bytes(&[0x11; 32]).unwrap();
    let b = VapidKey::from_bytes(&[0x12; 32]).unwrap();
    assert_eq!(a.derive(b"store"), a.clone().derive(b"store"));
    assert_ne!(a.derive(b"store"), a.derive(b"ids"));
    assert_ne!(a.derive(b"store"), b.derive(b"store"));
    assert_ne!(a.derive(b"store"), [0x11; 32]);
}
