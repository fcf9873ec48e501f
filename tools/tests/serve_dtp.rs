//! `dtp serve` with the DTP protocol on (`[dtp] enabled = true`): keys and
//! credentials in files as `dtp cred` writes them, a Fay that runs CAP, an
//! agreement and encrypted pingpong fragments against the real binary, and
//! configuration errors that name their key.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_bench::dtp_workload::{BenchKeys, DtpWorkload};
use dtp_codec::{Limits, peek_frame_len};
use dtp_engine::dtp::{DtpEndpoint, DtpEvent};

fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

fn write_keys(dir: &Path, keys: &BenchKeys) -> std::path::PathBuf {
    std::fs::write(dir.join("terminal.key"), keys.terminal_noise.to_text()).unwrap();
    std::fs::write(dir.join("issuer.pub"), keys.issuer.public_key().to_text()).unwrap();
    let config = dir.join("dtp.toml");
    std::fs::write(
        &config,
        format!(
            "[dtp]\nenabled = true\nterminal_key = \"{}\"\ntrust = [\"{}\"]\n",
            dir.join("terminal.key").display(),
            dir.join("issuer.pub").display()
        ),
    )
    .unwrap();
    config
}

fn start(config: &Path) -> (Child, SocketAddr) {
    let mut child = dtp()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-admin",
            "--no-pin",
            "--shards",
            "2",
        ])
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(a) = line.strip_prefix("listening ") {
            break a.parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

/// One Fay over a blocking socket: feeds frames to the endpoint, writes
/// what it transmits, returns the events.
struct Fay {
    ep: DtpEndpoint,
    sock: TcpStream,
    rx: BytesMut,
}

impl Fay {
    fn step(&mut self) -> Vec<DtpEvent> {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        self.sock.write_all(&tx).unwrap();
        let mut buf = [0u8; 65536];
        match self.sock.read(&mut buf) {
            Ok(0) => panic!("the gateway closed the connection"),
            Ok(n) => self.rx.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
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
        std::iter::from_fn(|| self.ep.poll_event()).collect()
    }
}

#[test]
fn serve_runs_cap_and_encrypted_pingpong_with_keys_from_files() {
    let dir = std::env::temp_dir().join(format!("dtp-serve-dtp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = BenchKeys::generate().unwrap();
    let config = write_keys(&dir, &keys);
    let (mut child, addr) = start(&config);
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut fill = |b: &mut [u8]| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(31) ^ 0x5a;
        }
    };
    let ep = DtpEndpoint::fay(&keys.fay_config(), Instant::now(), &mut fill).unwrap();
    let mut fay = Fay {
        ep,
        sock,
        rx: BytesMut::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut agreement = None;
    let mut answers = Vec::new();
    let mut sent = 0u64;
    while answers.len() < 50 {
        assert!(Instant::now() < deadline, "no progress: {answers:?}");
        for event in fay.step() {
            match event {
                DtpEvent::Established { .. } => {
                    fay.ep
                        .request_collection(DtpWorkload::Pingpong.terms(), Instant::now())
                        .unwrap();
                }
                DtpEvent::AgreementActive { agreement_id, .. } => agreement = Some(agreement_id),
                DtpEvent::Fragment {
                    fragment_id,
                    payload,
                    ..
                } => {
                    assert_eq!(payload, Bytes::from(vec![fragment_id as u8; 66]));
                    answers.push(fragment_id);
                }
                DtpEvent::Closed { code } => panic!("closed with {code}"),
                _ => {}
            }
        }
        // One fragment in flight: the next once the last is answered.
        if let Some(a) = agreement
            && sent == answers.len() as u64
        {
            sent += 1;
            fay.ep
                .send_fragment(a, sent, vec![], Bytes::from(vec![sent as u8; 66]))
                .unwrap();
        }
    }
    assert_eq!(answers, (1..=50).collect::<Vec<u64>>());
    assert!(
        fay.ep.crypto_stats().opened_frames >= 50,
        "answers came sealed"
    );
    child.kill().unwrap();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dtp_configuration_errors_name_their_key() {
    let dir = std::env::temp_dir().join(format!("dtp-serve-dtp-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, key) in [
        ("[dtp]\nenabled = true\n", "dtp.terminal_key"),
        (
            "[dtp]\nenabled = true\nterminal_key = \"/nonexistent/terminal.key\"\n",
            "dtp.terminal_key",
        ),
        (
            "[dtp]\nenabled = true\nterminal_key = \"CONFIG\"\n",
            "dtp.terminal_key",
        ),
        ("[dtp]\nenabled = true\nalgorithms = [\"rot13\"]\n", "dtp."),
        ("[dtp]\nenabeld = true\n", "enabeld"),
    ] {
        let path = dir.join("bad.toml");
        // A file that exists but is not a key: the config file itself.
        std::fs::write(&path, text.replace("CONFIG", &path.display().to_string())).unwrap();
        let out = dtp()
            .args(["serve", "--no-admin", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("error: BAD_CONFIG") && err.contains(key),
            "{text}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
