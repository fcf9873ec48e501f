//! A local nats-server with JetStream for the fan-out workloads' cluster
//! rows (`dtp bench --fanout-nats`): one server on a free loopback port,
//! its store and the gateways' cluster configs in a directory of its own,
//! killed and removed on drop. nats-server is found as etcd is
//! ([`super::etcd::binary`]); when it is not installed the bench says so
//! in a note and runs the rows it can.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::etcd::{binary, free_port};

/// How long nats-server may take to answer JetStream's account info.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Why the `+nats` rows cannot run on this machine, if they cannot.
pub(super) fn unavailable() -> Option<String> {
    binary("nats-server").is_none().then(|| {
        "nats-server is not installed (not on PATH nor in /usr/sbin): `bash scripts/cluster-servers.sh install`".to_owned()
    })
}

/// A running nats-server, killed and its store removed when dropped.
pub(super) struct LocalNats {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT` of its client listener.
    addr: String,
}

impl LocalNats {
    /// Starts nats-server with JetStream in a new temporary directory and
    /// waits until JetStream answers; why not, when it cannot.
    pub(super) fn start() -> Result<Self, String> {
        let bin = binary("nats-server").ok_or("nats-server is not installed")?;
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("dtp-bench-nats-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = std::fs::File::create(dir.join("nats.log"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.join("store"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut nats = Self {
            child,
            dir,
            addr: format!("127.0.0.1:{port}"),
        };
        nats.wait()?;
        Ok(nats)
    }

    /// Polls JetStream's account info until it answers, the server exits,
    /// or [`READY_WITHIN`].
    fn wait(&mut self) -> Result<(), String> {
        let config = dtp_cluster::nats::NatsConfig {
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_secs(2),
            ..dtp_cluster::nats::NatsConfig::default()
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let ready = dtp_cluster::nats::Nats::connect(&[&self.addr], config.clone())
                .and_then(|mut n| n.request("$JS.API.INFO", &[], b""))
                .is_ok_and(|m| !m.payload.windows(8).any(|w| w == b"\"error\":"));
            if ready {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("nats.log")).unwrap_or_default();
                let last = log.lines().last().unwrap_or_default().to_owned();
                return Err(format!("nats-server exited ({status}): {last}"));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "nats-server's JetStream did not answer within {READY_WITHIN:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes the config of gateway `node` of the cluster on this server
    /// (`[cluster]` with `nats` and the secret every gateway shares; the
    /// realtime streams are `dtp serve`'s defaults) and returns its path.
    pub(super) fn gateway_config(&self, node: &str) -> Result<String, String> {
        let io = |e: std::io::Error| format!("{}: {e}", self.dir.display());
        let secret = self.dir.join("cluster.secret");
        std::fs::write(&secret, "the secret of the bench's gateways\n").map_err(io)?;
        let config = self.dir.join(format!("{node}.toml"));
        let text = format!(
            "[cluster]\nnode_id = {node:?}\nnats = \"nats://{}\"\nsecret_file = {:?}\n",
            self.addr,
            secret.display().to_string()
        );
        std::fs::write(&config, text).map_err(io)?;
        Ok(config.display().to_string())
    }
}

impl Drop for LocalNats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
