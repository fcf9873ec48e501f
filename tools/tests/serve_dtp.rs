//! `dtp serve` with the DTP protocol on (`[dtp] enabled = true`): keys and
//! credentials in files as `dtp cred` writes them, a Fay (the test kit's)
//! that runs CAP, an agreement and encrypted pingpong fragments against the
//! real binary, a Fay that resumes after the gateway restarted on its
//! `session_store` (and is refused without one), and configuration errors
//! that name their key.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the serve tests; each uses part of it"
)]
mod support;

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_bench::dtp_workload::DtpWorkload;
use dtp_codec::{AccessMode, AgreementId, ErrorCode};
use dtp_gateway::dtp::{DtpEvent, SuspendedSession};
use dtp_test_kit::{Fay, Keys};
use support::{Scratch, Serve, dtp, session_files, write_dtp_config};

fn keys() -> Keys {
    Keys::new(31, "bench-fay", &[("bench", &[AccessMode::Read])])
}

#[test]
fn serve_runs_cap_and_encrypted_pingpong_with_keys_from_files() {
    let dir = Scratch::new("pingpong");
    let keys = keys();
    let config = write_dtp_config(&dir.0, &keys, "");
    let serve = Serve::start_dtp(&config);
    let mut fay = Fay::start(serve.addr, &keys.fay_config());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut agreement = None;
    let mut answers = Vec::new();
    let mut sent = 0u64;
    while answers.len() < 50 {
        assert!(Instant::now() < deadline, "no progress: {answers:?}");
        fay.turn();
        assert!(!fay.is_eof(), "the gateway closed the connection");
        for event in fay.take_events() {
            match event {
                DtpEvent::Established { .. } => {
                    fay.ep
                        .request_collection(DtpWorkload::Pingpong.terms(), Instant::now())
                        .unwrap();
                }
                DtpEvent::AgreementActive { agreement_id, .. } => agreement = Some(agreement_id),
                DtpEvent::Fragment {
                    fragment_id,
                    payload,
                    ..
                } => {
                    assert_eq!(payload, Bytes::from(vec![fragment_id as u8; 66]));
                    answers.push(fragment_id);
                }
                DtpEvent::Closed { code } => panic!("closed with {code}"),
                _ => {}
            }
        }
        // One fragment in flight: the next once the last is answered.
        if let Some(a) = agreement
            && sent == answers.len() as u64
        {
            sent += 1;
            fay.ep
                .send_fragment(a, sent, vec![], Bytes::from(vec![sent as u8; 66]))
                .unwrap();
        }
    }
    assert_eq!(answers, (1..=50).collect::<Vec<u64>>());
    assert!(
        fay.ep.crypto_stats().opened_frames >= 50,
        "answers came sealed"
    );
}

/// `dtp serve` on `config`, which must be refused as a bad configuration
/// (exit status 2, `error: BAD_CONFIG …`): its stderr.
fn refused(config: &Path) -> String {
    let out = dtp()
        .args(["serve", "--no-admin", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: BAD_CONFIG"), "{err}");
    err
}

#[test]
fn dtp_configuration_errors_name_their_key() {
    let scratch = Scratch::new("bad");
    let dir = &scratch.0;
    for (text, key) in [
        ("[dtp]\nenabled = true\n", "dtp.terminal_key"),
        (
            "[dtp]\nenabled = true\nterminal_key = \"/nonexistent/terminal.key\"\n",
            "dtp.terminal_key",
        ),
        (
            "[dtp]\nenabled = true\nterminal_key = \"CONFIG\"\n",
            "dtp.terminal_key",
        ),
        ("[dtp]\nenabled = true\nalgorithms = [\"rot13\"]\n", "dtp."),
        ("[dtp]\nenabeld = true\n", "enabeld"),
        (
            "[dtp]\nenabled = true\nidle_timeout_ms = 60000\n",
            "dtp.idle_timeout_ms 60000 must be above 60000",
        ),
    ] {
        let path = dir.join("bad.toml");
        // A file that exists but is not a key: the config file itself.
        std::fs::write(&path, text.replace("CONFIG", &path.display().to_string())).unwrap();
        let err = refused(&path);
        assert!(err.contains(key), "{text}: {err}");
    }
}

/// A pingpong fragment's payload.
fn payload(id: u64) -> Bytes {
    Bytes::from(vec![id as u8; 66])
}

/// Sends `ids` one at a time on a pingpong agreement, each answered (the
/// same id and payload) before the next; the answers' ids go to `answers`.
fn pingpong(
    fay: &mut Fay,
    agreement: AgreementId,
    ids: RangeInclusive<u64>,
    answers: &mut Vec<u64>,
) {
    for id in ids {
        fay.send_fragment(agreement, id, payload(id));
        let (got, p) = fay.fragment();
        assert_eq!(p, payload(got), "fragment {got} altered");
        answers.push(got);
    }
}

/// A Fay with a pingpong agreement, ten fragments answered and the
/// eleventh in flight, cut off: its suspended session and the answers.
fn cut_after_ten(serve: &Serve, keys: &Keys) -> (SuspendedSession, AgreementId, Vec<u64>) {
    let mut fay = Fay::connect(serve.addr, &keys.fay_config());
    let agreement = fay.open_agreement(DtpWorkload::Pingpong.terms());
    let mut answers = Vec::new();
    pingpong(&mut fay, agreement, 1..=10, &mut answers);
    // Written but not read back: its answer must not be taken before the cut.
    fay.ep
        .send_fragment(agreement, 11, vec![], payload(11))
        .unwrap();
    fay.flush();
    let suspended = fay.cut().expect("a session with an agreement suspends");
    (suspended, agreement, answers)
}

/// SPEC SES-2, SES-3, RES-2, RES-3 through `dtp serve`: with
/// `[dtp] session_store`, a session cut off is written to the store, and a
/// gateway stopped (SIGTERM) and started again on the same store resumes
/// it: the fragments answered before the cut stay answered, the one in
/// flight is answered once, and the stream goes on with nothing lost or
/// delivered twice.
#[test]
fn a_fay_resumes_after_the_gateway_restarts_on_its_session_store() {
    let dir = Scratch::new("store");
    let keys = keys();
    // Relative: the store is found beside the configuration file.
    let config = write_dtp_config(&dir.0, &keys, "session_store = \"sessions\"\n");
    let store = dir.0.join("sessions");
    let serve = Serve::start_dtp(&config);
    let (suspended, agreement, mut answers) = cut_after_ten(&serve, &keys);
    support::eventually("the session parked in the store", || {
        (session_files(&store).len() == 1).then_some(())
    });
    assert!(serve.stop().success());
    assert_eq!(
        session_files(&store).len(),
        1,
        "the session outlived the gateway"
    );

    let serve = Serve::start_dtp(&config);
    let mut fay = Fay::resume(serve.addr, &keys.fay_config(), suspended);
    assert!(
        session_files(&store).is_empty(),
        "a resumed session is taken from the store"
    );
    // The fragment in flight at the cut is answered once, whichever side
    // resent it.
    let (id, p) = fay.fragment();
    assert_eq!((id, p), (11, payload(11)));
    answers.push(id);
    pingpong(&mut fay, agreement, 12..=20, &mut answers);
    assert_eq!(answers, (1..=20).collect::<Vec<u64>>());
    // Nothing more comes: no answer twice, no error.
    for _ in 0..10 {
        fay.turn();
    }
    let late: Vec<DtpEvent> = fay
        .take_events()
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                DtpEvent::Fragment { .. } | DtpEvent::Error(_) | DtpEvent::Closed { .. }
            )
        })
        .collect();
    assert!(late.is_empty(), "{late:?}");
    assert!(serve.stop().success());
}

