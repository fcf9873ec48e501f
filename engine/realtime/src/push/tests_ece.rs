//! RFC 8291 encryption: the Appendix A example byte for byte, every
//! refusal, and round trips.

use proptest::prelude::*;

use super::b64;
use super::ece::derive;
use super::*;

// RFC 8291 Appendix A (and §5).
const PLAINTEXT: &[u8] = b"When I grow up, I want to be a watermelon";
const AS_PRIVATE: &str = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw";
const AS_PUBLIC: &str =
    "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8";
const UA_PRIVATE: &str = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94";
const UA_PUBLIC: &str =
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
const SALT: &str = "DGv6ra1nlYgDCS1FRnbzlw";
const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";
const ECDH_SECRET: &str = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs";
const CEK: &str = "oIhVW04MRdy2XN9CiKLxTg";
const NONCE: &str = "4h_95klXJ5E_qnoN";
const BODY: &str = concat!(
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml",
    "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT",
    "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
);

fn arr<const N: usize>(s: &str) -> [u8; N] {
    b64::decode_array(s).unwrap()
}

fn sender() -> EphemeralKey {
    EphemeralKey::from_bytes(&arr(AS_PRIVATE)).unwrap()
}

fn receiver() -> ReceiverSecret {
    ReceiverSecret::new(&arr(UA_PRIVATE), arr(AUTH)).unwrap()
}

fn receiver_keys() -> ReceiverKeys {
    ReceiverKeys::from_base64url(UA_PUBLIC, AUTH).unwrap()
}

#[test]
fn rfc8291_appendix_a_byte_for_byte() {
    let body = encrypt(&receiver_keys(), PLAINTEXT, &sender(), &arr(SALT), 4096, 0).unwrap();
    assert_eq!(base64url_encode(&body), BODY);
    assert_eq!(body.len(), HEADER_LEN + PLAINTEXT.len() + 1 + TAG_LEN);
}

#[test]
fn rfc8291_keys_and_intermediate_values() {
    assert_eq!(base64url_encode(sender().public_key()), AS_PUBLIC);
    assert_eq!(receiver().keys(), &receiver_keys());
    let (cek, nonce) = derive(
        &arr(ECDH_SECRET),
        &arr(AUTH),
        &arr(UA_PUBLIC),
        &arr(AS_PUBLIC),
        &arr(SALT),
    )
    .unwrap();
    assert_eq!(base64url_encode(&cek), CEK);
    assert_eq!(base64url_encode(&nonce), NONCE);
}

#[test]
fn rfc8291_body_decrypts() {
    let body = base64url_decode(BODY).unwrap();
    assert_eq!(decrypt(&receiver(), &body).unwrap(), PLAINTEXT);
}

#[test]
fn padding_and_record_size_are_honoured() {
    let body = encrypt(&receiver_keys(), b"hi", &sender(), &arr(SALT), 100, 30).unwrap();
    assert_eq!(body.len(), HEADER_LEN + 2 + 1 + 30 + TAG_LEN);
    assert_eq!(&body[16..20], &100u32.to_be_bytes());
    assert_eq!(body[20], 65);
    assert_eq!(decrypt(&receiver(), &body).unwrap(), b"hi");
}

