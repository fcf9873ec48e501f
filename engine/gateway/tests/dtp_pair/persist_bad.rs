//! SPEC SES-3, FRM-5 (its rule for every untrusted input): persisted
//! sessions and store files that are truncated, corrupted, of another
//! format or over the restoring endpoint's ceilings are refused with typed
//! errors, never a panic; and the directory store's bounds and clock.

use std::time::SystemTime;

use dtp_gateway::dtp::{
    DirStoreError, ParkError, PersistError, SESSION_FORMAT_VERSION, SESSION_MAGIC,
    SuspendedSessions, WallClock,
};

use super::*;

/// A Fay session with agreements (one recently ended), unacknowledged
/// fragments and a fragment waiting in a DAG.
fn rich_session() -> (Pair, SuspendedSession) {
    let (mut p, collection, injection) = pair_with_agreements(World::new());
    p.fay
        .ep
        .request_collection(terms(&[("what", "extra")]), p.now)
        .unwrap();
    p.drive();
    let (req, _) = requested(&p.term.take_events()).unwrap();
    let random = p.rng.bytes16();
    let extra = p.term.ep.accept(req, random, p.now).unwrap();
    p.drive();
    p.fay.ep.terminate(extra, "done", p.now).unwrap();
    p.drive();
    // The Fay releases 10 and holds 2 back (it waits for 1).
    p.term
        .ep
        .send_fragment(collection, 10, vec![], payload(10))
        .unwrap();
    let relations = derived_from(1);
    p.term
        .ep
        .send_fragment(collection, 2, relations, payload(2))
        .unwrap();
    p.fay
        .ep
        .send_fragment(injection, 5, vec![], payload(5))
        .unwrap();
    p.drive();
    p.fay
        .ep
        .send_fragment(injection, 6, vec![], payload(6))
        .unwrap();
    p.transmit();
    p.cut(0, 0);
    let s = p.fay_suspended.take().unwrap();
    assert_eq!(s.waiting_fragments(), 1);
    assert_eq!(s.cached_fragments(), 2);
    (p, s)
}

#[test]
fn ses3_every_truncation_and_every_flipped_byte_is_a_typed_error() {
    let (p, s) = rich_session();
    let config = p.fay_config.endpoint;
    let bytes = s.to_bytes(p.now);
    assert!(SuspendedSession::from_bytes(&bytes, &config, p.now).is_ok());
    for cut in 0..bytes.len() {
        let result = SuspendedSession::from_bytes(&bytes[..cut], &config, p.now);
        assert!(result.is_err(), "a prefix of {cut} bytes decoded");
    }
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let result = SuspendedSession::from_bytes(&bad, &config, p.now);
            assert!(result.is_err(), "byte {at} ^ {flip:#x} decoded");
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(SuspendedSession::from_bytes(&longer, &config, p.now).is_err());
}

#[test]
fn ses3_bad_magic_version_and_length_fields() {
    let (p, s) = rich_session();
    let config = p.fay_config.endpoint;
    let bytes = s.to_bytes(p.now);
    assert_eq!(bytes[..4], SESSION_MAGIC);
    let decode = |b: &[u8]| SuspendedSession::from_bytes(b, &config, p.now).unwrap_err();
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert!(matches!(decode(&bad), PersistError::BadMagic { .. }));
    let mut bad = bytes.clone();
    bad[4..6].copy_from_slice(&(SESSION_FORMAT_VERSION + 1).to_be_bytes());
    assert_eq!(
        decode(&bad),
        PersistError::UnsupportedVersion {
            found: SESSION_FORMAT_VERSION + 1,
            supported: SESSION_FORMAT_VERSION
        }
    );
    // The peer identity's length: magic, version, session id, role.
    let at = 4 + 2 + 16 + 1;
    let mut bad = bytes.clone();
    bad[at] ^= 0x40;
    assert!(matches!(
        decode(&bad),
        PersistError::OverCeiling {
            what: "peer identity",
            ..
        }
    ));
    // A payload byte: the structure holds, the checksum does not.
    let mut bad = bytes.clone();
    let end = bad.len() - 33;
    bad[end] ^= 0x01;
    assert_eq!(decode(&bad), PersistError::ChecksumMismatch);
}

#[test]
fn ses3_each_count_over_the_endpoints_ceiling_is_refused() {
    let (p, s) = rich_session();
    let base = p.fay_config.endpoint;
    let bytes = s.to_bytes(p.now);
    type Tighten = fn(&mut EndpointConfig);
    let cases: [(Tighten, &str); 11] = [
        (|c| c.agreements.max_active_agreements = 1, "agreements"),
        (|c| c.agreements.max_terms = 0, "terms entries"),
        (|c| c.limits.max_string_len = 2, "terms key"),
        (|c| c.resume_cache.max_fragments = 1, "cached fragments"),
        (|c| c.resume_cache.max_bytes = 40, "resume cache bytes"),
        (|c| c.limits.max_frame_len = 16, "cached data frame"),
        (|c| c.dag.resolved_window = 0, "remembered fragment ids"),
        (|c| c.dag.max_pending = 0, "waiting fragments"),
        (|c| c.dag.max_pending_bytes = 7, "bytes held by a DAG"),
        (|c| c.limits.max_relations = 0, "held fragment relations"),
        (|c| c.recently_ended = 0, "recently ended agreements"),
    ];
    for (tighten, expected) in cases {
        let mut config = base;
        tighten(&mut config);
        match SuspendedSession::from_bytes(&bytes, &config, p.now) {
            Err(PersistError::OverCeiling { what, .. }) => assert_eq!(what, expected),
            other => panic!("{expected}: {other:?}"),
        }
    }
}

