//! Real etcd and nats-server processes for the integration tests: each on
//! free loopback ports with a data directory of its own, killed and
//! removed on drop. A missing binary fails the test with a message naming
//! the install script; nothing is skipped.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test binary uses part of it"
)]
#![allow(clippy::expect_used, reason = "test helper: a failure fails the test")]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use dtp_cluster::etcd::{Etcd, EtcdAuth};
use dtp_cluster::nats::{JetStream, Nats, NatsAuth, NatsConfig};
use dtp_cluster::{Error, HttpConfig};

mod tls;

pub use tls::Tls;

/// How long a server may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "dtp-cluster-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create a temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The binary `name` from PATH or the sbin directories Debian installs
/// servers into; fails the test if it is not installed.
fn binary(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} is not installed: run `bash scripts/cluster-servers.sh install` first")
        })
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

/// A spawned server process with its log; killed on drop.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(cmd: &mut Command, log: PathBuf) -> Self {
        let out = fs::File::create(&log).expect("create the server log");
        let err = out.try_clone().expect("clone the log handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn the server");
        Self { child, log }
    }

    /// Fails the test with the log's tail if the process has exited.
    fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!("server exited ({status}):\n{}", tail.join("\n"));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Calls `ready` until it is true, failing the test if `proc` dies or
/// [`READY_WITHIN`] passes.
fn wait_ready(proc: &mut Process, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + READY_WITHIN;
    while !ready() {
        proc.check_alive();
        assert!(
            Instant::now() < deadline,
            "{what} not ready within {READY_WITHIN:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A single-member etcd cluster, its data in a directory that outlives
/// restarts of the process.
pub struct EtcdServer {
    proc: Process,
    ports: (u16, u16),
    /// `127.0.0.1:port` of the client (gateway) listener.
    pub addr: String,
    dir: TempDir,
    /// `--auth-token-ttl`, if not etcd's default.
    token_ttl: Option<u32>,
    /// The root user's credentials, once auth is enabled.
    pub auth: Option<EtcdAuth>,
    /// Its certificates, when it serves clients over TLS.
    pub tls: Option<Tls>,
}

impl EtcdServer {
    pub fn start() -> Self {
        Self::start_with(None, false)
    }

    /// An etcd that serves its clients over TLS only (`https://`), with a
    /// certificate for 127.0.0.1 from a CA of its own ([`Self::tls`]).
    pub fn start_tls() -> Self {
        Self::start_with(None, true)
    }

    fn start_with(token_ttl: Option<u32>, tls: bool) -> Self {
        let dir = TempDir::new("etcd");
        let ports = (free_port(), free_port());
        let tls = tls.then(|| Tls::new(dir.path()));
        let proc = Self::spawn(&dir, ports, token_ttl, tls.as_ref());
        let mut s = Self {
            proc,
            ports,
            addr: format!("127.0.0.1:{}", ports.0),
            dir,
            token_ttl,
            auth: None,
            tls,
        };
        s.wait();
        s
    }

    /// An etcd with authentication on, through its own API: user `root`
    /// with `password`, granted role `root`, then `auth/enable`. Its
    /// tokens expire after `token_ttl_secs` without use.
    pub fn start_auth(password: &str, token_ttl_secs: u32) -> Self {
        let mut s = Self::start_with(Some(token_ttl_secs), false);
        let name = serde_json::json!("root");
        let steps = [
            (
                "/v3/auth/user/add",
                serde_json::json!({ "name": name, "password": password }),
            ),
            (
                "/v3/auth/user/grant",
                serde_json::json!({ "user": name, "role": "root" }),
            ),
            ("/v3/auth/enable", serde_json::json!({})),
        ];
        for (path, body) in steps {
            let (status, answer) = post_json(&s.addr, path, &body.to_string());
            assert_eq!(status, 200, "{path}: {answer}");
        }
        s.auth = Some(EtcdAuth::new("root", password).expect("credentials"));
        s
    }

    fn spawn(
        dir: &TempDir,
        (client, peer): (u16, u16),
        token_ttl: Option<u32>,
        tls: Option<&Tls>,
    ) -> Process {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(binary("etcd"));
        cmd.arg("--name=t")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=t={peer_url}"));
        if let Some(ttl) = token_ttl {
            cmd.arg(format!("--auth-token-ttl={ttl}"));
        }
        if let Some(tls) = tls {
            cmd.arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()));
        }
        Process::spawn(&mut cmd, dir.path().join("etcd.log"))
    }

    /// Ready: it answers, with a value or by refusing us for want of
    /// credentials.
    fn wait(&mut self) {
        let config = HttpConfig {
            tls: self.tls.as_ref().map(Tls::client),
            ..quick_http()
        };
        let mut probe = Etcd::new(&[&self.url()], config).expect("client");
        wait_ready(&mut self.proc, "etcd", || {
            matches!(probe.get(b"ready?"), Ok(_) | Err(Error::AuthRefused { .. }))
        });
    }

    /// Kills the server (SIGKILL) and starts it again on the same ports
    /// with the same data directory.
    pub fn kill_and_restart(&mut self) {
        self.proc.kill();
        self.restart();
    }

    /// Kills the server (SIGKILL): its clients see a partition.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts a killed server again on the same ports and data.
    pub fn restart(&mut self) {
        self.proc = Self::spawn(&self.dir, self.ports, self.token_ttl, self.tls.as_ref());
        self.wait();
    }

    /// A fresh client of this server (with its credentials and CA, if it
    /// has them).
    pub fn client(&self) -> Etcd {
        let config = HttpConfig {
            auth: self.auth.clone(),
            tls: self.tls.as_ref().map(Tls::client),
            ..HttpConfig::default()
        };
        Etcd::new(&[&self.url()], config).expect("etcd client")
    }

    /// `http://` or `https://` and [`Self::addr`].
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Its log so far (to check that a secret never shows there).
    pub fn log(&self) -> String {
        fs::read_to_string(&self.proc.log).unwrap_or_default()
    }
}

/// One JSON POST on a connection of its own: (status, body).
fn post_json(addr: &str, path: &str, body: &str) -> (u16, String) {
    let mut c = TcpStream::connect(addr).expect("connect to etcd");
    c.set_read_timeout(Some(READY_WITHIN)).expect("timeout");
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    c.read_to_string(&mut answer).expect("read the answer");
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

fn quick_http() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_millis(500),
        io_timeout: Duration::from_secs(2),
        ..HttpConfig::default()
    }
}