#[test]
fn encrypt_refusals() {
    let (keys, s, salt) = (receiver_keys(), sender(), arr::<16>(SALT));
    assert_eq!(
        encrypt(&keys, b"x", &s, &salt, 17, 0),
        Err(EncryptError::RecordSizeTooSmall { rs: 17 })
    );
    // 18 bytes of record fit rs = 18 exactly; 19 do not.
    assert!(encrypt(&keys, b"x", &s, &salt, 18, 0).is_ok());
    assert_eq!(
        encrypt(&keys, b"xy", &s, &salt, 18, 0),
        Err(EncryptError::DoesNotFitRecord {
            record_len: 19,
            rs: 18
        })
    );
    let max = vec![7u8; MAX_PLAINTEXT_LEN];
    let body = encrypt(&keys, &max, &s, &salt, 4096, 0).unwrap();
    assert_eq!(body.len(), MAX_BODY_LEN);
    assert_eq!(decrypt(&receiver(), &body).unwrap(), max);
    let over = vec![7u8; MAX_PLAINTEXT_LEN + 1];
    assert_eq!(
        encrypt(&keys, &over, &s, &salt, 1_000_000, 0),
        Err(EncryptError::TooLarge { body_len: 4097 })
    );
    // rs = 4096 bounds the record; the 86-byte header counts against the
    // 4096-byte body.
    assert_eq!(
        encrypt(&keys, &max, &s, &salt, 4096, 1),
        Err(EncryptError::TooLarge { body_len: 4097 })
    );
    assert_eq!(
        encrypt(&keys, b"", &s, &salt, u32::MAX, usize::MAX),
        Err(EncryptError::DoesNotFitRecord {
            record_len: usize::MAX,
            rs: u32::MAX
        })
    );
}

#[test]
fn key_refusals() {
    let point = arr::<65>(UA_PUBLIC);
    let auth = arr::<16>(AUTH);
    assert_eq!(
        ReceiverKeys::new(&point[..64], &auth),
        Err(KeyError::InvalidPoint)
    );
    let mut compressed_tag = point;
    compressed_tag[0] = 0x02;
    assert_eq!(
        ReceiverKeys::new(&compressed_tag, &auth),
        Err(KeyError::InvalidPoint)
    );
    let mut off_curve = point;
    off_curve[64] ^= 1;
    assert_eq!(
        ReceiverKeys::new(&off_curve, &auth),
        Err(KeyError::InvalidPoint)
    );
    assert_eq!(
        ReceiverKeys::new(&point, &auth[..15]),
        Err(KeyError::InvalidAuthSecret)
    );
    assert_eq!(
        ReceiverKeys::from_base64url("B+", AUTH),
        Err(KeyError::NotBase64Url)
    );
    assert_eq!(
        ReceiverKeys::from_base64url(UA_PUBLIC, "#"),
        Err(KeyError::NotBase64Url)
    );
    assert_eq!(
        EphemeralKey::from_bytes(&[0; 32]).err(),
        Some(KeyError::InvalidPrivateKey)
    );
    assert_eq!(
        EphemeralKey::from_bytes(&[0xff; 32]).err(),
        Some(KeyError::InvalidPrivateKey)
    );
    assert_eq!(
        ReceiverSecret::new(&[0; 32], auth).err(),
        Some(KeyError::InvalidPrivateKey)
    );
}

#[test]
fn debug_never_shows_secrets() {
    let shown = format!("{:?} {:?} {:?}", receiver_keys(), receiver(), sender());
    assert_eq!(
        shown,
        format!(
            "ReceiverKeys {{ .. }} ReceiverSecret {{ .. }} EphemeralKey {{ public: {AS_PUBLIC:?}, .. }}"
        )
    );
}

#[test]
fn decrypt_refusals() {
    let r = receiver();
    let body = base64url_decode(BODY).unwrap();
    assert_eq!(decrypt(&r, &body[..20]), Err(DecryptError::Truncated));
    assert_eq!(decrypt(&r, &body[..86]), Err(DecryptError::Truncated));
    assert_eq!(decrypt(&r, &body[..86 + 16]), Err(DecryptError::Truncated));
    let mut small_rs = body.clone();
    small_rs[16..20].copy_from_slice(&17u32.to_be_bytes());
    assert_eq!(
        decrypt(&r, &small_rs),
        Err(DecryptError::RecordSizeTooSmall)
    );
    let mut two_records = body.clone();
    two_records[16..20].copy_from_slice(&20u32.to_be_bytes());
    assert_eq!(
        decrypt(&r, &two_records),
        Err(DecryptError::NotSingleRecord)
    );
    let mut idlen = body.clone();
    idlen[20] = 64;
    assert_eq!(decrypt(&r, &idlen), Err(DecryptError::InvalidKeyId));
    let mut keyid = body.clone();
    keyid[21] = 0x03;
    assert_eq!(decrypt(&r, &keyid), Err(DecryptError::InvalidKeyId));
    let mut tampered = body.clone();
    *tampered.last_mut().unwrap() ^= 1;
    assert_eq!(decrypt(&r, &tampered), Err(DecryptError::Authentication));
    let other = ReceiverSecret::new(&[1; 32], arr(AUTH)).unwrap();
    assert_eq!(decrypt(&other, &body), Err(DecryptError::Authentication));
}

