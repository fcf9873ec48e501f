//! The edges of `dtp serve` a new user meets first, through the real
//! binary: a taken port is refused naming its key, errors are one line
//! with the documented exit status, logs carry no colour into a pipe, the
//! printed configuration is documented and reads back, relative file
//! names follow the configuration file, and the admin port answers
//! /healthz and /readyz.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

/// A scratch folder, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dtp-edges-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `dtp serve` (killed when dropped) and its stdout, line by line.
struct Serve {
    child: Child,
    lines: Receiver<String>,
    gateway: SocketAddr,
    realtime: Option<SocketAddr>,
    admin: Option<SocketAddr>,
}

impl Serve {
    fn start(args: &[&str], cwd: Option<&Path>) -> Self {
        let mut cmd = dtp();
        cmd.arg("serve")
            .args(["--shards", "2", "--no-pin"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().unwrap();
        let (tx, lines) = channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        let mut serve = Serve {
            child,
            lines,
            gateway: "0.0.0.0:0".parse().unwrap(),
            realtime: None,
            admin: None,
        };
        let want_admin = !args.contains(&"--no-admin");
        let mut seen_gateway = false;
        while !(seen_gateway && (serve.admin.is_some() || !want_admin)) {
            let line = serve.line();
            let url = |rest: &str| rest.split('/').next().unwrap().parse().unwrap();
            if let Some(a) = line.strip_prefix("listening ") {
                serve.gateway = a.parse().unwrap();
                seen_gateway = true;
            } else if let Some(a) = line.strip_prefix("realtime http://") {
                serve.realtime = Some(url(a));
            } else if let Some(a) = line.strip_prefix("health http://") {
                serve.admin = Some(url(a));
            }
        }
        serve
    }

    /// A gateway on free ports without the realtime front end, reading
    /// `config`, run in `cwd`.
    fn with_config(config: &Path, cwd: Option<&Path>) -> Self {
        let config = config.to_str().unwrap();
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--no-realtime",
            "--config",
            config,
        ];
        Self::start(&args, cwd)
    }

    /// The next line it prints (it must print one within 30 s).
    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("dtp serve printed nothing more")
    }

    /// SIGTERM, then the lines it prints until it exits, and its status.
    fn stop(mut self) -> (Vec<String>, std::process::ExitStatus) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let mut printed = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            printed.push(line);
        }
        (printed, self.child.wait().unwrap())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request; the status and the body.
fn http(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, &format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n"))
}

fn run(args: &[&str]) -> Output {
    dtp().args(args).stdin(Stdio::null()).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Exactly one line starting `error: <code>`, and `status`.
fn assert_one_line(o: &Output, status: i32, code: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(status), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("error: {code} ")), "{err}");
    err
}

#[test]
fn a_second_gateway_on_taken_ports_is_refused_naming_the_key() {
    let dir = Dir::new("ports");
    let admin_any = dir.write("admin.toml", "[admin]\nlisten = \"127.0.0.1:0\"\n");
    let admin_any = admin_any.to_str().unwrap();
    // Two shards of one process share the gateway and realtime ports.
    let first = Serve::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--realtime-listen",
            "127.0.0.1:0",
            "--config",
            admin_any,
        ],
        None,
    );
    let (gateway, realtime) = (
        first.gateway.to_string(),
        first.realtime.unwrap().to_string(),
    );
    let admin = first.admin.unwrap().to_string();
    let free = "127.0.0.1:0";
    let taken_admin = dir.write("taken.toml", &format!("[admin]\nlisten = \"{admin}\"\n"));
    let taken_admin = taken_admin.to_str().unwrap();
    for (args, key, addr) in [
        (
            vec!["--listen", &gateway, "--no-realtime", "--no-admin"],
            "engine.listen",
            &gateway,
        ),
        (
            vec![
                "--listen",
                free,
                "--realtime-listen",
                &realtime,
                "--no-admin",
            ],
            "realtime.listen",
            &realtime,
        ),
        (
            vec!["--listen", free, "--no-realtime", "--config", taken_admin],
            "admin.listen",
            &admin,
        ),
    ] {
        let out = dtp()
            .arg("serve")
            .args(["--no-pin", "--shards", "1"])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = assert_one_line(&out, 1, "ADDRESS_IN_USE");
        assert!(
            err.starts_with(&format!(
                "error: ADDRESS_IN_USE {key} {addr} is already in use"
            )),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "it announced something: {out:?}");
    }
    // The first still serves, and says so; SIGTERM drains and stops it.
    assert_eq!(
        get(first.admin.unwrap(), "/readyz"),
        (200, "ready\n".into())
    );
    let (printed, status) = first.stop();
    assert!(status.success(), "{status:?}");
    assert!(
        printed
            .iter()
            .any(|l| l.starts_with("draining: SIGTERM: no new connections")),
        "{printed:?}"
    );
    assert_eq!(
        printed.last().map(String::as_str),
        Some("stopped"),
        "{printed:?}"
    );
}

