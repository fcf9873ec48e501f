//! A real counterpart for DTP over QUIC: quinn (the tokio-driven QUIC
//! stack) as client of our `Quic` server and as server of our client,
//! exchanging DTP frames (made by `dtp_codec`'s encoder) both ways over
//! one bidirectional stream with ALPN `dtp/1`. The bytes must arrive
//! unchanged (SPEC TRN-5) and decode to the frames sent (SPEC FRM-3).
//!
//! Loopback only; the quinn side runs on a tokio runtime of its own
//! thread, ours on the test's thread. Nothing sleeps: each side waits on
//! its events, with a deadline that fails loudly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod backends;

use backends::{closed, driver, on_both_backends, received};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_codec::{Limits, LogicalFrame, decode_frame, samples};
use dtp_transports::{
    BackendPreference, CertPin, CloseReason, ConnId, Endpoint, Event, QUIC_ALPN, Quic, QuicConfig,
    Transport, cert_sha256,
};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

/// Every sample frame, encoded back to back.
fn encoded(frames: &[LogicalFrame]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for f in frames {
        f.encode(&mut out, &Limits::default()).unwrap();
    }
    out.to_vec()
}

/// The frames in `bytes`, decoded one after another; all of them.
fn decoded(bytes: &[u8]) -> Vec<LogicalFrame> {
    let mut rest = Bytes::copy_from_slice(bytes);
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let (f, n) = decode_frame(&rest, &Limits::default()).unwrap();
        frames.push(f);
        let _ = rest.split_to(n);
    }
    frames
}

/// What the client sends (the samples, many times: more than one flight
/// of packets and than the first flow-control window) and the server
/// answers (the same in reverse, so the two directions differ).
fn traffic() -> (Vec<LogicalFrame>, Vec<LogicalFrame>, Vec<u8>, Vec<u8>) {
    let mut up = Vec::new();
    while encoded(&up).len() < 150_000 {
        up.extend(samples());
    }
    let mut down = up.clone();
    down.reverse();
    let (a, b) = (encoded(&up), encoded(&down));
    assert!(a.len() < 1 << 20 && a != b);
    (up, down, a, b)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Polls `ours` until `done`, failing after 20 s.
fn poll_until<T: Transport>(
    ours: &mut T,
    seen: &mut Vec<Event>,
    what: &str,
    done: impl Fn(&[Event]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(seen) {
        assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
        ours.poll(seen, Some(Duration::from_millis(5))).unwrap();
    }
}

on_both_backends!(
    a_quinn_client_exchanges_dtp_frames_with_our_server,
    our_client_exchanges_dtp_frames_with_a_quinn_server,
);

/// quinn's client trusts our server's certificate as its root, asks for
/// `localhost` and ALPN `dtp/1`, writes the samples, and reads the answer
/// to the end (our server closes after answering).
fn a_quinn_client_exchanges_dtp_frames_with_our_server(backend: BackendPreference) {
    let (up, down, up_bytes, down_bytes) = traffic();
    let mut ours = Quic::new(driver(backend, 16 * 1024), QuicConfig::default()).unwrap();
    let (listener, at) = ours
        .listen(&Endpoint::Quic("127.0.0.1:0".parse().unwrap()), false)
        .unwrap();
    let Endpoint::Quic(addr) = at else {
        panic!("{at}")
    };
    let cert = CertificateDer::from(ours.certificate().unwrap().to_vec());
    let sent = up_bytes.clone();
    let (tx, rx) = mpsc::channel();
    let peer = std::thread::spawn(move || {
        let got = runtime().block_on(async move {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(cert).unwrap();
            let mut tls = rustls::ClientConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            tls.alpn_protocols = vec![QUIC_ALPN.to_vec()];
            let tls = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(tls)));
            let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            send.write_all(&sent).await.unwrap();
            let got = recv.read_to_end(1 << 20).await.unwrap();
            endpoint.wait_idle().await;
            got
        });
        tx.send(got).unwrap();
    });
    let mut seen = Vec::new();
    poll_until(&mut ours, &mut seen, "the client's frames", |s| {
        s.iter()
            .any(|e| matches!(e, Event::Accepted { listener: l, .. } if *l == listener))
            && {
                let id = accepted(s);
                received(s, id).len() >= up_bytes.len()
            }
    });
    let id = accepted(&seen);
    let got = received(&seen, id);
    assert!(got == up_bytes, "{backend:?}: the client's bytes changed");
    assert_eq!(decoded(&got), up);
    ours.send(id, &down_bytes).unwrap();
    ours.close(id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        assert!(Instant::now() < deadline, "the quinn client never finished");
        ours.poll(&mut seen, Some(Duration::from_millis(5)))
            .unwrap();
        if let Ok(answer) = rx.try_recv() {
            break answer;
        }
    };
    peer.join().unwrap();
    assert!(
        answer == down_bytes,
        "{backend:?}: our answer changed on the way"
    );
    assert_eq!(decoded(&answer), down);
    poll_until(&mut ours, &mut seen, "our side closed", |s| {
        closed(s, id).is_some()
    });
    assert_eq!(closed(&seen, id), Some(CloseReason::Local));
}

