//! `dtp serve` on a Unix stream socket (`[engine] listen = ["unix:PATH"]`)
//! loaded by `dtp load --target unix:PATH`, on both IO backends: the DTP
//! stream delivers every fragment once, plaintext pingpong is answered, and
//! the socket file is removed when the gateway stops. The edges, each one
//! line and its exit status: a folder that does not exist, a path a live
//! gateway holds, a stale socket file left by a killed gateway (replaced),
//! and a load on a path nobody listens on.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the serve tests; each uses part of it"
)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output, Stdio};

use support::{BACKENDS, Scratch, dtp, fay_args, load_keys as keys};

/// A `dtp serve` on a Unix socket, killed when dropped.
struct UnixServe {
    child: Child,
    /// Its `backend …` line.
    backend: String,
}

impl UnixServe {
    /// `dtp serve --config CONFIG` (two shards, no admin port, no realtime
    /// front end), once it printed `listening unix:PATH` for `path` and
    /// its backend.
    fn start(config: &Path, path: &Path) -> Self {
        let mut child = serve(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let want = format!("listening unix:{}", path.display());
        let (mut listening, mut backend) = (false, None);
        while !listening || backend.is_none() {
            let line = lines.next().expect("serve exited").unwrap();
            listening |= line == want;
            if line.starts_with("backend ") {
                backend = Some(line);
            }
        }
        std::thread::spawn(move || for _ in lines {});
        UnixServe {
            child,
            backend: backend.unwrap(),
        }
    }

    /// Stops it with SIGTERM; how it exited.
    fn stop(mut self) -> ExitStatus {
        assert!(support::sigterm(self.child.id()), "kill -TERM failed");
        support::eventually("the gateway's exit", || self.child.try_wait().unwrap())
    }

    /// Kills it with SIGKILL: it leaves its socket file behind.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for UnixServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dtp serve --config CONFIG` with two shards and neither the admin port
/// nor the realtime front end (they would listen on fixed TCP ports).
fn serve(config: &Path) -> std::process::Command {
    let mut c = dtp();
    c.args([
        "serve",
        "--shards",
        "2",
        "--no-pin",
        "--no-admin",
        "--no-realtime",
    ])
    .arg("--config")
    .arg(config)
    .stdin(Stdio::null());
    c
}

/// Writes `dir/NAME.toml`: `[engine] listen = ["unix:PATH"]`, `[io]
/// backend`, then `extra` (the `[dtp]` section, say).
fn config(dir: &Path, name: &str, path: &Path, backend: &str, extra: &str) -> PathBuf {
    let file = dir.join(format!("{name}.toml"));
    let text = format!(
        "[engine]\nlisten = [\"unix:{}\"]\n\n[io]\nbackend = \"{backend}\"\n\n{extra}",
        path.display()
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// `dtp load --target unix:PATH ARGS` (one client thread, no warm-up) on
/// `backend` (`auto`: the load generator's own choice).
fn load(path: &Path, backend: &str, args: &[&str]) -> Output {
    let mut c = dtp();
    c.args(["load", "--shards", "1", "--warmup", "0", "--target"])
        .arg(format!("unix:{}", path.display()))
        .args(args);
    if backend == "auto" {
        c.env_remove("DTP_IO_BACKEND");
    } else {
        c.env("DTP_IO_BACKEND", backend);
    }
    c.output().unwrap()
}

/// `load` with `--json FILE`, which must succeed: the report.
fn load_json(dir: &Path, path: &Path, backend: &str, args: &[&str]) -> serde_json::Value {
    let json = dir.join("load.json");
    let _ = std::fs::remove_file(&json);
    let json_arg = json.display().to_string();
    let out = load(path, backend, &[args, &["--json", &json_arg]].concat());
    assert!(
        out.status.success(),
        "{backend}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// A plaintext pingpong of half a second on `path` is answered, without
/// an error.
fn assert_pingpong_answered(dir: &Path, path: &Path, backend: &str) {
    let v = load_json(
        dir,
        path,
        backend,
        &[
            "--workload",
            "pingpong",
            "--connections",
            "2",
            "--duration",
            "0.5",
        ],
    );
    assert!(v["ops"].as_u64().unwrap() > 0, "{backend}: {v:#}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{backend}: {v:#}");
    assert_eq!(v["failed_connections"].as_u64(), Some(0), "{v:#}");
}

/// The one line of a command that failed with exit status `code`.
fn one_line_error(out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

/// SPEC TRN-1: the DTP protocol over a Unix socket, through the built
/// binaries on both backends: `dtp load --dtp` streams for three seconds,
/// every fragment sent is acknowledged once, and the socket file goes when
/// the gateway stops on SIGTERM.
#[test]
fn dtp_stream_over_a_unix_socket_delivers_every_fragment_on_both_backends() {
    let scratch = Scratch::new("unix-dtp");
    let dir = &scratch.0;
    let keys = keys();
    let section = keys.write_files(dir).dtp_section("");
    let fay = fay_args(dir, &keys);
    for (backend, name) in BACKENDS {
        let path = dir.join(format!("dtp-{backend}.sock"));
        let serve = UnixServe::start(&config(dir, backend, &path, backend, &section), &path);
        assert!(
            serve.backend.starts_with(&format!("backend {name} ")),
            "{}",
            serve.backend
        );
        let v = load_json(
            dir,
            &path,
            backend,
            &[
                &fay.iter().map(String::as_str).collect::<Vec<_>>()[..],
                &[
                    "--workload",
                    "stream",
                    "--connections",
                    "2",
                    "--duration",
                    "3",
                ][..],
            ]
            .concat(),
        );
        let dtp = &v["dtp"];
        let sent = dtp["sent"].as_u64().unwrap();
        assert!(dtp["delivered"].as_u64().unwrap() > 0, "{backend}: {v:#}");
        assert_eq!(dtp["delivered"].as_u64(), Some(sent), "{backend}: {v:#}");
        assert_eq!(dtp["lost"].as_u64(), Some(0), "{backend}: {v:#}");
        assert_eq!(dtp["duplicated"].as_u64(), Some(0), "{backend}: {v:#}");
        assert_eq!(dtp["failed_flows"].as_u64(), Some(0), "{backend}: {v:#}");
        assert_eq!(v["errors"].as_u64(), Some(0), "{backend}: {v:#}");
        assert_eq!(v["backend"].as_str(), Some(name), "{v:#}");
        assert!(serve.stop().success(), "{backend}");
        assert!(
            !path.exists(),
            "{backend}: the socket file outlived the gateway"
        );
    }
}

/// The plaintext benchmark protocol over a Unix socket on both backends:
/// pingpong is answered with no error, and SIGTERM removes the socket file.
#[test]
fn plaintext_pingpong_over_a_unix_socket_is_answered_on_both_backends() {
    let scratch = Scratch::new("unix-plain");
    let dir = &scratch.0;
    for (backend, name) in BACKENDS {
        let path = dir.join(format!("plain-{backend}.sock"));
        let serve = UnixServe::start(&config(dir, backend, &path, backend, ""), &path);
        assert!(serve.backend.starts_with(&format!("backend {name} ")));
        let v = load_json(
            dir,
            &path,
            backend,
            &[
                "--workload",
                "pingpong",
                "--connections",
                "2",
                "--duration",
                "1",
            ],
        );
        assert!(v["ops"].as_u64().unwrap() > 0, "{backend}: {v:#}");
        assert_eq!(v["errors"].as_u64(), Some(0), "{backend}: {v:#}");
        assert_eq!(v["backend"].as_str(), Some(name), "{v:#}");
        assert!(path.exists());
        assert!(serve.stop().success(), "{backend}");
        assert!(
            !path.exists(),
            "{backend}: the socket file outlived the gateway"
        );
    }
}

/// A Unix path in a folder that does not exist is refused before anything
/// starts: one line naming `engine.listen` and the path, exit status 2 (a
/// file named that does not exist).
#[test]
fn a_unix_path_in_a_missing_folder_is_refused_naming_the_key_and_path() {
    let scratch = Scratch::new("unix-nofolder");
    let path = scratch.0.join("missing").join("g.sock");
    let out = serve(&config(&scratch.0, "c", &path, "auto", ""))
        .output()
        .unwrap();
    let err = one_line_error(&out, 2);
    assert!(err.starts_with("error: NOT_FOUND engine.listen"), "{err}");
    assert!(err.contains(&format!("unix:{}", path.display())), "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

/// A second gateway on a path a live one holds is refused (one line
/// ADDRESS_IN_USE naming the key and path, exit status 1), and the first
/// keeps serving; a file that is not a socket in the way is refused too.
#[test]
fn a_unix_path_a_live_gateway_holds_is_refused_and_the_first_keeps_serving() {
    let scratch = Scratch::new("unix-live");
    let dir = &scratch.0;
    let path = dir.join("g.sock");
    let config = config(dir, "c", &path, "auto", "");
    let first = UnixServe::start(&config, &path);
    let out = serve(&config).output().unwrap();
    let err = one_line_error(&out, 1);
    assert!(
        err.starts_with(&format!(
            "error: ADDRESS_IN_USE engine.listen unix:{} is already in use",
            path.display()
        )),
        "{err}"
    );
    assert!(path.exists(), "the refused gateway removed the live socket");
    assert_pingpong_answered(dir, &path, "auto");
    assert!(first.stop().success());

    let file = dir.join("not-a-socket");
    std::fs::write(&file, "x").unwrap();
    let out = serve(&self::config(dir, "f", &file, "auto", ""))
        .output()
        .unwrap();
    let err = one_line_error(&out, 1);
    assert!(err.contains("engine.listen"), "{err}");
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "x",
        "left as it was"
    );
}

/// A gateway killed with SIGKILL leaves its socket file; the next gateway
/// started on the path at once replaces it and serves, on both backends
/// (on io_uring the killed gateway's socket still takes connections for a
/// few milliseconds after its exit: it must not count as a live one).
#[test]
fn a_stale_socket_file_of_a_killed_gateway_is_replaced() {
    let scratch = Scratch::new("unix-stale");
    let dir = &scratch.0;
    for (backend, _) in BACKENDS {
        let path = dir.join(format!("{backend}.sock"));
        let config = config(dir, backend, &path, backend, "");
        UnixServe::start(&config, &path).kill();
        assert!(path.exists(), "{backend}: SIGKILL leaves the socket file");
        let second = UnixServe::start(&config, &path);
        assert_pingpong_answered(dir, &path, backend);
        assert!(second.stop().success(), "{backend}");
        assert!(!path.exists(), "{backend}");
    }
}

/// `dtp load` (plaintext and `--dtp`) on a Unix path nobody listens on
/// fails as on a refused TCP connect: the same exit status, one line saying
/// nothing listens there.
#[test]
fn a_load_on_a_unix_path_nobody_listens_on_says_so() {
    let scratch = Scratch::new("unix-nowhere");
    // A TCP port nobody listens on: one the kernel gave and took back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let tcp = dtp()
        .args(["load", "--duration", "0.5", "--warmup", "0", "--target"])
        .arg(port.to_string())
        .output()
        .unwrap();
    let tcp_err = one_line_error(&tcp, 1);
    assert!(tcp_err.contains("nothing listens on"), "{tcp_err}");
    let fay = fay_args(&scratch.0, &keys());
    let dtp_args: Vec<&str> = fay.iter().map(String::as_str).collect();
    for path in [Path::new("/nowhere.sock"), &scratch.0.join("nowhere.sock")] {
        // The plaintext protocol, then DTP.
        for extra in [&[][..], &dtp_args] {
            let out = load(path, "auto", &[&["--duration", "0.5"][..], extra].concat());
            let err = one_line_error(&out, tcp.status.code().unwrap());
            assert!(
                err.contains(&format!("nothing listens on unix:{}", path.display())),
                "{extra:?}: {err}"
            );
        }
    }
}