/// SPEC SES-3: without `session_store`, suspended sessions live in the
/// gateway's memory only: a restarted gateway refuses the resume with
/// RESUME_FAILED.
#[test]
fn without_a_session_store_a_restarted_gateway_refuses_the_resume() {
    let dir = Scratch::new("no-store");
    let keys = keys();
    let config = write_dtp_config(&dir.0, &keys, "");
    let serve = Serve::start_dtp(&config);
    let (suspended, _, answers) = cut_after_ten(&serve, &keys);
    assert_eq!(answers, (1..=10).collect::<Vec<u64>>());
    assert!(serve.stop().success());

    let serve = Serve::start_dtp(&config);
    let mut fay = Fay::start_resume(serve.addr, &keys.fay_config(), suspended);
    assert_eq!(fay.closed(), ErrorCode::RESUME_FAILED);
    assert!(serve.stop().success());
}

/// A `session_store` the gateway cannot use (a file, not a directory) is
/// refused at start-up with one line naming the key.
#[test]
fn a_session_store_that_cannot_be_used_is_refused_naming_the_key() {
    let dir = Scratch::new("bad-store");
    let keys = keys();
    std::fs::write(dir.0.join("taken"), "not a directory").unwrap();
    let config = write_dtp_config(&dir.0, &keys, "session_store = \"taken\"\n");
    let err = refused(&config);
    assert!(err.contains("dtp.session_store"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// SPEC SEQ-1 against slow or silent peers on the DTP port: CAP must end
/// within its 10 s from the connection's start, however the bytes trickle
/// in. One connection sends nothing; one sends a byte a second (of a frame
/// head it never finishes): the gateway closes both, and the slow one is
/// not kept alive by its bytes.
#[test]
fn a_peer_that_never_finishes_cap_is_cut_at_the_handshake_timeout() {
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;
    let dir = Scratch::new("cap-slowloris");
    let config = write_dtp_config(&dir.0, &keys(), "");
    let serve = Serve::start_dtp(&config);
    let mut silent = TcpStream::connect(serve.addr).unwrap();
    let mut slow = TcpStream::connect(serve.addr).unwrap();
    let start = Instant::now();
    slow.set_read_timeout(Some(Duration::from_millis(900)))
        .unwrap();
    // A real first handshake frame, of which the gateway gets a byte a
    // second and never the end.
    let frame = dtp_codec::LogicalFrame::plain(
        0,
        dtp_codec::Body::Handshake(dtp_codec::HandshakeFrame {
            stage: 1,
            message: Bytes::from(vec![0x42; 200]),
        }),
    )
    .to_bytes(&dtp_codec::Limits::default())
    .unwrap();
    let mut trickle = frame.iter();
    let mut buf = [0u8; 256];
    let took = loop {
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "the trickling connection was never closed"
        );
        let byte = *trickle.next().expect("the whole frame was sent");
        if slow.write_all(&[byte]).is_err() {
            break start.elapsed();
        }
        match slow.read(&mut buf) {
            Ok(0) => break start.elapsed(),
            // Whatever the gateway says before it closes.
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break start.elapsed(),
        }
    };
    assert!(took >= Duration::from_secs(9), "closed too early: {took:?}");
    // The silent one was closed too: its read ends, it does not time out.
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    loop {
        match silent.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the silent connection stayed open: {e}"),
        }
    }
}
