//! A local etcd for the `control` workload's cluster rows (`dtp bench
//! --control-etcd`): one single-member etcd process on free loopback
//! ports, its data in a directory of its own, killed and removed on drop.
//! etcd is found on PATH or in the sbin directories Debian installs servers
//! into; when it is not there, [`LocalEtcd::start`] says so and the bench
//! reports the rows as not run.
//!
//! etcd runs with its defaults (every write synced to its WAL), as a
//! deployment would.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd may take to answer its first request.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running etcd, killed and its data removed when dropped.
pub(crate) struct LocalEtcd {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT` of its client listener.
    pub(crate) addr: String,
}

/// The server binary `name` (`etcd`, `nats-server`), if installed: on
/// PATH or in the sbin directories Debian installs servers into.
pub(super) fn binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A loopback port nobody listens on now.
pub(super) fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

impl LocalEtcd {
    /// Starts etcd in a new directory under `parent` and waits until it
    /// answers; why not, when it cannot (not installed, exited, too slow).
    pub(crate) fn start(parent: &std::path::Path) -> Result<Self, String> {
        let bin = binary("etcd").ok_or(
            "etcd is not installed (not on PATH nor in /usr/sbin): `bash scripts/cluster-servers.sh install`",
        )?;
        let (client, peer) = (free_port()?, free_port()?);
        let dir = parent.join(format!("etcd-{client}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = std::fs::File::create(dir.join("etcd.log"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let (client_url, peer_url) = (
            format!("http://127.0.0.1:{client}"),
            format!("http://127.0.0.1:{peer}"),
        );
        let child = Command::new(&bin)
            .arg("--name=bench")
            .arg(format!("--data-dir={}", dir.join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=bench={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut etcd = Self {
            child,
            dir,
            addr: format!("127.0.0.1:{client}"),
        };
        etcd.wait()?;
        Ok(etcd)
    }

    /// Polls a read until etcd answers, it exits, or [`READY_WITHIN`].
    fn wait(&mut self) -> Result<(), String> {
        let http = dtp_cluster::HttpConfig {
            connect_timeout: Duration::from_millis(500),
            io_timeout: Duration::from_secs(2),
            ..dtp_cluster::HttpConfig::default()
        };
        let mut probe = dtp_cluster::etcd::Etcd::new(&[&self.addr], http)
            .map_err(|e| format!("etcd client: {e}"))?;
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if probe.get(b"ready?").is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
                let last = log.lines().last().unwrap_or_default().to_owned();
                return Err(format!("etcd exited ({status}): {last}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("etcd did not answer within {READY_WITHIN:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