#[test]
fn decrypt_refuses_records_without_the_final_delimiter() {
    // Build records by hand with the RFC keys: 0x01 (not last) and all zero.
    let keys = receiver_keys();
    let s = sender();
    for record in [&b"abc\x01"[..], b"abc\x01\x00\x00", b"\x00\x00", b"abc"] {
        let body = seal_raw(&keys, &s, &arr(SALT), record);
        assert_eq!(
            decrypt(&receiver(), &body),
            Err(DecryptError::InvalidPadding)
        );
    }
    let ok = seal_raw(&keys, &s, &arr(SALT), b"abc\x02\x00");
    assert_eq!(decrypt(&receiver(), &ok).unwrap(), b"abc");
}

/// An aes128gcm body around a record whose padded plaintext is `raw`.
fn seal_raw(keys: &ReceiverKeys, s: &EphemeralKey, salt: &[u8; 16], raw: &[u8]) -> Vec<u8> {
    use p256::ecdh::diffie_hellman;
    use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
    let shared = diffie_hellman(s.secret().to_nonzero_scalar(), keys.point().as_affine());
    let secret: [u8; 32] = shared.raw_secret_bytes().as_slice().try_into().unwrap();
    let (cek, nonce) = derive(&secret, keys.auth(), keys.p256dh(), s.public_key(), salt).unwrap();
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).unwrap());
    let mut record = raw.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::empty(),
        &mut record,
    )
    .unwrap();
    let mut body = salt.to_vec();
    body.extend_from_slice(&4096u32.to_be_bytes());
    body.push(65);
    body.extend_from_slice(s.public_key());
    body.extend_from_slice(&record);
    body
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn encrypt_decrypt_round_trip(
        plaintext in proptest::collection::vec(any::<u8>(), 0..600),
        padding in 0usize..64,
        ua in any::<[u8; 32]>(),
        eph in any::<[u8; 32]>(),
        auth in any::<[u8; 16]>(),
        salt in any::<[u8; 16]>(),
    ) {
        let (Ok(r), Ok(s)) = (ReceiverSecret::new(&ua, auth), EphemeralKey::from_bytes(&eph)) else {
            return Ok(());
        };
        let body = encrypt(r.keys(), &plaintext, &s, &salt, 4096, padding).unwrap();
        prop_assert_eq!(body.len(), HEADER_LEN + plaintext.len() + 1 + padding + TAG_LEN);
        prop_assert_eq!(decrypt(&r, &body).unwrap(), plaintext);
    }

    #[test]
    fn decrypt_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decrypt(&receiver(), &body);
    }

    #[test]
    fn decrypt_never_panics_on_mutated_rfc_body(at in 0usize..144, byte in any::<u8>()) {
        let mut body = base64url_decode(BODY).unwrap();
        if let Some(b) = body.get_mut(at) {
            *b = byte;
        }
        let _ = decrypt(&receiver(), &body);
    }

    #[test]
    fn key_decoders_never_panic(p in "\\PC{0,100}", a in "\\PC{0,30}", raw in proptest::collection::vec(any::<u8>(), 0..70)) {
        let _ = ReceiverKeys::from_base64url(&p, &a);
        let _ = ReceiverKeys::new(&raw, &raw);
    }
}
