//! `[cluster]` with authentication through `dtp serve`: one gateway on an
//! etcd with auth enabled (tokens that expire after 2 s unused) and a
//! nats-server with `--user/--pass` serves a Fay's sessions — also after
//! its etcd token expired — and realtime publications; with a wrong etcd
//! or NATS password it exits non-zero with one line naming the problem,
//! never the secret.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "../../engine/cluster/tests/servers/mod.rs"]
mod servers;
#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use dtp_cluster::nats::NatsAuth;
use dtp_codec::AccessMode;
use dtp_test_kit::Fay;
use servers::{EtcdServer, NatsServer};
use support::{Serve, Setup, dtp};

const ETCD_PASSWORD: &str = "etcd-pw-4c1e";
const NATS_PASSWORD: &str = "nats-pw-9a7d";
const WRONG: &str = "wrong-pw-0b3f";
/// etcd forgets a token unused for this long (s).
const TOKEN_TTL: u32 = 2;

/// The gateway's config: the terminal with `arm`, a realtime stream, and
/// `[cluster]` with both servers and the passwords in files.
fn config(setup: &Setup, etcd: &EtcdServer, nats: &NatsServer, passwords: (&str, &str)) -> PathBuf {
    let dir = &setup.dir;
    std::fs::write(
        dir.join("cluster.secret"),
        "a secret every gateway of the test shares\n",
    )
    .unwrap();
    std::fs::write(dir.join("etcd.password"), format!("{}\n", passwords.0)).unwrap();
    std::fs::write(dir.join("nats.password"), format!("{}\n", passwords.1)).unwrap();
    let section = "[terminal.control]\nterminal_id = \"t1\"\n\n[[terminal.control.resources]]\nresource_id = \"arm\"\n";
    let path = setup.cluster_config((&etcd.addr, "node-a"), section, 500);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!(
        "etcd_user = \"root\"\netcd_password_file = \"etcd.password\"\nnats = \"nats://{}\"\nnats_user = \"gw\"\nnats_password_file = \"nats.password\"\nsecret_file = \"cluster.secret\"\n\n[[realtime.streams]]\nid = \"demo\"\nrecovery = \"CURSOR\"\nevent_types = [\"demo.tick\"]\nscope = \"demo-scope\"\n",
        nats.addr
    ));
    std::fs::write(&path, text).unwrap();
    path
}

fn servers() -> (EtcdServer, NatsServer) {
    let nats = NatsServer::start_with(Some(NatsAuth::UserPassword {
        user: "gw".into(),
        password: NATS_PASSWORD.into(),
    }));
    (EtcdServer::start_auth(ETCD_PASSWORD, TOKEN_TTL), nats)
}

/// Publishes one event on `demo`: the answer's status.
fn publish(realtime: std::net::SocketAddr) -> u16 {
    let body = "{\"eventType\":\"demo.tick\",\"payload\":{\"n\":1}}";
    let mut c = TcpStream::connect(realtime).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "POST /v1/streams/demo/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer dtp-demo-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    answer[9..12].parse().unwrap()
}

#[test]
fn a_gateway_with_etcd_and_nats_credentials_serves() {
    let (etcd, nats) = servers();
    let setup = Setup::new("cluster-auth");
    let fay_files = setup.fay("fay-a", &["arm=write"]);
    let path = config(&setup, &etcd, &nats, (ETCD_PASSWORD, NATS_PASSWORD));
    let config = path.display().to_string();
    let gateway = Serve::launch(
        &[
            "--shards",
            "1",
            "--config",
            &config,
            "--realtime-listen",
            "127.0.0.1:0",
        ],
        true,
    );
    let mut fay = Fay::connect(gateway.addr, &setup.fay_config(&fay_files));
    let sid = fay.session(1, "arm", AccessMode::Write);
    gateway.ctl_ok(&["terminate", &sid.to_string()]);
    assert_eq!(fay.terminated(sid).as_deref(), Some("forced"));
    assert_eq!(publish(gateway.realtime.unwrap()), 201, "published");
    // etcd forgets the gateway's token (its own clock: only waiting
    // reaches it); the next grant and revoke earn a new one.
    std::thread::sleep(Duration::from_secs(u64::from(TOKEN_TTL) + 2));
    let sid = fay.session(2, "arm", AccessMode::Write);
    gateway.ctl_ok(&["terminate", &sid.to_string()]);
    assert_eq!(fay.terminated(sid).as_deref(), Some("forced"));
    assert!(gateway.stop().success());
}

/// `dtp serve` with this config: it must fail at start with one line
/// holding `want`, and show no password.
fn refused_at_start(path: &PathBuf, want: &str) {
    let out = dtp()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-pin",
            "--shards",
            "1",
        ])
        .args(["--realtime-listen", "127.0.0.1:0", "--config"])
        .arg(path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("authentication refused"))
        .collect();
    assert_eq!(lines.len(), 1, "{all}");
    assert!(lines[0].contains(want), "{all}");
    eprintln!("refused at start: {}", lines[0]);
    for secret in [ETCD_PASSWORD, NATS_PASSWORD, WRONG] {
        assert!(!all.contains(secret), "{all}");
    }
}

#[test]
fn a_wrong_password_stops_the_gateway_at_start_with_one_line() {
    let (etcd, nats) = servers();
    let setup = Setup::new("cluster-auth-wrong");
    setup.fay("fay-a", &["arm=write"]);
    let wrong_etcd = config(&setup, &etcd, &nats, (WRONG, NATS_PASSWORD));
    refused_at_start(&wrong_etcd, "cluster.etcd: authentication refused by");
    let wrong_nats = config(&setup, &etcd, &nats, (ETCD_PASSWORD, WRONG));
    refused_at_start(&wrong_nats, "cluster.nats: ");
}
