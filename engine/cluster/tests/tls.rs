//! TLS to a real etcd (`https://` client URLs) and a real nats-server
//! (`--tls`), each with a certificate for 127.0.0.1 from a CA of the
//! test's own: requests, watches, leases and JetStream work when the
//! client trusts that CA, and fail when it trusts another or speaks plain
//! TCP.

#![allow(clippy::unwrap_used, reason = "tests")]

mod servers;

use std::time::Duration;

use dtp_cluster::etcd::Etcd;
use dtp_cluster::nats::{JetStream, Nats, NatsConfig, Publish, StreamConfig};
use dtp_cluster::{Error, HttpConfig};
use servers::{EtcdServer, NatsServer, TempDir, Tls};

#[test]
fn etcd_over_tls() {
    let server = EtcdServer::start_tls();
    let mut etcd = server.client();
    let lease = etcd.lease_grant(30).unwrap();
    let rev = etcd.put(b"k", b"v1", Some(lease.id)).unwrap();
    let mut watch = etcd.watch(b"k", None, rev + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    etcd.put(b"k", b"v2", Some(lease.id)).unwrap();
    assert_eq!(watch.next().unwrap().unwrap().kv.value, b"v2");
    assert!(etcd.lease_keepalive_once(lease.id).unwrap() > 0);
    // The kept-alive TLS connection carries request after request.
    for _ in 0..20 {
        assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().value, b"v2");
    }

    let other = TempDir::new("other-ca");
    let config = HttpConfig {
        tls: Some(Tls::new(other.path()).client()),
        ..HttpConfig::default()
    };
    let mut stranger = Etcd::new(&[&server.url()], config).unwrap();
    let e = stranger.get(b"k").unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    let mut plain =
        Etcd::new(&[&format!("http://{}", server.addr)], HttpConfig::default()).unwrap();
    assert!(plain.get(b"k").is_err());
    assert!(
        matches!(
            Etcd::new(&[&server.url()], HttpConfig::default()),
            Err(Error::InvalidRequest(_))
        ),
        "https:// without a CA is refused"
    );
}

#[test]
fn jetstream_over_tls() {
    let server = NatsServer::start_tls();
    let mut js = server.jetstream();
    js.ensure_stream(&StreamConfig::new("TLS", &["tls.>"]))
        .unwrap();
    let ack = js.publish("tls.x", b"sealed", &Publish::default()).unwrap();
    assert_eq!(js.get("TLS", ack.seq).unwrap().unwrap().payload, b"sealed");

    let plain = Nats::connect(&[&server.addr], NatsConfig::default()).map(JetStream::new);
    let e = plain.unwrap_err();
    assert!(e.to_string().contains("requires TLS"), "{e}");
    let other = TempDir::new("other-ca");
    let config = NatsConfig {
        tls: Some(Tls::new(other.path()).client()),
        ..NatsConfig::default()
    };
    let e = Nats::connect(&[&server.addr], config).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
}
