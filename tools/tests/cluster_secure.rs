//! `[cluster]` with authentication and TLS through `dtp serve`: one
//! gateway on an etcd with auth enabled (tokens that expire after 2 s
//! unused) and a nats-server with `--user/--pass` serves a Fay's sessions
//! — also after its etcd token expired — and realtime publications; with
//! a wrong etcd or NATS password it exits non-zero with one line naming
//! the problem, never the secret. Another serves over TLS to both servers
//! (`https://` etcd, `tls://` NATS, `ca_file`).

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
use std::path::{Path, PathBuf};
use std::time::Duration;

use dtp_cluster::nats::NatsAuth;
use dtp_codec::AccessMode;
use dtp_test_kit::Fay;
use servers::{EtcdServer, NatsServer};
use std::net::SocketAddr;
use support::{Serve, Setup, dtp};

const ETCD_PASSWORD: &str = "etcd-pw-4c1e";
const NATS_PASSWORD: &str = "nats-pw-9a7d";
const WRONG: &str = "wrong-pw-0b3f";
/// etcd forgets a token unused for this long (s).
const TOKEN_TTL: u32 = 2;

/// The terminal with `arm`.
const TERMINAL: &str = "[terminal.control]\nterminal_id = \"t1\"\n\n[[terminal.control.resources]]\nresource_id = \"arm\"\n";
/// A realtime stream, after `[cluster]`.
const STREAM: &str = "\n[[realtime.streams]]\nid = \"demo\"\nrecovery = \"CURSOR\"\nevent_types = [\"demo.tick\"]\nscope = \"demo-scope\"\n";

/// Gateway `node-a`'s config on `etcd_url`: the terminal, `cluster`
/// (more `[cluster]` keys) and the stream, with the cluster secret.
fn write_config(setup: &Setup, etcd: &EtcdServer, etcd_url: &str, cluster: &str) -> PathBuf {
    let secret = "a secret every gateway of the test shares\n";
    std::fs::write(setup.dir.join("cluster.secret"), secret).unwrap();
    let path = setup.cluster_config((&etcd.addr, "node-a"), TERMINAL, 500);
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(&format!("http://{}", etcd.addr), etcd_url);
    let text = format!("{text}secret_file = \"cluster.secret\"\n{cluster}{STREAM}");
    std::fs::write(&path, text).unwrap();
    path
}

/// The config with both servers' credentials, the passwords in files.
fn config(setup: &Setup, etcd: &EtcdServer, nats: &NatsServer, passwords: (&str, &str)) -> PathBuf {
    std::fs::write(
        setup.dir.join("etcd.password"),
        format!("{}\n", passwords.0),
    )
    .unwrap();
    std::fs::write(
        setup.dir.join("nats.password"),
        format!("{}\n", passwords.1),
    )
    .unwrap();
    let cluster = format!(
        "etcd_user = \"root\"\netcd_password_file = \"etcd.password\"\nnats = \"nats://{}\"\nnats_user = \"gw\"\nnats_password_file = \"nats.password\"\n",
        nats.addr
    );
    write_config(setup, etcd, &etcd.url(), &cluster)
}

fn servers() -> (EtcdServer, NatsServer) {
    let nats = NatsServer::start_with(Some(NatsAuth::UserPassword {
        user: "gw".into(),
        password: NATS_PASSWORD.into(),
    }));
    (EtcdServer::start_auth(ETCD_PASSWORD, TOKEN_TTL), nats)
}

/// Publishes one event on `demo`: the answer's status.
fn publish(realtime: SocketAddr) -> u16 {
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

/// A gateway serving `path`, with a Fay of `setup` connected to it.
fn start(setup: &Setup, path: &Path) -> (Serve, Fay) {
    let fay_files = setup.fay("fay-a", &["arm=write"]);
    let config = path.display().to_string();
    let args = ["--shards", "1", "--config", &config];
    let gateway = Serve::launch(
        &[&args[..], &["--realtime-listen", "127.0.0.1:0"]].concat(),
        true,
    );
    let fay = Fay::connect(gateway.addr, &setup.fay_config(&fay_files));
    (gateway, fay)
}

/// The Fay takes `arm` (an etcd grant) and an operator ends its session
/// (an etcd revoke).
fn grant_and_revoke(gateway: &Serve, fay: &mut Fay, request: u64) {
    let sid = fay.session(request, "arm", AccessMode::Write);
    gateway.ctl_ok(&["terminate", &sid.to_string()]);
    assert_eq!(fay.terminated(sid).as_deref(), Some("forced"));
}

#[test]
fn a_gateway_with_etcd_and_nats_credentials_serves() {
    let (etcd, nats) = servers();
    let setup = Setup::new("cluster-auth");
    let path = config(&setup, &etcd, &nats, (ETCD_PASSWORD, NATS_PASSWORD));
    let (gateway, mut fay) = start(&setup, &path);
    grant_and_revoke(&gateway, &mut fay, 1);
    assert_eq!(publish(gateway.realtime.unwrap()), 201, "published");
    // etcd forgets the gateway's token (its own clock: only waiting
    // reaches it); the next grant and revoke earn a new one.
    std::thread::sleep(Duration::from_secs(u64::from(TOKEN_TTL) + 2));
    grant_and_revoke(&gateway, &mut fay, 2);
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

#[test]
fn a_gateway_reaches_etcd_and_nats_over_tls() {
    let (etcd, nats) = (EtcdServer::start_tls(), NatsServer::start_tls());
    let setup = Setup::new("cluster-tls");
    // One file holds both servers' CAs.
    let cas =
        [&etcd.tls, &nats.tls].map(|t| std::fs::read_to_string(&t.as_ref().unwrap().ca).unwrap());
    std::fs::write(setup.dir.join("cluster-ca.pem"), cas.concat()).unwrap();
    let cluster = format!(
        "nats = \"tls://{}\"\nca_file = \"cluster-ca.pem\"\n",
        nats.addr
    );
    let path = write_config(&setup, &etcd, &etcd.url(), &cluster);
    let (gateway, mut fay) = start(&setup, &path);
    grant_and_revoke(&gateway, &mut fay, 1);
    assert_eq!(publish(gateway.realtime.unwrap()), 201, "published");
    assert!(gateway.stop().success());
}
