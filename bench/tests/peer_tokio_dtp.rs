//! The tokio peer running the full DTP protocol, driven over real TCP by the
//! test kit's synchronous Fay (std `TcpStream` + `DtpEndpoint::fay`): CAP, the
//! `pingpong` and `stream` workloads, a cut mid-frame and a resume, and the
//! peer's refusals (an untrusted credential, garbage bytes, an unknown
//! session).
//!
//! Nothing sleeps: the client loops on reads with a short timeout until
//! what it waits for happens or a generous deadline passes.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_bench::dtp_workload::{BenchKeys, DtpWorkload};
use dtp_bench::peer_tokio_dtp::{DtpPeerConfig, DtpPeerHandle, DtpPeerStats, serve};
use dtp_codec::{AgreementId, ErrorCode, Limits, peek_frame_len};
use dtp_gateway::dtp::{DtpEvent, FayConfig};
use dtp_test_kit::Fay;

/// Generous: a debug build on two shared cores.
const DEADLINE: Duration = Duration::from_secs(120);
const FRAGMENT: usize = 16 * 1024;

fn peer(keys: &BenchKeys) -> DtpPeerHandle {
    let terminal = Arc::new(keys.terminal_config().unwrap());
    serve(DtpPeerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        2,
        terminal,
    ))
    .unwrap()
}

fn payload(id: u64, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u64).wrapping_mul(31) as u8 ^ id as u8)
            .collect::<Vec<u8>>(),
    )
}

/// A stream fragment's payload.
fn chunk(id: u64) -> Bytes {
    payload(id, FRAGMENT)
}

/// A Fay connected to `addr` with a session and a `workload` agreement.
fn agree(addr: SocketAddr, config: &FayConfig, workload: DtpWorkload) -> (Fay, AgreementId) {
    let mut fay = Fay::connect(addr, config).with_patience(DEADLINE);
    let agreement = fay.open_agreement(workload.terms());
    (fay, agreement)
}

fn load(n: &std::sync::atomic::AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}

/// Waits (without sleeping) until the peer has counted `n` connections
/// closed: the client already saw the hang-up, the counter follows at once.
fn wait_closed_count(stats: &DtpPeerStats, n: u64) {
    let deadline = Instant::now() + DEADLINE;
    while load(&stats.closed) < n {
        assert!(Instant::now() < deadline, "the peer never closed");
        std::thread::yield_now();
    }
}

/// SPEC SEQ-1 … SEQ-4: CAP, a `pingpong` agreement, 200 round trips with
/// every payload echoed intact.
#[test]
fn pingpong_round_trips_over_cap_and_an_agreement() {
    let keys = BenchKeys::generate().unwrap();
    let peer = peer(&keys);
    let (mut fay, agreement) = agree(peer.local_addr(), &keys.fay_config(), DtpWorkload::Pingpong);
    for id in 1..=200u64 {
        let sent = payload(id, 16 + (id as usize * 37) % 2000);
        fay.ep
            .send_fragment(agreement, id, vec![], sent.clone())
            .unwrap();
        let (got_id, got) = fay.wait("the echo", |e| match e {
            DtpEvent::Fragment {
                agreement_id,
                fragment_id,
                payload,
                ..
            } if *agreement_id == agreement => Some((*fragment_id, payload.clone())),
            _ => None,
        });
        assert_eq!(got_id, id);
        assert_eq!(got, sent, "fragment {id} came back altered");
    }
    let stats = peer.stats();
    assert_eq!(load(&stats.fragments_in), 200);
    fay.close();
    wait_closed_count(&stats, 1);
    assert_eq!(load(&stats.errors), 0);
    assert!(
        load(&stats.frames_out) >= 200,
        "every echo is a sealed frame"
    );
    peer.shutdown().unwrap();
}

