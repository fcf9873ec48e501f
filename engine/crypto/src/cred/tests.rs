#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use proptest::prelude::*;

use super::text::{base64_decode, base64_encode};
use super::*;

const NOW: u64 = 1_700_000_000;

fn issuer(n: u8) -> IssuerKeyPair {
    IssuerKeyPair::from_seed(&[n; 32]).unwrap()
}

fn grant(r: &str, modes: &[AccessMode]) -> Grant {
    Grant {
        resource_id: r.into(),
        modes: modes.iter().copied().collect(),
    }
}

fn request() -> CredentialRequest {
    CredentialRequest {
        fay_id: "fay-7".into(),
        noise_key: [9; 32],
        grants: vec![
            grant("camera-1", &[AccessMode::Read]),
            grant("arm", &[AccessMode::Write, AccessMode::Execute]),
        ],
        not_before: NOW - 10,
        not_after: NOW + 3600,
    }
}

fn verifier_for(i: &IssuerKeyPair) -> Verifier {
    let mut v = Verifier::new();
    v.trust(*i.public_key()).unwrap();
    v
}

#[test]
fn issue_parse_round_trip_and_sorted_grants() {
    let i = issuer(1);
    let c = i.issue(request(), [3; 16]).unwrap();
    let back = Credential::from_bytes(c.as_bytes()).unwrap();
    assert_eq!(back, c);
    let d = back.descriptor();
    assert_eq!(d.grants[0].resource_id, "arm");
    assert_eq!(d.descriptor_id.get_version_num(), 4);
    assert_eq!(d.issuer_key_id, i.public_key().key_id());
}

#[test]
fn descriptor_ids_are_minted_from_caller_random_bytes() {
    let i = issuer(1);
    let a = i.issue(request(), [1; 16]).unwrap();
    let b = i.issue(request(), [2; 16]).unwrap();
    assert_ne!(a.descriptor().descriptor_id, b.descriptor().descriptor_id);
}

#[test]
fn verify_accepts_and_permits() {
    let i = issuer(1);
    let v = verifier_for(&i);
    let c = i.issue(request(), [3; 16]).unwrap();
    let ok = v.verify(&c, NOW).unwrap();
    assert_eq!(ok.fay_id(), "fay-7");
    assert_eq!(ok.noise_key(), &[9; 32]);
    assert_eq!(ok.validity(), (NOW - 10, NOW + 3600));
    assert_eq!(ok.descriptor_id(), c.descriptor().descriptor_id);
    assert!(ok.permits("arm", AccessMode::Write));
    assert!(ok.permits("arm", AccessMode::Execute));
    assert!(!ok.permits("arm", AccessMode::Read));
    assert!(ok.permits("camera-1", AccessMode::Read));
    assert!(!ok.permits("camera-2", AccessMode::Read));
    assert!(ok.is_valid_at(NOW + 3599));
    assert!(!ok.is_valid_at(NOW + 3600));
}

#[test]
fn bad_signature_is_credential_invalid() {
    let i = issuer(1);
    let v = verifier_for(&i);
    let c = i.issue(request(), [3; 16]).unwrap();
    // Flip a byte of the noise key (still parses) and one of the signature.
    for at in [40, c.as_bytes().len() - 1] {
        let mut bytes = c.as_bytes().to_vec();
        bytes[at] ^= 1;
        let e = v.verify_bytes(&bytes, NOW).unwrap_err();
        assert!(matches!(e, CredError::BadSignature(_)), "{e:?}");
        assert_eq!(e.code(), ErrorCode::CREDENTIAL_INVALID);
    }
}

#[test]
fn signature_by_another_key_with_the_same_key_id_fails() {
    // An attacker re-signs with its own key but keeps the trusted key id.
    let trusted = issuer(1);
    let attacker = issuer(2);
    let mut forged = attacker
        .issue(request(), [3; 16])
        .unwrap()
        .as_bytes()
        .to_vec();
    forged[21..29].copy_from_slice(&trusted.public_key().key_id().0);
    let e = verifier_for(&trusted)
        .verify_bytes(&forged, NOW)
        .unwrap_err();
    assert!(matches!(e, CredError::BadSignature(_)));
}

