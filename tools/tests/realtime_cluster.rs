//! Two `dtp serve` gateways sharing their realtime ledgers through one
//! real nats-server (`[cluster] nats`, SPEC RT-6 scale-out): an event
//! published on one reaches an SSE subscriber of the other, with the same
//! cursor; that cursor resumes on the other gateway exactly (no gap, no
//! duplicate); with the server down a publication is refused with 503
//! PROVIDER_UNAVAILABLE, and after its restart nothing acknowledged is
//! lost.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(dead_code, reason = "the shared helpers: this file uses serve() only")]
mod external;
#[path = "../../engine/cluster/tests/servers/mod.rs"]
mod servers;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use external::{Server, serve};
use servers::{NatsServer, TempDir};

const TOKEN: &str = "dtp-demo-token";

/// The demo stream with a small byte bound: the window (encoded events,
/// some 450 bytes each) holds far fewer than the log (stored ones, some
/// 170 bytes), so an old cursor is replayed from the log.
const DEMO: &str = "[[realtime.streams]]\nid = \"demo\"\nrecovery = \"CURSOR\"\nevent_types = [\"demo.tick\"]\nscope = \"demo-scope\"\nretain_bytes = 6000\n";

/// A gateway of the cluster named `node`, with the shared secret in `dir`.
fn gateway(dir: &TempDir, nats: &NatsServer, node: &str) -> Server {
    let secret = dir.path().join("cluster.secret");
    std::fs::write(&secret, "a secret every gateway of the test shares\n").unwrap();
    let config: PathBuf = dir.path().join(format!("{node}.toml"));
    std::fs::write(
        &config,
        format!(
            "[cluster]\nnode_id = \"{node}\"\nnats = \"nats://{}\"\nsecret_file = \"cluster.secret\"\ntimeout_ms = 1000\n{DEMO}",
            nats.addr
        ),
    )
    .unwrap();
    serve(&["--config", config.to_str().unwrap()])
}

/// `host:port` of a server's realtime listener.
fn addr(s: &Server) -> String {
    let rest = s.base.strip_prefix("http://").unwrap();
    rest.strip_suffix("/v1").unwrap().to_owned()
}

/// Publishes `{"n": n}` on `demo`: (status, body).
fn publish(s: &Server, n: u64) -> (u16, serde_json::Value) {
    let body = format!("{{\"eventType\":\"demo.tick\",\"payload\":{{\"n\":{n}}}}}");
    let mut c = TcpStream::connect(addr(s)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "POST /v1/streams/demo/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let text = String::from_utf8(all).unwrap();
    let status = text[9..12].parse().unwrap();
    let (_, json) = text.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(json).unwrap_or_default())
}

/// An SSE subscription to `demo`, resuming after `cursor` if given.
struct Sse {
    s: TcpStream,
    seen: String,
}

impl Sse {
    fn open(server: &Server, cursor: Option<&str>) -> Self {
        let mut s = TcpStream::connect(addr(server)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let resume = cursor.map_or(String::new(), |c| format!("Last-Event-ID: {c}\r\n"));
        write!(
            s,
            "GET /v1/streams/demo/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n{resume}\r\n"
        )
        .unwrap();
        let mut sse = Self {
            s,
            seen: String::new(),
        };
        sse.until("retry:");
        sse
    }

    fn until(&mut self, what: &str) {
        let mut buf = [0u8; 4096];
        while !self.seen.contains(what) {
            let n = self.s.read(&mut buf).unwrap();
            assert!(n > 0, "closed early: {}", self.seen);
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// The `n` of every event block seen, in order.
    fn ns(&self) -> Vec<u64> {
        self.seen
            .split("\"payload\":{\"n\":")
            .skip(1)
            .map(|r| r[..r.find('}').unwrap()].parse().unwrap())
            .collect()
    }
}

/// Fail closed from the start: a gateway whose NATS server cannot be
/// reached does not start (its ledgers would be its own).
#[test]
fn a_gateway_without_its_nats_server_does_not_start() {
    let dir = TempDir::new("rt-cluster-down");
    std::fs::write(dir.path().join("cluster.secret"), "0123456789abcdef").unwrap();
    let config = dir.path().join("down.toml");
    let port = servers::free_port();
    std::fs::write(
        &config,
        format!(
            "[cluster]\nnode_id = \"down\"\nnats = \"nats://127.0.0.1:{port}\"\nsecret_file = \"cluster.secret\"\ntimeout_ms = 500\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args(["serve", "--no-admin", "--listen", "127.0.0.1:0"])
        .args(["--realtime-listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("cluster.nats: connect:"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn two_gateways_share_the_ledgers_of_one_nats_server() {
    let dir = TempDir::new("rt-cluster");
    let mut nats = NatsServer::start();
    let a = gateway(&dir, &nats, "a");
    let b = gateway(&dir, &nats, "b");

    // A live subscriber on B sees what A publishes, with A's cursor.
    let mut live = Sse::open(&b, None);
    let (status, first) = publish(&a, 1);
    assert_eq!(status, 201, "{first}");
    let cursor = first["resumeCursor"].as_str().unwrap().to_owned();
    live.until("\"n\":1}");
    assert!(
        live.seen.contains(&format!("id: {cursor}\n")),
        "{}",
        live.seen
    );
    for n in 2..=3 {
        assert_eq!(publish(&a, n).0, 201);
    }
    live.until("\"n\":3}");
    assert_eq!(live.ns(), [1, 2, 3]);

    // A's first cursor resumes on B: exactly 2 and 3, then live.
    let mut resumed = Sse::open(&b, Some(&cursor));
    resumed.until("\"n\":3}");
    assert_eq!(publish(&b, 4).0, 201);
    resumed.until("\"n\":4}");
    assert_eq!(resumed.ns(), [2, 3, 4]);

    // The server down: refused, typed, on either gateway.
    nats.kill();
    let (status, body) = publish(&a, 5);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "PROVIDER_UNAVAILABLE", "{body}");
    // Back: nothing acknowledged was lost, and publishing goes on at 5.
    nats.restart();
    let (status, body) = publish(&a, 6);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["sequence"], "5", "{body}");
    live.until("\"n\":6}");
    assert_eq!(live.ns(), [1, 2, 3, 4, 6]);

    // Twenty more: A's first cursor still resumes on B, the older part
    // of the replay read from the log page by page, without a gap.
    for n in 7..=26 {
        assert_eq!(publish(&a, n).0, 201);
    }
    let mut late = Sse::open(&b, Some(&cursor));
    late.until("\"n\":26}");
    let want: Vec<u64> = [2, 3, 4].into_iter().chain(6..=26).collect();
    assert_eq!(late.ns(), want, "{}", late.seen);
}