/// A nats-server with JetStream, its store in a directory that outlives
/// restarts of the process.
pub struct NatsServer {
    proc: Process,
    port: u16,
    /// `127.0.0.1:port`.
    pub addr: String,
    dir: TempDir,
    /// The credentials it requires, if any.
    pub auth: Option<NatsAuth>,
    /// Its certificates, when it requires TLS.
    pub tls: Option<Tls>,
}

impl NatsServer {
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A nats-server that requires `auth` (`--user`/`--pass` or `--auth`).
    pub fn start_with(auth: Option<NatsAuth>) -> Self {
        Self::start_full(auth, false)
    }

    /// A nats-server that requires TLS, with a certificate for 127.0.0.1
    /// from a CA of its own ([`Self::tls`]).
    pub fn start_tls() -> Self {
        Self::start_full(None, true)
    }

    fn start_full(auth: Option<NatsAuth>, tls: bool) -> Self {
        let dir = TempDir::new("nats");
        let port = free_port();
        let tls = tls.then(|| Tls::new(dir.path()));
        let proc = Self::spawn(&dir, port, auth.as_ref(), tls.as_ref());
        let mut s = Self {
            proc,
            port,
            addr: format!("127.0.0.1:{port}"),
            dir,
            auth,
            tls,
        };
        s.wait();
        s
    }

    fn spawn(dir: &TempDir, port: u16, auth: Option<&NatsAuth>, tls: Option<&Tls>) -> Process {
        let mut cmd = Command::new(binary("nats-server"));
        cmd.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path().join("store"));
        match auth {
            Some(NatsAuth::UserPassword { user, password }) => {
                cmd.args(["--user", user, "--pass", password])
            }
            Some(NatsAuth::Token(token)) => cmd.args(["--auth", token]),
            None => &mut cmd,
        };
        if let Some(tls) = tls {
            cmd.arg("--tls")
                .arg("--tlscert")
                .arg(&tls.cert)
                .arg("--tlskey")
                .arg(&tls.key);
        }
        Process::spawn(&mut cmd, dir.path().join("nats.log"))
    }

    /// Waits until JetStream answers its account info.
    fn wait(&mut self) {
        let addr = self.addr.clone();
        let config = NatsConfig {
            auth: self.auth.clone(),
            tls: self.tls.as_ref().map(Tls::client),
            ..quick_nats()
        };
        wait_ready(&mut self.proc, "nats-server", || {
            Nats::connect(&[&addr], config.clone())
                .and_then(|mut n| n.request("$JS.API.INFO", &[], b""))
                .is_ok_and(|m| !m.payload.windows(8).any(|w| w == b"\"error\":"))
        });
    }

    /// Kills the server (SIGKILL: no clean shutdown) and starts it again on
    /// the same port with the same store directory.
    pub fn kill_and_restart(&mut self) {
        self.proc.kill();
        self.proc = Self::spawn(&self.dir, self.port, self.auth.as_ref(), self.tls.as_ref());
        self.wait();
    }

    /// Kills the server (SIGKILL) and leaves it down until [`Self::restart`].
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts a killed server again on the same port with the same store.
    pub fn restart(&mut self) {
        self.proc = Self::spawn(&self.dir, self.port, self.auth.as_ref(), self.tls.as_ref());
        self.wait();
    }

    /// A fresh JetStream client of this server (with its credentials).
    pub fn jetstream(&self) -> JetStream {
        let config = NatsConfig {
            auth: self.auth.clone(),
            tls: self.tls.as_ref().map(Tls::client),
            ..NatsConfig::default()
        };
        JetStream::new(Nats::connect(&[&self.addr], config).expect("nats client"))
    }
}

fn quick_nats() -> NatsConfig {
    NatsConfig {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        ..NatsConfig::default()
    }
}
