//! Authentication against real servers: an etcd with auth enabled through
//! its own API and short-lived tokens, nats-servers with `--user/--pass`
//! and with `--auth`. Right credentials work (also after etcd forgot the
//! token), wrong or missing ones are [`Error::AuthRefused`] and never
//! show the secret.

#![allow(clippy::unwrap_used, reason = "tests")]

mod servers;

use std::time::Duration;

use dtp_cluster::etcd::{Etcd, EtcdAuth};
use dtp_cluster::nats::{JetStream, Nats, NatsAuth, NatsConfig, Publish, StreamConfig};
use dtp_cluster::{Error, HttpConfig};
use servers::{EtcdServer, NatsServer};

const PASSWORD: &str = "pw-9f2c-etcd";
/// etcd forgets a token unused for this long (s).
const TOKEN_TTL: u32 = 2;

fn etcd_with(server: &EtcdServer, auth: Option<EtcdAuth>) -> Etcd {
    let config = HttpConfig {
        auth,
        ..HttpConfig::default()
    };
    Etcd::new(&[&server.addr], config).unwrap()
}

/// Waits until etcd has forgotten every token issued so far. etcd counts
/// a token's life on its own clock, which a test cannot drive: sleeping
/// past it is the only way to reach an expired token.
fn outlive_tokens() {
    std::thread::sleep(Duration::from_secs(u64::from(TOKEN_TTL) + 2));
}

#[test]
fn etcd_tokens_are_renewed_after_they_expire_for_reads_writes_watches_and_leases() {
    let server = EtcdServer::start_auth(PASSWORD, TOKEN_TTL);
    let auth = server.auth.clone().unwrap();
    let mut etcd = server.client();
    let lease = etcd.lease_grant(30).unwrap();
    let rev = etcd.put(b"k", b"v1", Some(lease.id)).unwrap();
    assert_eq!(auth.authentications(), 1);
    outlive_tokens();
    // Every kind of request survives the expiry: each finds the token
    // refused, authenticates once more and is sent again.
    assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().mod_revision, rev);
    assert_eq!(auth.authentications(), 2, "re-authenticated once");
    outlive_tokens();
    let mut watch = etcd.watch(b"k", None, rev + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    outlive_tokens();
    let rev2 = etcd.put(b"k", b"v2", Some(lease.id)).unwrap();
    assert!(rev2 > rev);
    assert_eq!(watch.next().unwrap().unwrap().kv.value, b"v2");
    outlive_tokens();
    assert!(etcd.lease_keepalive_once(lease.id).unwrap() > 0);
    assert!(auth.authentications() >= 4, "{}", auth.authentications());
}

#[test]
fn etcd_workers_sharing_credentials_authenticate_once_per_expiry() {
    let server = EtcdServer::start_auth(PASSWORD, TOKEN_TTL);
    let auth = server.auth.clone().unwrap();
    let mut clients: Vec<Etcd> = (0..4).map(|_| server.client()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.put(format!("w/{i}").as_bytes(), b"x", None).unwrap();
    }
    assert_eq!(auth.authentications(), 1, "one token for every client");
    outlive_tokens();
    // Every worker meets the expired token at once: one authenticates,
    // the others take its token.
    let barrier = std::sync::Barrier::new(clients.len());
    std::thread::scope(|s| {
        for (i, mut c) in clients.into_iter().enumerate() {
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                let got = c.get(format!("w/{i}").as_bytes()).unwrap();
                assert_eq!(got.kv.unwrap().value, b"x");
            });
        }
    });
    assert_eq!(auth.authentications(), 2);
}

/// etcd keeps tokens in memory only; 3.4 replays the authentication
/// from its write-ahead log on restart, so a recent token may be known
/// again — either way the client goes on.
#[test]
fn etcd_tokens_survive_a_restart_or_are_earned_again() {
    let mut server = EtcdServer::start_auth(PASSWORD, 300);
    let auth = server.auth.clone().unwrap();
    let mut etcd = server.client();
    let rev = etcd.put(b"k", b"v", None).unwrap();
    server.kill_and_restart();
    assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().mod_revision, rev);
    assert!(etcd.put(b"k", b"w", None).unwrap() > rev);
    assert!(auth.authentications() <= 2, "{}", auth.authentications());
}