fn accepted(events: &[Event]) -> ConnId {
    events
        .iter()
        .find_map(|e| match e {
            Event::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
        .unwrap()
}

/// quinn's server presents a certificate it made; our client pins it. The
/// server takes our stream, reads the samples, answers, finishes its side
/// and waits for our close.
fn our_client_exchanges_dtp_frames_with_a_quinn_server(backend: BackendPreference) {
    let (up, down, up_bytes, down_bytes) = traffic();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let expect = up_bytes.len();
    let answer = down_bytes.clone();
    let peer = std::thread::spawn(move || {
        runtime().block_on(async move {
            let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
            let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
            let cert = made.cert.der().clone();
            let mut tls = rustls::ServerConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert.clone()], key.into())
                .unwrap();
            tls.alpn_protocols = vec![QUIC_ALPN.to_vec()];
            let tls = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
            let config = quinn::ServerConfig::with_crypto(Arc::new(tls));
            let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
            let addr: SocketAddr = endpoint.local_addr().unwrap();
            ready_tx.send((addr, cert.to_vec())).unwrap();
            let conn = endpoint.accept().await.unwrap().await.unwrap();
            let alpn = conn
                .handshake_data()
                .and_then(|h| h.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
                .and_then(|h| h.protocol);
            let (mut send, mut recv) = conn.accept_bi().await.unwrap();
            let mut got = vec![0; expect];
            recv.read_exact(&mut got).await.unwrap();
            send.write_all(&answer).await.unwrap();
            send.finish().unwrap();
            // Our client closes once it has read the answer and the FIN.
            let why = conn.closed().await;
            done_tx.send((got, alpn, why.to_string())).unwrap();
        });
    });
    let (addr, cert) = ready_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let mut ours = Quic::new(
        driver(backend, 16 * 1024),
        QuicConfig {
            pins: vec![CertPin::Sha256(cert_sha256(&cert))],
            ..QuicConfig::default()
        },
    )
    .unwrap();
    let id = ours.connect(&Endpoint::Quic(addr)).unwrap();
    ours.send(id, &up_bytes).unwrap();
    let mut seen = Vec::new();
    poll_until(
        &mut ours,
        &mut seen,
        "the answer and the server's FIN",
        |s| closed(s, id).is_some(),
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, Event::Connected { conn } if *conn == id))
    );
    assert_eq!(closed(&seen, id), Some(CloseReason::PeerClosed));
    let got = received(&seen, id);
    assert!(got == down_bytes, "{backend:?}: the server's bytes changed");
    assert_eq!(decoded(&got), down);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (server_got, alpn, why) = loop {
        assert!(
            Instant::now() < deadline,
            "the quinn server never saw our close"
        );
        ours.poll(&mut seen, Some(Duration::from_millis(5)))
            .unwrap();
        if let Ok(done) = done_rx.try_recv() {
            break done;
        }
    };
    peer.join().unwrap();
    assert!(
        server_got == up_bytes,
        "{backend:?}: our bytes changed on the way"
    );
    assert_eq!(decoded(&server_got), up);
    assert_eq!(alpn.as_deref(), Some(QUIC_ALPN));
    assert!(why.contains("closed by peer"), "{why}");
}