#[test]
fn unknown_issuer() {
    let c = issuer(2).issue(request(), [3; 16]).unwrap();
    let e = verifier_for(&issuer(1)).verify(&c, NOW).unwrap_err();
    assert_eq!(e, CredError::UnknownIssuer(issuer(2).public_key().key_id()));
    assert_eq!(e.code(), ErrorCode::UNKNOWN_ISSUER);
    let mut v = verifier_for(&issuer(2));
    assert!(v.distrust(&issuer(2).public_key().key_id()));
    assert_eq!(
        v.verify(&c, NOW).unwrap_err().code(),
        ErrorCode::UNKNOWN_ISSUER
    );
}

#[test]
fn validity_window_edges() {
    let i = issuer(1);
    let v = verifier_for(&i);
    let c = i.issue(request(), [3; 16]).unwrap();
    assert!(v.verify(&c, NOW - 10).is_ok());
    let e = v.verify(&c, NOW - 11).unwrap_err();
    assert_eq!(
        e,
        CredError::NotYetValid {
            not_before: NOW - 10,
            now: NOW - 11
        }
    );
    assert_eq!(e.code(), ErrorCode::CREDENTIAL_INVALID);
    let e = v.verify(&c, NOW + 3600).unwrap_err();
    assert_eq!(
        e,
        CredError::Expired {
            not_after: NOW + 3600,
            now: NOW + 3600
        }
    );
    assert_eq!(e.code(), ErrorCode::CREDENTIAL_EXPIRED);
}

#[test]
fn revocation_at_run_time() {
    let i = issuer(1);
    let mut v = verifier_for(&i);
    let c = i.issue(request(), [3; 16]).unwrap();
    assert!(v.verify(&c, NOW).is_ok());
    assert!(v.revoke(c.descriptor().descriptor_id).unwrap());
    assert!(!v.revoke(c.descriptor().descriptor_id).unwrap());
    let e = v.verify(&c, NOW).unwrap_err();
    assert_eq!(e, CredError::Revoked(c.descriptor().descriptor_id));
    assert_eq!(e.code(), ErrorCode::CREDENTIAL_REVOKED);
    // Revoked wins over expired.
    assert_eq!(
        v.verify(&c, NOW + 99_999).unwrap_err().code(),
        ErrorCode::CREDENTIAL_REVOKED
    );
    v.set_revocations(RevocationList::new(10));
    assert!(v.verify(&c, NOW).is_ok());
}

#[test]
fn revocation_list_is_bounded() {
    let mut l = RevocationList::new(2);
    l.add(uuid::Uuid::from_u128(1)).unwrap();
    l.add(uuid::Uuid::from_u128(2)).unwrap();
    assert_eq!(
        l.add(uuid::Uuid::from_u128(3)),
        Err(TextError::TooManyRevocations { max: 2 })
    );
    assert_eq!(l.add(uuid::Uuid::from_u128(2)), Ok(false));
}

#[test]
fn issuer_ceiling() {
    let mut v = Verifier::new();
    for n in 0..Verifier::DEFAULT_MAX_ISSUERS {
        let raw = [
            n as u8,
            (n >> 8) as u8,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
        ];
        v.trust(IssuerPublicKey::from_raw(&raw).unwrap()).unwrap();
    }
    let e = v.trust(*issuer(1).public_key()).unwrap_err();
    assert_eq!(
        e,
        VerifierLimitError::TooManyIssuers(Verifier::DEFAULT_MAX_ISSUERS)
    );
}