#[test]
fn health_and_readiness_answer_without_the_token() {
    let dir = Dir::new("health");
    dir.write("admin.token", "correct-horse-battery-staple\n");
    // The token file is relative (to the config's folder), and read
    // without [terminal].
    let config = dir.write(
        "serve.toml",
        "[admin]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"admin.token\"\n",
    );
    let serve = Serve::with_config(&config, None);
    let admin = serve.admin.unwrap();
    assert_eq!(get(admin, "/healthz"), (200, "ok\n".into()));
    assert_eq!(get(admin, "/readyz"), (200, "ready\n".into()));
    let (status, _) = http(admin, "POST /readyz HTTP/1.1\r\ncontent-length: 0\r\n\r\n");
    assert_eq!(status, 405);
    // /v1 needs the token even without a terminal plane.
    assert_eq!(get(admin, "/v1/sessions").0, 401);
    let (status, body) = http(
        admin,
        "GET /v1/sessions HTTP/1.1\r\nauthorization: Bearer correct-horse-battery-staple\r\n\r\n",
    );
    assert_eq!(status, 503, "{body}");
    let (_, status) = serve.stop();
    assert!(status.success());

    // A token file that is too short is refused, [terminal] or not.
    dir.write("admin.token", "short\n");
    let out = run(&["serve", "--config", config.to_str().unwrap()]);
    let err = assert_one_line(&out, 2, "BAD_CONFIG");
    assert!(
        err.contains("admin.token_file") && err.contains("16–256"),
        "{err}"
    );
}