/// SPEC RES-2, RES-4: 2,000 fragments of 16 KiB, all acknowledged (the
/// Fay's resume cache drains to 0, through BUFFER_FULL pauses).
#[test]
fn stream_is_fully_acknowledged() {
    let keys = BenchKeys::generate().unwrap();
    let peer = peer(&keys);
    let (mut fay, agreement) = agree(peer.local_addr(), &keys.fay_config(), DtpWorkload::Stream);
    let mut next = 1;
    fay.finish_stream(agreement, &mut next, 2_000, chunk);
    assert_eq!(fay.ep.resume_cache(), (0, 0));
    let stats = peer.stats();
    assert_eq!(load(&stats.fragments_in), 2_000);
    fay.close();
    wait_closed_count(&stats, 1);
    assert_eq!(load(&stats.errors), 0);
    assert_eq!(load(&stats.parked), 0, "a closed session is not parked");
    peer.shutdown().unwrap();
}

/// SPEC SES-2, SES-3, SEQ-5, RES-3: the connection is cut in the middle of
/// a frame; the Fay resumes on a new connection (new CAP, higher key
/// version) and the stream completes with every fragment delivered exactly
/// once.
#[test]
fn stream_survives_a_cut_mid_frame_and_resumes() {
    let keys = BenchKeys::generate().unwrap();
    let config = keys.fay_config();
    let peer = peer(&keys);
    let stats = peer.stats();
    let (mut fay, agreement) = agree(peer.local_addr(), &config, DtpWorkload::Stream);
    let mut next = 1;
    fay.finish_stream(agreement, &mut next, 700, chunk);

    // Queue more, write all but the last bytes of the last frame, cut.
    fay.send_stream(agreement, &mut next, 1_000, chunk);
    let queued = fay.write_all_but(7);
    assert!(queued > FRAGMENT, "a data frame is queued");
    let old_version = fay.ep.key_version();
    let suspended = fay.cut().expect("a Transmitting session is suspended");

    let mut fay = Fay::resume(peer.local_addr(), &config, suspended).with_patience(DEADLINE);
    assert!(fay.ep.key_version() > old_version, "SEQ-5: new keys");
    assert_eq!(fay.ep.agreements().next().map(|a| a.id), Some(agreement));
    fay.finish_stream(agreement, &mut next, 2_000, chunk);
    assert_eq!(fay.ep.resume_cache(), (0, 0));

    assert_eq!(
        load(&stats.fragments_in),
        2_000,
        "each fragment exactly once"
    );
    assert_eq!(load(&stats.parked), 1);
    assert_eq!(load(&stats.resumed), 1);
    assert_eq!(load(&stats.resume_refused), 0);
    fay.close();
    wait_closed_count(&stats, 2);
    peer.shutdown().unwrap();
}

/// SPEC SEQ-5 (the resume grace): the Fay asks to resume while the peer
/// still holds the old connection open (its session not parked yet); the
/// request waits, the old connection ends, and the resume goes through.
#[test]
fn a_resume_waits_for_the_old_connection_to_end() {
    let keys = BenchKeys::generate().unwrap();
    let config = keys.fay_config();
    let peer = peer(&keys);
    let stats = peer.stats();
    let (mut old, agreement) = agree(peer.local_addr(), &config, DtpWorkload::Stream);
    let mut next = 1;
    old.finish_stream(agreement, &mut next, 100, chunk);
    old.send_stream(agreement, &mut next, 120, chunk);
    old.write_all_but(3);
    // The Fay knows the connection is gone; the peer does not, yet.
    let suspended = old.ep.connection_lost(Instant::now()).unwrap();

    let mut fay = Fay::start_resume(peer.local_addr(), &config, suspended).with_patience(DEADLINE);
    // The request reaches the peer and waits for the session.
    let deadline = Instant::now() + DEADLINE;
    while load(&stats.resume_waited) == 0 {
        assert!(Instant::now() < deadline, "the resume never waited");
        fay.turn();
        for event in fay.take_events() {
            assert!(
                !matches!(event, DtpEvent::Established { .. }),
                "resumed before the old connection ended"
            );
        }
    }
    assert_eq!(load(&stats.resumed), 0);
    old.shutdown();
    drop(old);
    fay.wait("the resumed session", |e| {
        matches!(e, DtpEvent::Established { resumed: true, .. }).then_some(())
    });
    fay.finish_stream(agreement, &mut next, 300, chunk);
    assert_eq!(load(&stats.fragments_in), 300, "each fragment exactly once");
    assert_eq!(load(&stats.resumed), 1);
    fay.close();
    wait_closed_count(&stats, 2);
    peer.shutdown().unwrap();
}