#[test]
fn issue_refuses_what_a_verifier_would_refuse() {
    let i = issuer(1);
    let cases: Vec<(CredentialRequest, ParseErrorKind)> = vec![
        (
            CredentialRequest {
                not_after: NOW - 10,
                ..request()
            },
            ParseErrorKind::EmptyWindow,
        ),
        (
            CredentialRequest {
                fay_id: String::new(),
                ..request()
            },
            ParseErrorKind::EmptyId,
        ),
        (
            CredentialRequest {
                fay_id: "x".repeat(256),
                ..request()
            },
            ParseErrorKind::IdTooLong(256),
        ),
        (
            CredentialRequest {
                fay_id: "a\nb".into(),
                ..request()
            },
            ParseErrorKind::BadText,
        ),
        (
            CredentialRequest {
                grants: vec![grant("a", &[AccessMode::Read]); 2],
                ..request()
            },
            ParseErrorKind::NotCanonical,
        ),
        (
            CredentialRequest {
                grants: vec![grant("a", &[])],
                ..request()
            },
            ParseErrorKind::BadModes(0),
        ),
        (
            CredentialRequest {
                grants: (0..65)
                    .map(|n| grant(&format!("r{n:03}"), &[AccessMode::Read]))
                    .collect(),
                ..request()
            },
            ParseErrorKind::TooManyGrants(65),
        ),
    ];
    for (req, kind) in cases {
        assert_eq!(i.issue(req, [3; 16]).unwrap_err().0.kind, kind);
    }
}

#[test]
fn largest_credential_fits_the_bound() {
    let i = issuer(1);
    let req = CredentialRequest {
        fay_id: "f".repeat(MAX_ID_LEN),
        grants: (0..MAX_GRANTS)
            .map(|n| {
                grant(
                    &format!("{n:03}{}", "r".repeat(MAX_ID_LEN - 3)),
                    &[AccessMode::Configure],
                )
            })
            .collect(),
        ..request()
    };
    let c = i.issue(req, [3; 16]).unwrap();
    assert_eq!(c.as_bytes().len(), MAX_CREDENTIAL_LEN);
    assert!(verifier_for(&i).verify(&c, NOW).is_ok());
}

/// Parses `bytes`, expecting `kind` at `offset`.
fn expect_parse(bytes: &[u8], kind: ParseErrorKind, offset: usize) {
    let e = Credential::from_bytes(bytes).unwrap_err();
    assert_eq!((e.kind.clone(), e.offset), (kind, offset), "{e}");
}

#[test]
fn parser_negatives_name_the_offset() {
    let c = issuer(1).issue(request(), [3; 16]).unwrap();
    let good = c.as_bytes().to_vec();
    let with = |at: usize, b: u8| {
        let mut v = good.clone();
        v[at] = b;
        v
    };
    expect_parse(&with(0, b'X'), ParseErrorKind::BadMagic, 0);
    expect_parse(&with(4, 2), ParseErrorKind::UnsupportedVersion(2), 4);
    expect_parse(&with(11, 0x10), ParseErrorKind::NotUuidV4, 5);
    // not_after (offset 69..77) = 0 < not_before.
    let mut v = good.clone();
    v[69..77].copy_from_slice(&[0; 8]);
    expect_parse(&v, ParseErrorKind::EmptyWindow, 69);
    expect_parse(&with(77, 0), ParseErrorKind::EmptyId, 77);
    expect_parse(&with(78, 0xff), ParseErrorKind::BadText, 78);
    expect_parse(&with(78, 0x07), ParseErrorKind::BadText, 78);
    let count_at = 77 + 1 + 5;
    expect_parse(
        &with(count_at, 65),
        ParseErrorKind::TooManyGrants(65),
        count_at,
    );
    // Grants: "arm" (4 + 1 bytes) then "camera-1"; swap order by renaming.
    let arm_modes = count_at + 1 + 4;
    expect_parse(&with(arm_modes, 0), ParseErrorKind::BadModes(0), arm_modes);
    expect_parse(
        &with(arm_modes, 0x10),
        ParseErrorKind::BadModes(0x10),
        arm_modes,
    );
    expect_parse(
        &with(count_at + 2, b'z'),
        ParseErrorKind::NotCanonical,
        arm_modes + 1,
    );
    let mut v = good.clone();
    v.push(0);
    expect_parse(&v, ParseErrorKind::TrailingBytes(1), good.len());
    expect_parse(
        &vec![0; MAX_CREDENTIAL_LEN + 1],
        ParseErrorKind::TooLong(MAX_CREDENTIAL_LEN + 1),
        0,
    );
    // Every strict prefix is truncated, at an offset inside the input.
    for n in 0..good.len() {
        let e = Credential::from_bytes(&good[..n]).unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::Truncated, "prefix {n}");
        assert!(e.offset <= n);
    }
}