#[test]
fn etcd_refuses_a_wrong_password_and_no_credentials_with_a_typed_error() {
    let server = EtcdServer::start_auth(PASSWORD, TOKEN_TTL);
    let wrong = EtcdAuth::new("root", "not-the-password").unwrap();
    let mut etcd = etcd_with(&server, Some(wrong.clone()));
    let e = etcd.put(b"k", b"v", None).unwrap_err();
    assert!(matches!(&e, Error::AuthRefused { .. }), "{e}");
    assert!(!e.to_string().contains("not-the-password"), "{e}");
    assert!(!format!("{e:?} {wrong:?}").contains("not-the-password"));
    // A lease grant, which etcd 3.4 does not check, is refused too: the
    // client authenticates before its first request.
    assert!(matches!(
        etcd.lease_grant(10),
        Err(Error::AuthRefused { .. })
    ));
    let mut anonymous = etcd_with(&server, None);
    for e in [
        anonymous.get(b"k").unwrap_err(),
        anonymous.put(b"k", b"v", None).unwrap_err(),
        anonymous.watch(b"k", None, 0).unwrap_err(),
    ] {
        assert!(
            matches!(&e, Error::AuthRefused { message, .. } if message.contains("requires credentials")),
            "{e}"
        );
    }
    assert_eq!(
        server.client().get(b"k").unwrap().kv,
        None,
        "nothing written"
    );
    assert!(!server.log().contains(PASSWORD));
}

#[test]
fn credentials_also_work_with_an_etcd_that_has_auth_off() {
    let server = EtcdServer::start();
    let auth = EtcdAuth::new("root", "anything").unwrap();
    let mut etcd = etcd_with(&server, Some(auth.clone()));
    etcd.put(b"k", b"v", None).unwrap();
    assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().value, b"v");
    assert_eq!(auth.authentications(), 1, "asked once, then no token sent");
}

fn nats_with(server: &NatsServer, auth: Option<NatsAuth>) -> Result<JetStream, Error> {
    let config = NatsConfig {
        auth,
        connect_timeout: Duration::from_secs(5),
        ..NatsConfig::default()
    };
    Nats::connect(&[&server.addr], config).map(JetStream::new)
}

/// Publishes and reads back with the right credentials — also after a
/// server restart, so a reconnect sends them again — and is refused
/// with `wrong` and with none.
fn nats_auth_round_trip(auth: NatsAuth, wrong: NatsAuth, secret: &str) {
    let mut server = NatsServer::start_with(Some(auth.clone()));
    let mut js = nats_with(&server, Some(auth)).unwrap();
    js.ensure_stream(&StreamConfig::new("AUTH", &["auth.>"]))
        .unwrap();
    let ack = js.publish("auth.x", b"one", &Publish::default()).unwrap();
    assert_eq!(js.get("AUTH", ack.seq).unwrap().unwrap().payload, b"one");
    server.kill_and_restart();
    // The old connection died with the server: the next call reconnects.
    let _ = js.stream_info("AUTH");
    let ack = js.publish("auth.x", b"two", &Publish::default()).unwrap();
    assert_eq!(js.get("AUTH", ack.seq).unwrap().unwrap().payload, b"two");
    let e = nats_with(&server, Some(wrong)).unwrap_err();
    assert!(matches!(&e, Error::AuthRefused { .. }), "{e}");
    assert!(!format!("{e} {e:?}").contains(secret), "{e}");
    let e = nats_with(&server, None).unwrap_err();
    assert!(
        matches!(&e, Error::AuthRefused { message, .. } if message.contains("requires credentials")),
        "{e}"
    );
}

#[test]
fn nats_user_and_password() {
    let user = |password: &str| NatsAuth::UserPassword {
        user: "gw".into(),
        password: password.into(),
    };
    nats_auth_round_trip(user("nats-pw-71c"), user("wrong-pw-3d1"), "wrong-pw-3d1");
}

#[test]
fn nats_token() {
    nats_auth_round_trip(
        NatsAuth::Token("nats-token-5be".into()),
        NatsAuth::Token("wrong-token-0aa".into()),
        "wrong-token-0aa",
    );
}
