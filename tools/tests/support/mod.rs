//! What the `dtp serve` tests share: keys and credentials made by the real
//! `dtp cred`, a `dtp serve` child (stopped with SIGTERM or killed), `dtp
//! ctl` runs. The Fay that talks to the gateway is the test kit's
//! (`dtp_test_kit::Fay`); [`Setup::fay_config`] gives it its files.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use dtp_codec::AeadAlgorithm;
use dtp_crypto::cap::NoiseKeypair;
use dtp_crypto::cred::Credential;
use dtp_gateway::dtp::FayConfig;

/// The `dtp` binary under test.
pub(crate) fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

/// Runs `dtp cred ARGS` in `dir`, which must succeed; its stdout, trimmed.
fn cred(dir: &Path, args: &[&str]) -> String {
    let out = dtp()
        .arg("cred")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "dtp cred {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A scratch directory of this process, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dtp-tools-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory with an issuer key and a terminal Noise key.
pub(crate) struct Setup {
    pub(crate) dir: PathBuf,
    _scratch: Scratch,
    /// The issuer's key id (what a credential names; never shown by the panel).
    pub(crate) issuer_key_id: String,
}

/// One Fay's files.
pub(crate) struct FayFiles {
    pub(crate) fay_id: String,
    pub(crate) key: PathBuf,
    pub(crate) credential: PathBuf,
    pub(crate) descriptor_id: String,
}

impl Setup {
    pub(crate) fn new(name: &str) -> Self {
        let scratch = Scratch::new(&format!("terminal-{name}"));
        let dir = scratch.0.clone();
        let issuer_key_id = cred(&dir, &["issuer-key", "--out", "issuer.key"]);
        cred(&dir, &["noise-key", "--out", "terminal.key"]);
        Setup {
            dir,
            _scratch: scratch,
            issuer_key_id,
        }
    }

    /// A Fay's Noise key and a credential with `grants` (`arm=write`).
    pub(crate) fn fay(&self, fay_id: &str, grants: &[&str]) -> FayFiles {
        let key = format!("{fay_id}.key");
        cred(&self.dir, &["noise-key", "--out", &key]);
        let credential = format!("{fay_id}.cred");
        let mut args = vec![
            "issue",
            "--issuer-key",
            "issuer.key",
            "--fay-id",
            fay_id,
            "--noise-key",
        ];
        let public = format!("{key}.pub");
        args.push(&public);
        for g in grants {
            args.extend(["--grant", g]);
        }
        args.extend(["--valid-for", "1d", "--out", &credential]);
        let descriptor_id = cred(&self.dir, &args);
        FayFiles {
            fay_id: fay_id.to_owned(),
            key: self.dir.join(key),
            credential: self.dir.join(credential),
            descriptor_id,
        }
    }

    /// Writes a config: loopback admin on a free port, `[dtp]` with this
    /// setup's keys, then `extra` (the `[terminal]` section, say).
    pub(crate) fn config(&self, extra: &str) -> PathBuf {
        let path = self.dir.join("serve.toml");
        let text = format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n\n[dtp]\nenabled = true\nterminal_key = \"{}\"\ntrust = [\"{}\"]\n\n{extra}",
            self.dir.join("terminal.key").display(),
            self.dir.join("issuer.key.pub").display(),
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Gateway `node`'s config for a cluster on the etcd at `etcd`
    /// (`HOST:PORT`): `section` (the `[terminal]` tables), its own audit
    /// log ([`Setup::audit`]) and `[cluster]` with `timeout_ms` and a 2 s
    /// lease.
    pub(crate) fn cluster_config(
        &self,
        (etcd, node): (&str, &str),
        section: &str,
        timeout_ms: u32,
    ) -> PathBuf {
        let extra = format!(
            "{section}\n[terminal.audit]\npath = \"{audit}\"\n\n[cluster]\nnode_id = \"{node}\"\netcd = [\"http://{etcd}\"]\ntimeout_ms = {timeout_ms}\nlease_ttl_secs = 2\n",
            audit = self.audit(node).display(),
        );
        let written = self.config(&extra);
        let path = self.dir.join(format!("serve-{node}.toml"));
        std::fs::rename(written, &path).unwrap();
        path
    }

    /// Gateway `node`'s audit log in a cluster ([`Setup::cluster_config`]).
    pub(crate) fn audit(&self, node: &str) -> PathBuf {
        self.dir.join(format!("audit-{node}.jsonl"))
    }

    /// The terminal's Noise public key (for pinning).
    pub(crate) fn terminal_public(&self) -> [u8; 32] {
        let hex = std::fs::read_to_string(self.dir.join("terminal.key.pub")).unwrap();
        let hex = hex.trim();
        let mut key = [0u8; 32];
        for (i, b) in key.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        key
    }

    /// The DTP configuration of a Fay with `files`' key and credential,
    /// this terminal's key pinned.
    pub(crate) fn fay_config(&self, files: &FayFiles) -> FayConfig {
        let keys = NoiseKeypair::from_text(&std::fs::read_to_string(&files.key).unwrap()).unwrap();
        let credential =
            Credential::from_text(&std::fs::read_to_string(&files.credential).unwrap()).unwrap();
        dtp_test_kit::keys::fay_config(
            keys,
            credential,
            &[AeadAlgorithm::ChaCha20Poly1305],
            self.terminal_public(),
        )
    }
}

/// A running `dtp serve`, killed when dropped.
pub(crate) struct Serve {
    child: Child,
    pub(crate) addr: SocketAddr,
    /// `HOST:PORT` of the admin port (empty without one).
    pub(crate) admin: String,
    /// The realtime front end's address.
    pub(crate) realtime: Option<SocketAddr>,
}

impl Serve {
    /// One shard, with the admin port of a `[terminal]` configuration.
    pub(crate) fn start(config: &Path) -> Self {
        Self::launch(
            &["--shards", "1", "--config", &config.display().to_string()],
            true,
        )
    }

    /// Two shards, no admin port: the DTP gateway alone.
    pub(crate) fn start_dtp(config: &Path) -> Self {
        let config = config.display().to_string();
        Self::launch(&["--shards", "2", "--no-admin", "--config", &config], false)
    }

    /// `dtp serve --listen 127.0.0.1:0 --no-pin ARGS`, once it printed its
    /// address (and, with `admin`, its admin port).
    pub(crate) fn launch(args: &[&str], admin: bool) -> Self {
        let mut child = dtp()
            .args(["serve", "--listen", "127.0.0.1:0", "--no-pin"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut addr, mut admin_at, mut realtime) = (None, None, None);
        while addr.is_none() || (admin && admin_at.is_none()) {
            let line = lines.next().expect("serve exited").unwrap();
            if let Some(a) = line.strip_prefix("listening ") {
                addr = Some(a.parse().unwrap());
            } else if let Some(a) = line.strip_prefix("realtime http://") {
                realtime = Some(a.split('/').next().unwrap().parse().unwrap());
            } else if let Some(a) = line.strip_prefix("admin http://") {
                admin_at = Some(a.trim_end_matches("/v1").to_owned());
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            addr: addr.unwrap(),
            admin: admin_at.unwrap_or_default(),
            realtime,
        }
    }

    /// Stops the gateway with SIGTERM, as a supervisor does; how it exited.
    pub(crate) fn stop(mut self) -> ExitStatus {
        let ok = sigterm(self.child.id());
        assert!(ok, "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `dtp ctl --admin ADDR ARGS`.
    pub(crate) fn ctl(&self, args: &[&str]) -> Output {
        dtp()
            .args(["ctl", "--admin", &self.admin])
            .args(args)
            .output()
            .unwrap()
    }

    /// `dtp ctl ARGS`, which must succeed; its stdout.
    pub(crate) fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(out.status.success(), "dtp ctl {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// `dtp ctl --json ARGS` parsed.
    pub(crate) fn ctl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend(args);
        serde_json::from_str(&self.ctl_ok(&all)).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGTERM to `pid`; whether `kill` succeeded.
pub(crate) fn sigterm(pid: u32) -> bool {
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// `keys` written to `dir` with a `[dtp]` configuration naming them (and
/// `extra` lines in that section); the configuration file's path.
pub(crate) fn write_dtp_config(dir: &Path, keys: &dtp_test_kit::Keys, extra: &str) -> PathBuf {
    let config = dir.join("dtp.toml");
    std::fs::write(&config, keys.write_files(dir).dtp_section(extra)).unwrap();
    config
}

/// The session files of a `DirSessionStore` directory.
pub(crate) fn session_files(store: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(store) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "dtps"))
        .collect()
}

/// Polls `f` every 50 ms until it gives a value; fails after 10 s.
pub(crate) fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "no {what} within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The audit log's records (`record` of every line), in order.
pub(crate) fn audit_records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["record"].clone())
        .collect()
}

/// The keys of a `dtp load --dtp` Fay: `bench-fay`, reading `bench`.
pub(crate) fn load_keys() -> dtp_test_kit::Keys {
    dtp_test_kit::Keys::new(
        41,
        "bench-fay",
        &[("bench", &[dtp_codec::AccessMode::Read])],
    )
}

/// Writes the Fay's key and credential of `keys` into `dir`: the `dtp
/// load` arguments that use them (`--dtp`, the files, the terminal pinned).
pub(crate) fn fay_args(dir: &Path, keys: &dtp_test_kit::Keys) -> Vec<String> {
    let (key, credential) = (dir.join("fay.key"), dir.join("fay.cred"));
    std::fs::write(&key, keys.fay.to_text()).unwrap();
    std::fs::write(&credential, keys.credential.to_text()).unwrap();
    let pin: String = keys
        .terminal
        .public()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    [
        "--dtp".to_owned(),
        "--fay-key".to_owned(),
        key.display().to_string(),
        "--credential".to_owned(),
        credential.display().to_string(),
        "--pin-terminal".to_owned(),
        pin,
    ]
    .into()
}

/// The IO backends: the `[io] backend` / `DTP_IO_BACKEND` value and the
/// name `dtp serve` and `dtp load` report.
pub(crate) const BACKENDS: [(&str, &str); 2] = [("uring", "io_uring"), ("epoll", "epoll")];