#[test]
fn text_forms_round_trip() {
    let i = issuer(1);
    let c = i.issue(request(), [3; 16]).unwrap();
    let text = c.to_text();
    assert!(text.starts_with("-----BEGIN DTP CREDENTIAL-----\n"));
    assert!(text.lines().all(|l| l.len() <= 64));
    assert_eq!(
        Credential::from_text(&format!("# a comment\r\n{}", text.replace('\n', "\r\n"))).unwrap(),
        c
    );
    let k = IssuerKeyPair::from_text(&i.to_text()).unwrap();
    assert_eq!(k.public_key(), i.public_key());
    assert_eq!(
        IssuerPublicKey::from_text(&i.public_key().to_text()).unwrap(),
        *i.public_key()
    );
    assert!(c.describe().contains("arm write,execute"));
    assert!(!c.describe().contains(&hex(c.signature())));
}

#[test]
fn text_form_negatives() {
    let c = issuer(1).issue(request(), [3; 16]).unwrap();
    let text = c.to_text();
    assert_eq!(
        Credential::from_text(&text.replace("DTP CREDENTIAL", "X")),
        Err(FormatError::Text(TextError::MissingBegin(CREDENTIAL_LABEL)))
    );
    assert_eq!(
        Credential::from_text(&text[..text.find("-----END").unwrap()]),
        Err(FormatError::Text(TextError::MissingEnd(CREDENTIAL_LABEL)))
    );
    assert_eq!(
        Credential::from_text(&text.replacen("\n", "\n*", 1)),
        Err(FormatError::Text(TextError::BadBase64 { line: 2 }))
    );
    assert!(matches!(
        Credential::from_text(&"a".repeat(text::MAX_ARMOR_LEN + 1)),
        Err(FormatError::Text(TextError::TooLong { .. }))
    ));
    assert_eq!(
        IssuerPublicKey::from_text(&armor(PUBLIC_KEY_LABEL, &[1; 31])),
        Err(FormatError::BadKey("Ed25519 public key"))
    );
    assert!(matches!(
        IssuerKeyPair::from_text(&armor(PRIVATE_KEY_LABEL, &[1; 48])),
        Err(FormatError::BadKey(_))
    ));
}

#[test]
fn key_generation_and_ids() {
    let k = IssuerKeyPair::generate(&ring::rand::SystemRandom::new()).unwrap();
    let again = IssuerKeyPair::from_pkcs8(k.pkcs8()).unwrap();
    assert_eq!(again.public_key(), k.public_key());
    // Seeded keys are deterministic and import back.
    assert_eq!(issuer(5).pkcs8(), issuer(5).pkcs8());
    assert_eq!(
        issuer(5).public_key().key_id(),
        KeyId::of(issuer(5).public_key().raw())
    );
    // Key id = SHA-256("DTP issuer key v1" ‖ key)[..8].
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        &[
            b"DTP issuer key v1".as_slice(),
            issuer(5).public_key().raw(),
        ]
        .concat(),
    );
    assert_eq!(issuer(5).public_key().key_id().0, digest.as_ref()[..8]);
    assert_eq!(KeyId([0xab; 8]).to_string(), "abababababababab");
}