/// SPEC SEQ-5: a resume naming a session this peer never parked is refused
/// with RESUME_FAILED (6002) once the grace is over.
#[test]
fn resume_of_an_unknown_session_is_refused() {
    let keys = BenchKeys::generate().unwrap();
    let config = keys.fay_config();
    let first = peer(&keys);
    let (mut fay, agreement) = agree(first.local_addr(), &config, DtpWorkload::Stream);
    let mut next = 1;
    fay.finish_stream(agreement, &mut next, 3, chunk);
    let suspended = fay.ep.connection_lost(Instant::now()).unwrap();
    drop(fay);

    // The same keys, another peer: it never saw this session.
    let second = peer(&keys);
    let mut fay = Fay::start_resume(second.local_addr(), &config, suspended);
    assert_eq!(fay.wait_closed(), Some(ErrorCode::RESUME_FAILED));
    let stats = second.stats();
    wait_closed_count(&stats, 1);
    assert_eq!(load(&stats.resume_refused), 1);
    assert_eq!(load(&stats.resumed), 0);
    second.shutdown().unwrap();
    first.shutdown().unwrap();
}

/// SPEC SEQ-1: a Fay whose credential no trusted issuer signed never gets
/// a session: CAP fails and the peer closes the connection.
#[test]
fn an_untrusted_credential_fails_cap() {
    let keys = BenchKeys::generate().unwrap();
    let stranger = BenchKeys::generate().unwrap();
    let peer = peer(&keys);
    let mut config = stranger.fay_config();
    config.cap.pinned_responder_key = Some(*keys.terminal_noise.public());
    let mut fay = Fay::start(peer.local_addr(), &config);
    let code = fay.wait_closed();
    assert_ne!(code, Some(ErrorCode::NORMAL));
    assert!(!fay.ep.is_established());
    let stats = peer.stats();
    wait_closed_count(&stats, 1);
    assert_eq!(load(&stats.errors), 1);
    assert_eq!(load(&stats.fragments_in), 0);
    peer.shutdown().unwrap();
}

/// SPEC FRM-5: bytes that are not a frame header get a plaintext close
/// with the decode error's code, then the peer hangs up.
#[test]
fn garbage_gets_a_close_frame_and_a_hang_up() {
    let keys = BenchKeys::generate().unwrap();
    let peer = peer(&keys);
    let mut sock = TcpStream::connect(peer.local_addr()).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    sock.write_all(&[0xff; 64]).unwrap();
    let mut got = Vec::new();
    sock.read_to_end(&mut got).unwrap();
    let len = peek_frame_len(&got, &Limits::default()).expect("a frame header");
    assert_eq!(len, got.len(), "one frame, then end of stream");
    let (frame, _) = dtp_codec::decode_frame(&Bytes::from(got), &Limits::default()).unwrap();
    match frame.body {
        dtp_codec::Body::Close(close) => assert_ne!(close.code, ErrorCode::NORMAL),
        other => panic!("expected a close frame, got {other:?}"),
    }
    let stats = peer.stats();
    wait_closed_count(&stats, 1);
    assert_eq!(load(&stats.errors), 1);
    peer.shutdown().unwrap();
}
