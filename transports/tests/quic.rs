//! DTP over QUIC (`Quic`) on loopback, beyond what the conformance suite
//! checks of every transport: the certificate pin, other endpoints passed
//! through (alone and stacked on WebSocket), keep-alive and the idle
//! timeout. Both backends each.
//!
//! Nothing sleeps: each test polls until what it waits for, with a
//! deadline that fails loudly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod backends;

use backends::{closed, driver, on_both_backends, received};

use std::time::{Duration, Instant};

use dtp_transports::{
    BackendPreference, CertPin, CloseReason, Endpoint, Event, Quic, QuicConfig, QuicIdentity,
    Transport, WebSocket, WsConfig,
};

fn any_port() -> Endpoint {
    Endpoint::Quic("127.0.0.1:0".parse().unwrap())
}

/// Polls both until `done` says so with the events each saw (server's,
/// client's), failing after 20 s.
fn until<S: Transport, C: Transport>(
    server: &mut S,
    client: &mut C,
    seen: &mut (Vec<Event>, Vec<Event>),
    what: &str,
    done: impl Fn(&(Vec<Event>, Vec<Event>)) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(seen) {
        assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
        let wait = Some(Duration::from_millis(2));
        server.poll(&mut seen.0, wait).unwrap();
        client.poll(&mut seen.1, wait).unwrap();
    }
}

on_both_backends!(
    a_server_whose_certificate_is_not_pinned_is_refused,
    other_endpoints_pass_through_alone_and_stacked_on_websocket,
    keep_alive_holds_an_idle_connection_and_the_idle_timeout_ends_a_vanished_peer,
);

fn a_server_whose_certificate_is_not_pinned_is_refused(backend: BackendPreference) {
    let mut server = Quic::new(driver(backend, 16 * 1024), QuicConfig::default()).unwrap();
    let other = Quic::new(driver(backend, 16 * 1024), QuicConfig::default()).unwrap();
    let mut client = Quic::new(
        driver(backend, 16 * 1024),
        QuicConfig {
            pins: vec![CertPin::Sha256(other.fingerprint().unwrap())],
            ..QuicConfig::default()
        },
    )
    .unwrap();
    let (_, at) = server.listen(&any_port(), false).unwrap();
    let id = client.connect(&at).unwrap();
    let mut seen = Default::default();
    until(&mut server, &mut client, &mut seen, "the refusal", |s| {
        closed(&s.1, id).is_some()
    });
    assert!(
        matches!(closed(&seen.1, id), Some(CloseReason::ConnectFailed(_))),
        "{:?}",
        seen.1
    );
    assert!(
        !seen.0.iter().any(|e| matches!(e, Event::Accepted { .. })),
        "the server reported a connection whose handshake failed"
    );
}

fn other_endpoints_pass_through_alone_and_stacked_on_websocket(backend: BackendPreference) {
    let ws = |backend| WebSocket::new(driver(backend, 16 * 1024), WsConfig::default());
    let mut server = Quic::new(ws(backend), QuicConfig::default()).unwrap();
    let pin = CertPin::Sha256(server.fingerprint().unwrap());
    // A client only: no certificate made, and listening refused.
    let mut client = Quic::new(
        ws(backend),
        QuicConfig {
            identity: QuicIdentity::ClientOnly,
            pins: vec![pin],
            ..QuicConfig::default()
        },
    )
    .unwrap();
    assert_eq!(client.fingerprint(), None);
    let refused = client.listen(&any_port(), false).err().unwrap();
    assert!(refused.to_string().contains("only connects"), "{refused}");
    let listens = [
        any_port(),
        Endpoint::Tcp("127.0.0.1:0".parse().unwrap()),
        Endpoint::Ws {
            addr: "127.0.0.1:0".parse().unwrap(),
            path: "/dtp".to_owned(),
        },
    ];
    let mut seen: (Vec<Event>, Vec<Event>) = Default::default();
    for listen in listens {
        let (listener, at) = server.listen(&listen, false).unwrap();
        assert_eq!(at.scheme(), listen.scheme());
        let id = client.connect(&at).unwrap();
        until(&mut server, &mut client, &mut seen, "accepted", |s| {
            s.0.iter()
                .any(|e| matches!(e, Event::Accepted { listener: l, .. } if *l == listener))
        });
        let accepted = seen
            .0
            .iter()
            .find_map(|e| match e {
                Event::Accepted { listener: l, conn } if *l == listener => Some(*conn),
                _ => None,
            })
            .unwrap();
        client.send(id, at.scheme().as_bytes()).unwrap();
        server.send(accepted, b"back").unwrap();
        until(&mut server, &mut client, &mut seen, "both ways", |s| {
            received(&s.0, accepted).len() == at.scheme().len() && received(&s.1, id).len() == 4
        });
        assert_eq!(received(&seen.0, accepted), at.scheme().as_bytes());
        assert_eq!(received(&seen.1, id), b"back");
        client.close(id);
        until(&mut server, &mut client, &mut seen, "closed", |s| {
            closed(&s.0, accepted).is_some() && closed(&s.1, id).is_some()
        });
        assert_eq!(closed(&seen.0, accepted), Some(CloseReason::PeerClosed));
        seen.0.clear();
        seen.1.clear();
    }
}

fn keep_alive_holds_an_idle_connection_and_the_idle_timeout_ends_a_vanished_peer(
    backend: BackendPreference,
) {
    let config = QuicConfig {
        idle_timeout: Duration::from_millis(2000),
        keep_alive: Duration::from_millis(200),
        ..QuicConfig::default()
    };
    let mut server = Quic::new(driver(backend, 16 * 1024), config.clone()).unwrap();
    let mut client = Quic::new(
        driver(backend, 16 * 1024),
        QuicConfig {
            pins: vec![CertPin::Sha256(server.fingerprint().unwrap())],
            ..config
        },
    )
    .unwrap();
    let (_, at) = server.listen(&any_port(), false).unwrap();
    let id = client.connect(&at).unwrap();
    let mut seen: (Vec<Event>, Vec<Event>) = Default::default();
    until(&mut server, &mut client, &mut seen, "up", |s| {
        s.0.iter().any(|e| matches!(e, Event::Accepted { .. }))
            && s.1.iter().any(|e| matches!(e, Event::Connected { .. }))
    });
    // Two idle timeouts with nothing sent by the user: keep-alives hold it.
    let idle_until = Instant::now() + Duration::from_millis(3000);
    until(&mut server, &mut client, &mut seen, "idle", |_| {
        Instant::now() >= idle_until
    });
    assert_eq!(closed(&seen.1, id), None, "{:?}", seen.1);
    assert!(
        !seen.0.iter().any(|e| matches!(e, Event::Closed { .. })),
        "{:?}",
        seen.0
    );
    // The client vanishes without a word: the server's idle timeout ends it.
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.0.iter().any(|e| matches!(e, Event::Closed { .. })) {
        assert!(Instant::now() < deadline, "never timed out");
        server
            .poll(&mut seen.0, Some(Duration::from_millis(50)))
            .unwrap();
    }
    assert!(
        seen.0.iter().any(|e| matches!(
            e,
            Event::Closed {
                reason: CloseReason::Error(libc::ETIMEDOUT),
                ..
            }
        )),
        "{:?}",
        seen.0
    );
}