#[test]
fn revocation_file_add_and_parse() {
    let a = uuid::Uuid::from_u128(2);
    let b = uuid::Uuid::from_u128(1);
    let t = revocation_list_add("", a, 10).unwrap();
    let t = revocation_list_add(&t, b, 10).unwrap();
    let t2 = revocation_list_add(&t, b, 10).unwrap();
    assert_eq!(t, t2);
    let l = RevocationList::from_text(&t, 10).unwrap();
    assert_eq!(l.iter().copied().collect::<Vec<_>>(), vec![b, a]);
    assert_eq!(
        RevocationList::from_text("# x\n\nnot-a-uuid\n", 10),
        Err(TextError::BadRevocationLine { line: 3 })
    );
    assert_eq!(
        revocation_list_add(&t, uuid::Uuid::from_u128(3), 2),
        Err(TextError::TooManyRevocations { max: 2 })
    );
}

#[test]
fn base64_known_vectors_and_strictness() {
    for (plain, enc) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
    ] {
        assert_eq!(base64_encode(plain.as_bytes()), enc);
        assert_eq!(base64_decode(enc.as_bytes()).unwrap(), plain.as_bytes());
    }
    for bad in ["Zg=", "Zh==", "Zm9=v", "Z===", "Zg==Zg==", "Z!=="] {
        assert_eq!(base64_decode(bad.as_bytes()), None, "{bad}");
    }
}

proptest! {
    #[test]
    fn base64_round_trip(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(base64_decode(base64_encode(&data).as_bytes()).unwrap(), data);
    }

    #[test]
    fn parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Credential::from_bytes(&data);
    }

    #[test]
    fn mutated_credentials_never_verify_unless_unchanged(at in 0usize..200, flip in 1u8..=255) {
        let i = issuer(1);
        let c = i.issue(request(), [3; 16]).unwrap();
        let mut bytes = c.as_bytes().to_vec();
        let at = at % bytes.len();
        bytes[at] ^= flip;
        prop_assert!(verifier_for(&i).verify_bytes(&bytes, NOW).is_err());
    }

    #[test]
    fn issued_credentials_round_trip(
        grants in proptest::collection::btree_map("[a-z0-9/._-]{1,40}", 1u8..16, 0..20),
        fay in "[a-zA-Z0-9 -]{1,60}",
        nb in 0u64..u64::MAX / 2,
        len in 1u64..1_000_000,
        random in any::<[u8; 16]>(),
    ) {
        let i = issuer(1);
        let req = CredentialRequest {
            fay_id: fay,
            noise_key: [1; 32],
            grants: grants.iter().map(|(r, m)| Grant { resource_id: r.clone(), modes: AccessModes::from_bits(*m).unwrap() }).collect(),
            not_before: nb,
            not_after: nb + len,
        };
        let c = i.issue(req.clone(), random).unwrap();
        let back = Credential::from_bytes(c.as_bytes()).unwrap();
        prop_assert_eq!(&back, &c);
        let ok = verifier_for(&i).verify(&back, nb).unwrap();
        for (r, m) in &grants {
            let modes = AccessModes::from_bits(*m).unwrap();
            for mode in [AccessMode::Read, AccessMode::Write, AccessMode::Execute, AccessMode::Configure] {
                prop_assert_eq!(ok.permits(r, mode), modes.contains(mode));
            }
        }
    }
}

/// SPEC TS-16: a revocation made at run time through a shared set is
/// honoured at once by every verifier sharing it, and by no other.
#[test]
fn shared_revocations_reach_every_sharing_verifier_at_once() {
    let i = issuer(1);
    let shared = SharedRevocations::new();
    let (mut a, mut b, c_alone) = (verifier_for(&i), verifier_for(&i), verifier_for(&i));
    a.share_revocations(shared.clone());
    b.share_revocations(shared.clone());
    let cred = i.issue(request(), [3; 16]).unwrap();
    let id = cred.descriptor().descriptor_id;
    assert!(a.verify(&cred, NOW).is_ok() && b.verify(&cred, NOW).is_ok());
    assert!(shared.revoke(id).unwrap(), "newly revoked");
    assert!(!shared.revoke(id).unwrap(), "already revoked");
    for v in [&a, &b] {
        assert!(matches!(v.verify(&cred, NOW), Err(CredError::Revoked(r)) if r == id));
    }
    assert!(c_alone.verify(&cred, NOW).is_ok(), "not sharing the set");
}

