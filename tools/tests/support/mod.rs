//! What the terminal tests share: keys and credentials made by the real
//! `dtp cred`, a `dtp serve` child with a `[terminal]` config, `dtp ctl`
//! runs, and a Fay — a `DtpEndpoint` driven over a blocking `TcpStream`
//! (the driver of engine/tests/plane/e2e.rs, cut to what these tests use).

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::{
    AccessMode, AeadAlgorithm, AuthOutcome, AuthRequest, AuthResult, ControlMessage, ErrorCode,
    Limits, SessionId, SessionState, peek_frame_len,
};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair};
use dtp_crypto::cred::Credential;
use dtp_engine::dtp::{DtpEndpoint, DtpEvent, EndpointConfig, FayConfig};

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

/// A directory with an issuer key and a terminal Noise key.
pub(crate) struct Setup {
    pub(crate) dir: PathBuf,
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
        let dir = std::env::temp_dir().join(format!("dtp-terminal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let issuer_key_id = cred(&dir, &["issuer-key", "--out", "issuer.key"]);
        cred(&dir, &["noise-key", "--out", "terminal.key"]);
        Setup { dir, issuer_key_id }
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
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `dtp serve`, killed when dropped.
pub(crate) struct Serve {
    child: Child,
    pub(crate) addr: SocketAddr,
    /// `HOST:PORT` of the admin port.
    pub(crate) admin: String,
    /// The realtime front end's address.
    pub(crate) realtime: Option<SocketAddr>,
}

impl Serve {
    pub(crate) fn start(config: &Path) -> Self {
        let mut child = dtp()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--shards",
                "1",
                "--no-pin",
            ])
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut addr, mut admin, mut realtime) = (None, None, None);
        while addr.is_none() || admin.is_none() {
            let line = lines.next().expect("serve exited").unwrap();
            if let Some(a) = line.strip_prefix("listening ") {
                addr = Some(a.parse().unwrap());
            } else if let Some(a) = line.strip_prefix("realtime http://") {
                realtime = Some(a.split('/').next().unwrap().parse().unwrap());
            } else if let Some(a) = line.strip_prefix("admin http://") {
                admin = Some(a.trim_end_matches("/v1").to_owned());
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            addr: addr.unwrap(),
            admin: admin.unwrap(),
            realtime,
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

/// Distinct bytes per call.
fn fill(buf: &mut [u8]) {
    let seed = Instant::now().elapsed().subsec_nanos() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed.rotate_left((i % 64) as u32) as u8) ^ (i as u8).wrapping_mul(151);
    }
}

/// A Fay on one TCP connection with a DTP session established.
pub(crate) struct Fay {
    pub(crate) fay_id: String,
    credential: Credential,
    ep: DtpEndpoint,
    sock: TcpStream,
    rx: BytesMut,
    events: Vec<DtpEvent>,
    /// The terminal closed the connection.
    eof: bool,
}

impl Fay {
    /// Connects and runs CAP with the Fay's own key and credential.
    pub(crate) fn connect(setup: &Setup, files: &FayFiles, addr: SocketAddr) -> Self {
        let mut fay = Self::start(setup, files, addr);
        fay.wait("DTP session", |e| {
            matches!(e, DtpEvent::Established { .. }).then_some(())
        });
        fay
    }

    /// Connects, expecting CAP to be refused: the terminal's close code.
    pub(crate) fn refused(setup: &Setup, files: &FayFiles, addr: SocketAddr) -> ErrorCode {
        let mut fay = Self::start(setup, files, addr);
        fay.wait("refusal", |e| match e {
            DtpEvent::Established { .. } => panic!("CAP succeeded"),
            DtpEvent::Closed { code } => Some(*code),
            _ => None,
        })
    }

    fn start(setup: &Setup, files: &FayFiles, addr: SocketAddr) -> Self {
        let keys = NoiseKeypair::from_text(&std::fs::read_to_string(&files.key).unwrap()).unwrap();
        let credential =
            Credential::from_text(&std::fs::read_to_string(&files.credential).unwrap()).unwrap();
        let config = FayConfig {
            cap: InitiatorConfig {
                static_keypair: keys,
                credential: credential.clone(),
                algorithms: vec![AeadAlgorithm::ChaCha20Poly1305],
                pinned_responder_key: Some(setup.terminal_public()),
                handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            },
            endpoint: EndpointConfig::fay(),
        };
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let ep = DtpEndpoint::fay(&config, Instant::now(), &mut fill).unwrap();
        Fay {
            fay_id: files.fay_id.clone(),
            credential,
            ep,
            sock,
            rx: BytesMut::new(),
            events: Vec::new(),
            eof: false,
        }
    }

    /// One turn: send what is queued, read what came, feed whole frames.
    fn turn(&mut self) {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        if !tx.is_empty() {
            self.sock.write_all(&tx).unwrap();
        }
        let mut buf = [0u8; 16 * 1024];
        match self.sock.read(&mut buf) {
            Ok(0) => self.eof = true,
            Ok(n) => self.rx.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read: {e}"),
        }
        let now = Instant::now();
        while let Ok(len) = peek_frame_len(&self.rx, &Limits::default()) {
            if len > self.rx.len() {
                break;
            }
            self.ep.handle_frame(self.rx.split_to(len), now);
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
    }

    /// Turns until an event matches `f` (taking it); fails after 10 s.
    pub(crate) fn wait<T>(&mut self, what: &str, mut f: impl FnMut(&DtpEvent) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.events.iter().position(|e| f(e).is_some()) {
                let e = self.events.remove(i);
                return f(&e).unwrap();
            }
            assert!(
                Instant::now() < deadline && !self.eof,
                "no {what} within 10 s (terminal closed: {}); events {:?}",
                self.eof,
                self.events
            );
            self.turn();
        }
    }

    /// Sends an AuthRequest for `resource_id` in `mode` with its credential.
    pub(crate) fn ask(&mut self, request_id: u64, resource_id: &str, mode: AccessMode) {
        let auth = AuthRequest {
            request_id,
            fay_id: self.fay_id.clone(),
            resource_id: resource_id.into(),
            access_mode: mode,
            credential: self.credential.as_bytes().clone(),
        };
        self.ep
            .send_control(ControlMessage::AuthRequest(auth))
            .unwrap();
        self.turn();
    }

    /// The AuthResult of `request_id`.
    pub(crate) fn outcome(&mut self, request_id: u64) -> AuthOutcome {
        self.wait("AuthResult", |e| match e {
            DtpEvent::Control(ControlMessage::AuthResult(AuthResult {
                request_id: r,
                outcome,
            })) if *r == request_id => Some(outcome.clone()),
            _ => None,
        })
    }

    /// Asks and expects a session.
    pub(crate) fn session(
        &mut self,
        request_id: u64,
        resource_id: &str,
        mode: AccessMode,
    ) -> SessionId {
        self.ask(request_id, resource_id, mode);
        match self.outcome(request_id) {
            AuthOutcome::Granted { session_id } => session_id,
            refused => panic!("{} refused {resource_id}: {refused:?}", self.fay_id),
        }
    }

    /// The reason `session_id` reached terminated with.
    pub(crate) fn terminated(&mut self, session_id: SessionId) -> Option<String> {
        self.wait("SessionStateChanged(terminated)", |e| match e {
            DtpEvent::Control(ControlMessage::SessionStateChanged(c))
                if c.session_id == session_id && c.new_state == SessionState::Terminated =>
            {
                Some(c.reason.clone())
            }
            _ => None,
        })
    }
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
