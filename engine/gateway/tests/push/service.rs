//! The local Web Push service of the tests (tests/python/push_service.py)
//! and what starting it needs: the Python venv, a CA and a certificate for
//! 127.0.0.1, the browsers it decrypts for. Shared by the sender's tests
//! (engine/gateway/tests/push_sender.rs) and the end-to-end test through
//! `dtp serve` (tools/tests/push_serve.rs).

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use dtp_realtime::push::{PushSubscription, ReceiverSecret, VapidKey, base64url_encode};
use serde_json::Value;

pub(crate) const VAPID: [u8; 32] = [0x11; 32];
pub(crate) const SUBJECT: &str = "mailto:ops@example.com";

/// The venv's python, or `None` (with a message) when python3 is missing;
/// installed once per test process (install.sh itself serialises
/// processes).
pub(crate) fn python() -> Option<PathBuf> {
    static PYTHON: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PYTHON.get_or_init(install_python).clone()
}

fn install_python() -> Option<PathBuf> {
    let dir = python_dir();
    let venv = dir.join(".venv/bin/python");
    let has_modules = |py: &Path| {
        Command::new(py)
            .args(["-c", "import http_ece, cryptography"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !venv.exists() || !has_modules(&venv) {
        if Command::new("python3").arg("--version").output().is_err() {
            eprintln!("SKIPPED: python3 is not installed; the push service tests need it");
            return None;
        }
        let status = Command::new("bash")
            .arg(dir.join("install.sh"))
            .status()
            .unwrap();
        assert!(status.success(), "tests/python/install.sh failed");
    }
    Some(venv)
}

/// The workspace's tests/python, found from the test's crate.
fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("tests/python"))
        .find(|p| p.join("push_service.py").exists())
        .expect("tests/python/push_service.py in the workspace")
}

pub(crate) fn script() -> PathBuf {
    python_dir().join("push_service.py")
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtp-push-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA and a server certificate for 127.0.0.1 it signed: (CA PEM path,
/// server cert PEM path, server key PEM path).
pub(crate) fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, leaf.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// One browser: its private key and auth secret, as the service needs
/// them, and the subscription the sender gets.
pub(crate) struct Browser {
    pub(crate) name: &'static str,
    pub(crate) secret: ReceiverSecret,
    pub(crate) private: [u8; 32],
    pub(crate) answers: Value,
}

impl Browser {
    pub(crate) fn new(name: &'static str, seed: u8, answers: Value) -> Self {
        let private = [seed; 32];
        let secret = ReceiverSecret::new(&private, [seed ^ 0x5a; 16]).unwrap();
        Self {
            name,
            secret,
            private,
            answers,
        }
    }

    pub(crate) fn subscription(&self, port: u16) -> PushSubscription {
        let endpoint = format!("https://127.0.0.1:{port}/push/{}", self.name);
        PushSubscription::new(&endpoint, self.secret.keys().clone()).unwrap()
    }
}

/// The Python push service, killed when the test ends however it ends.
pub(crate) struct Service {
    child: Child,
    lines: BufReader<ChildStdout>,
    pub(crate) port: u16,
    pub(crate) ca: PathBuf,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    pub(crate) fn start(py: &Path, name: &str, browsers: &[&Browser]) -> Self {
        let dir = scratch(name);
        let (ca, cert, key) = certificates(&dir);
        let subs: serde_json::Map<String, Value> = browsers
            .iter()
            .map(|b| {
                let sub = serde_json::json!({
                    "private": base64url_encode(&b.private),
                    "auth": base64url_encode(b.secret.keys().auth()),
                    "answers": b.answers,
                });
                (b.name.to_owned(), sub)
            })
            .collect();
        let config = serde_json::json!({
            "vapid_public": base64url_encode(VapidKey::from_bytes(&VAPID).unwrap().public_key()),
            "subscriptions": subs,
        });
        let config_path = dir.join("config.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let mut child = Command::new(py)
            .arg(script())
            .arg("serve")
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        let port = first
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("push service said {first:?}"))
            .parse()
            .unwrap();
        Self {
            child,
            lines,
            port,
            ca,
        }
    }

    /// The next request the service recorded (it prints each before it
    /// answers, so every request a finished delivery made is there).
    pub(crate) fn record(&mut self) -> Value {
        let mut line = String::new();
        self.lines.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("bad record {line:?}"))
    }
}