fn test_clock() -> (WallClock, Arc<AtomicU64>) {
    let ahead_ms = Arc::new(AtomicU64::new(0));
    let ahead = ahead_ms.clone();
    let clock: WallClock =
        Arc::new(move || SystemTime::now() + Duration::from_millis(ahead.load(Ordering::Relaxed)));
    (clock, ahead_ms)
}

#[test]
fn ses2_dir_store_corrupt_file_is_an_error_and_is_removed() {
    let (p, s) = rich_session();
    let dir = TempDir::new();
    let store = open_store(&dir, p.fay_config.endpoint);
    let id = s.session_id();
    store.park(s, p.now).unwrap();
    let path = store.path_of(id);
    let mut data = std::fs::read(&path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x10;
    std::fs::write(&path, &data).unwrap();
    let err = store.try_take(id, p.now).unwrap_err();
    assert!(matches!(err, DirStoreError::Corrupt { .. }), "{err}");
    assert!(!path.exists(), "a corrupt file is removed");
    assert!(store.take(id, p.now).is_none());
    // A file with a broken header is removed when the store opens; other
    // files and leftover temporary files are handled too.
    std::fs::write(&path, b"DTPX not a session").unwrap();
    let foreign = dir.0.join("notes.txt");
    std::fs::write(&foreign, b"keep me").unwrap();
    let tmp = dir.0.join(format!(".{id}.1.1.tmp"));
    std::fs::write(&tmp, b"half a session").unwrap();
    let store = open_store(&dir, p.fay_config.endpoint);
    assert!(store.is_empty());
    assert!(!path.exists() && !tmp.exists() && foreign.exists());
}

#[test]
fn ses2_dir_store_bounds_hand_the_session_back() {
    let (p, s) = rich_session();
    let world = World::new();
    let fay_config = world.fay_config();
    let (mut q, _, _) = agreements_on(Pair::seeded(world, fay_config, 99));
    q.cut(0, 0);
    let other = q.fay_suspended.take().unwrap();
    let dir = TempDir::new();
    let mut limits = StoreLimits::for_endpoint(p.fay_config.endpoint);
    limits.max_sessions = 1;
    let store = DirSessionStore::open(&dir.0, limits).unwrap();
    let id = s.session_id();
    store.park(s, p.now).unwrap();
    let refused = store.park(other, p.now).unwrap_err();
    assert!(matches!(refused.error, ParkError::Full { max: 1 }));
    assert_eq!(refused.error.code(), ErrorCode::LIMIT_EXCEEDED);
    let s = store.try_take(id, p.now).unwrap().unwrap();
    limits.max_session_bytes = 100;
    let store = DirSessionStore::open(&dir.0, limits).unwrap();
    let refused = store.park(s, p.now).unwrap_err();
    assert!(matches!(
        refused.error,
        ParkError::TooLarge { max: 100, .. }
    ));
    assert_eq!(refused.session.session_id(), id, "handed back untouched");
}

#[test]
fn ses2_dir_store_expiry_is_wall_clock_across_a_restart() {
    let (p, s) = rich_session();
    let endpoint = p.fay_config.endpoint;
    let dir = TempDir::new();
    let (clock, ahead) = test_clock();
    let limits = StoreLimits::for_endpoint(endpoint);
    let store = DirSessionStore::open_with_clock(&dir.0, limits, clock.clone()).unwrap();
    let id = s.session_id();
    let left = s.expires_at().unwrap() - p.now;
    store.park(s, p.now).unwrap();
    drop(store);
    // Restarted 10 s of wall-clock later: 10 s less left, on the new
    // process's clock.
    ahead.store(10_000, Ordering::Relaxed);
    let later = p.now + Duration::from_secs(3600);
    let store = DirSessionStore::open_with_clock(&dir.0, limits, clock.clone()).unwrap();
    assert_eq!(store.expire(later), 0);
    let back = store.take(id, later).unwrap();
    let now_left = back.expires_at().unwrap() - later;
    assert!(
        now_left <= left - Duration::from_secs(10),
        "{now_left:?} of {left:?}"
    );
    assert!(
        now_left >= left - Duration::from_secs(11),
        "{now_left:?} of {left:?}"
    );
    // Past the deadline: expired by the wall clock, whatever `now` says.
    store.park(back, later).unwrap();
    drop(store);
    let past = 11_000 + endpoint.suspend_timeout.as_millis() as u64;
    ahead.store(past, Ordering::Relaxed);
    let store = DirSessionStore::open_with_clock(&dir.0, limits, clock).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.expire(later), 1);
    assert!(store.is_empty() && !store.path_of(id).exists());
}