#[test]
fn relative_file_names_follow_the_configuration_file() {
    let dir = Dir::new("relative");
    let elsewhere = Dir::new("relative-cwd");
    let cred = |args: &[&str]| {
        let out = dtp()
            .arg("cred")
            .args(args)
            .current_dir(&dir.0)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    cred(&["issuer-key", "--out", "issuer.key"]);
    cred(&["noise-key", "--out", "terminal.key"]);
    let config = dir.write(
        "serve.toml",
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[dtp]\nenabled = true\nterminal_key = \"terminal.key\"\ntrust = [\"issuer.key.pub\"]\n\n[terminal.control]\nterminal_id = \"t\"\n\n[terminal.audit]\npath = \"logs-audit.jsonl\"\n",
    );
    // Run from another folder, naming the file by its full path.
    let serve = Serve::with_config(&config, Some(&elsewhere.0));
    assert_eq!(get(serve.admin.unwrap(), "/readyz").0, 200);
    let (_, status) = serve.stop();
    assert!(status.success());
    assert!(dir.0.join("logs-audit.jsonl").exists());
    assert!(!elsewhere.0.join("logs-audit.jsonl").exists());
    // From the folder itself, the same names are found too.
    let out = dtp()
        .args(["serve", "--print-config", "--config", "serve.toml"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("terminal_key = \"terminal.key\""), "{text}");
}

#[test]
fn configuration_errors_are_one_line_naming_the_file_and_line() {
    let dir = Dir::new("toml");
    for (text, want) in [
        ("[engine]\nshards = 1\npin = tru\n", "line 3: "),
        (
            "[io]\n\nringentries = 3\n",
            "line 3: unknown field `ringentries`",
        ),
    ] {
        let path = dir.write("dtp.toml", text);
        let out = run(&["serve", "--config", path.to_str().unwrap()]);
        let err = assert_one_line(&out, 2, "BAD_CONFIG");
        assert!(
            err.starts_with(&format!("error: BAD_CONFIG {} {want}", path.display())),
            "{text:?}: {err}"
        );
    }
    // Two of its own listeners on one port: refused before any is bound.
    let out = run(&[
        "serve",
        "--listen",
        "127.0.0.1:7799",
        "--realtime-listen",
        "127.0.0.1:7799",
    ]);
    let err = assert_one_line(&out, 2, "BAD_CONFIG");
    assert!(
        err.contains(
            "realtime.listen 127.0.0.1:7799 takes the port of engine.listen 127.0.0.1:7799"
        ),
        "{err}"
    );
}

#[test]
fn usage_errors_are_one_line_and_help_still_prints() {
    let out = run(&["serve", "--lisen", "127.0.0.1:1"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("error: BAD_ARGUMENT unexpected argument '--lisen'"),
        "{err}"
    );
    assert_eq!(lines[1], "try 'dtp serve --help'");
    let out = run(&["serve", "--listen", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: BAD_ARGUMENT invalid value 'nowhere'"));
    let out = run(&["nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: BAD_ARGUMENT unrecognized subcommand"));
    for args in [&["--help"][..], &["serve", "--help"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("RUST_LOG"), "{args:?}: {text}");
    }
    let out = run(&["serve", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("/readyz") && text.contains("ADDRESS_IN_USE"),
        "{text}"
    );
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().starts_with("dtp "));
}

#[test]
fn a_missing_input_file_exits_2_everywhere() {
    let dir = Dir::new("missing");
    let missing = dir.0.join("missing");
    let m = missing.to_str().unwrap();
    for (args, code) in [
        (vec!["serve", "--config", m], "BAD_CONFIG"),
        (vec!["inspect", m], "NOT_FOUND"),
        (vec!["frame", "encode", m], "NOT_FOUND"),
        (vec!["cred", "verify", m, "--trust", m], "NOT_FOUND"),
        (vec!["cred", "inspect", m], "NOT_FOUND"),
    ] {
        let err = assert_one_line(&run(&args), 2, code);
        assert!(err.contains(m), "{args:?}: {err}");
    }
}

#[test]
fn print_config_documents_every_key_and_reads_back() {
    let out = run(&["serve", "--print-config"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Every key line sits under a comment.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let is_key = line.contains(" = ") && !line.starts_with('#');
        if is_key || line.starts_with('[') {
            assert!(lines[i - 1].starts_with("# "), "no doc above {line:?}");
        }
    }
    assert!(text.contains("# Core shards; 0 = one per available core.\nshards = 0\n"));
    // The printed text is a configuration that prints the same again,
    // also with the admin port off.
    let dir = Dir::new("print");
    let no_admin = run(&["serve", "--print-config", "--no-admin"]);
    let no_admin = String::from_utf8(no_admin.stdout).unwrap();
    assert!(no_admin.contains("[admin]\n# "), "{no_admin}");
    assert!(no_admin.contains("\nlisten = \"\"\n"), "{no_admin}");
    for text in [text, no_admin] {
        let path = dir.write("printed.toml", &text);
        let again = run(&[
            "serve",
            "--print-config",
            "--config",
            path.to_str().unwrap(),
        ]);
        assert!(again.status.success(), "{again:?}");
        assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
    }
}

/// Runs `dtp serve ARGS` with RUST_LOG=info until it listens, stops it
/// with SIGTERM, and returns what it logged.
fn serve_log(args: &[&str]) -> String {
    let mut child = dtp()
        .env("RUST_LOG", "info")
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-realtime",
            "--no-admin",
        ])
        .args(["--shards", "1", "--no-pin"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("listening ") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
    }
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn logs_into_a_pipe_have_no_colour_and_can_be_json() {
    let log = serve_log(&[]);
    assert!(log.contains("IO backend selected"), "{log}");
    assert!(log.contains("draining"), "{log}");
    assert!(!log.contains('\u{1b}'), "colour codes in {log:?}");
    let log = serve_log(&["--log-format", "json"]);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let backend = lines
        .iter()
        .find(|v| v["message"] == "IO backend selected")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(backend["level"], "INFO");
    assert!(backend["backend"].is_string(), "{backend}");
    assert!(
        lines
            .iter()
            .any(|v| v["message"] == "draining" && v["signal"] == "SIGTERM")
    );
}