/// The signature cache skips only the signature: a cached credential is
/// still refused once revoked (locally or through a shared set), outside
/// its window, or when its issuer is no longer trusted; a bad signature is
/// never cached; the ceiling holds.
#[test]
fn signature_cache_rechecks_everything_but_the_signature() {
    let i = issuer(1);
    let mut v = verifier_for(&i);
    let shared = SharedRevocations::new();
    v.share_revocations(shared.clone());
    let mut cache = SignatureCache::new(2);
    let c = i.issue(request(), [3; 16]).unwrap();
    let bytes = c.as_bytes().clone();
    let id = c.descriptor().descriptor_id;
    assert!(cache.verify_bytes(&v, &bytes, NOW).is_ok());
    assert_eq!(cache.len(), 1);
    assert!(
        cache.verify_bytes(&v, &bytes, NOW).is_ok(),
        "a hit verifies"
    );
    assert!(matches!(
        cache.verify_bytes(&v, &bytes, NOW + 3600),
        Err(CredError::Expired { .. })
    ));
    assert!(matches!(
        cache.verify_bytes(&v, &bytes, NOW - 11),
        Err(CredError::NotYetValid { .. })
    ));
    shared.revoke(id).unwrap();
    assert!(matches!(cache.verify_bytes(&v, &bytes, NOW), Err(CredError::Revoked(r)) if r == id));
    let mut v2 = verifier_for(&i);
    assert!(
        cache.verify_bytes(&v2, &bytes, NOW).is_ok(),
        "other verifier"
    );
    assert!(v2.distrust(&i.public_key().key_id()));
    assert!(matches!(
        cache.verify_bytes(&v2, &bytes, NOW),
        Err(CredError::UnknownIssuer(_))
    ));
    // A flipped signature is refused every time and never cached.
    let mut bad = bytes.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    for _ in 0..2 {
        assert!(matches!(
            cache.verify_bytes(&v, &bad, NOW),
            Err(CredError::BadSignature(_))
        ));
    }
    assert_eq!(cache.len(), 1);
    // The ceiling: the oldest goes.
    for n in 4..7u8 {
        let other = i.issue(request(), [n; 16]).unwrap();
        let _ = cache.verify_bytes(&v, other.as_bytes(), NOW);
    }
    assert_eq!(cache.len(), 2);
}

/// `recheck` repeats every check of a verified credential but the
/// signature: expiry, revocation and an issuer no longer trusted all fail it.
#[test]
fn recheck_repeats_everything_but_the_signature() {
    let i = issuer(1);
    let mut v = verifier_for(&i);
    let c = i.issue(request(), [3; 16]).unwrap();
    let verified = v.verify(&c, NOW).unwrap();
    assert_eq!(v.recheck(&verified, NOW).unwrap(), verified);
    assert!(matches!(
        v.recheck(&verified, NOW + 3600),
        Err(CredError::Expired { .. })
    ));
    assert!(matches!(
        v.recheck(&verified, NOW - 11),
        Err(CredError::NotYetValid { .. })
    ));
    let id = c.descriptor().descriptor_id;
    assert!(v.revoke(id).unwrap());
    assert!(matches!(v.recheck(&verified, NOW), Err(CredError::Revoked(r)) if r == id));
    let mut v2 = verifier_for(&i);
    assert!(v2.recheck(&verified, NOW).is_ok(), "another verifier");
    assert!(v2.distrust(&i.public_key().key_id()));
    assert!(matches!(
        v2.recheck(&verified, NOW),
        Err(CredError::UnknownIssuer(_))
    ));
}
