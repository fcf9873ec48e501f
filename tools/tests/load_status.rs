//! `dtp load`'s exit status as a user meets it, against a real `dtp serve`:
//! streams over several connections (plaintext and DTP) succeed and report
//! the client's own CPU time; a run that fails — a revoked credential, a
//! wrong pinned terminal key, a resource the terminal does not have,
//! nothing listening — exits 1 and names why, and the gateway counts the
//! refused handshakes in `/metrics`; arguments that cannot work are refused
//! before anything runs (exit 2, one line).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Output, Stdio};

use support::{FayFiles, Serve, Setup, dtp};

const TERMINAL: &str = "[terminal.control]\nterminal_id = \"t1\"\n[[terminal.control.resources]]\nresource_id = \"res-0\"\n";

/// A plain `dtp serve` (one shard, no admin port, no realtime) with `args`.
fn gateway(args: &[&str]) -> Serve {
    let mut all = vec!["--shards", "1", "--no-admin", "--no-realtime"];
    all.extend(args);
    Serve::launch(&all, false)
}

/// `dtp load` with `args` (short runs on one client shard unless told).
fn load(target: SocketAddr, args: &[impl AsRef<str>]) -> Output {
    dtp()
        .args(["load", "--target", &target.to_string()])
        .args(["--duration", "0.5", "--warmup", "0"])
        .args(args.iter().map(AsRef::as_ref))
        .output()
        .unwrap()
}

/// `dtp load --dtp` as `fay`, pinning `pin`.
fn load_dtp(target: SocketAddr, fay: &FayFiles, pin: &Path, args: &[impl AsRef<str>]) -> Output {
    let path = |p: &Path| p.display().to_string();
    let mut all = vec![
        "--dtp".to_owned(),
        "--fay-key".to_owned(),
        path(&fay.key),
        "--credential".to_owned(),
        path(&fay.credential),
        "--pin-terminal".to_owned(),
        path(pin),
    ];
    all.extend(args.iter().map(|a| a.as_ref().to_owned()));
    load(target, &all)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run failed (exit 1) and its last line says `needle`.
fn assert_failed(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}\n{out:?}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains(needle),
        "no `{needle}` in the error line: {err}"
    );
}

/// An address nothing listens on (a port just freed).
fn nobody() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// `GET /metrics` on the admin port.
fn metrics(admin: &str) -> String {
    let mut s = TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn plaintext_stream_runs_over_several_connections() {
    let gw = gateway(&[]);
    let dir = std::env::temp_dir().join(format!("dtp-load-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_json = dir.join("stream.json");
    let out = load(gw.addr, &stream_args(&out_json));
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out_json);
    assert_eq!(v["connections"], 4, "{v:#}");
    assert_eq!(v["errors"], 0, "{v:#}");
    assert!(v["bytes_per_s"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["client_cpu_ns"].as_u64().unwrap() > 0, "{v:#}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("client cpu"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream over four connections on two client threads, its JSON to `json`.
fn stream_args(json: &std::path::Path) -> Vec<String> {
    [
        "--workload",
        "stream",
        "--connections",
        "4",
        "--shards",
        "2",
        "--json",
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([json.display().to_string()])
    .collect()
}

#[test]
fn dtp_stream_runs_over_several_connections() {
    let setup = Setup::new("load-status-dtp");
    let fay = setup.fay("bench-fay", &[]);
    let config = setup.dir.join("dtp.toml");
    std::fs::write(
        &config,
        format!(
            "[dtp]\nenabled = true\nterminal_key = {:?}\ntrust = [{:?}]\n",
            setup.dir.join("terminal.key").display().to_string(),
            setup.dir.join("issuer.key.pub").display().to_string(),
        ),
    )
    .unwrap();
    let gw = gateway(&["--config", &config.display().to_string()]);
    let out_json = setup.dir.join("dtp-stream.json");
    let out = load_dtp(
        gw.addr,
        &fay,
        &setup.dir.join("terminal.key.pub"),
        &stream_args(&out_json),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out_json);
    assert_eq!(v["connections"], 4, "{v:#}");
    assert_eq!(v["dtp"]["established_flows"], 4, "{v:#}");
    assert_eq!(v["dtp"]["lost"], 0, "{v:#}");
    assert!(v["dtp"]["delivered"].as_u64().unwrap() > 0, "{v:#}");
    assert!(v["client_cpu_ns"].as_u64().unwrap() > 0, "{v:#}");
}

#[test]
fn a_revoked_credential_fails_the_run_with_its_code_and_is_counted() {
    let setup = Setup::new("load-status-revoked");
    let fay = setup.fay("revoked-fay", &["res-0=write"]);
    let list = setup.dir.join("revoked.txt");
    let out = dtp()
        .args(["cred", "revoke", "--list"])
        .arg(&list)
        .arg(&fay.credential)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let config = setup.config(&format!(
        "revocations = {:?}\n\n{TERMINAL}",
        list.display().to_string()
    ));
    let serve = Serve::start(&config);
    let pin = setup.dir.join("terminal.key.pub");
    let out = load_dtp(
        serve.addr,
        &fay,
        &pin,
        &["--workload", "pingpong", "--connections", "2"],
    );
    assert_failed(&out, "2005 CREDENTIAL_REVOKED");
    assert!(
        stderr(&out).contains("0 of 2 connections established a DTP session"),
        "{}",
        stderr(&out)
    );
    // The gateway counted the refusals by code.
    let m = metrics(&serve.admin);
    let line = m
        .lines()
        .find(|l| l.starts_with("dtp_cap_refused_total{code=\"2005\"}"))
        .unwrap_or_else(|| panic!("no 2005 counter in {m}"));
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 2, "{line}");
    // The control mode says the same for its Fays' handshakes.
    let out = dtp()
        .args(["load", "--dtp", "--control", "decisions"])
        .args(["--target", &serve.addr.to_string()])
        .args([
            "--issuer-key",
            &setup.dir.join("issuer.key").display().to_string(),
        ])
        .args(["--pin-terminal", &pin.display().to_string()])
        .args(["--connections", "2", "--duration", "0.5", "--warmup", "0"])
        .output()
        .unwrap();
    // Minted credentials are not revoked, but the terminal has no
    // resources `res-1`: the refusal is named with the terminal's words.
    assert_failed(&out, "has no resource");
}

#[test]
fn a_wrong_pinned_terminal_key_fails_the_run() {
    let setup = Setup::new("load-status-pin");
    let fay = setup.fay("pin-fay", &[]);
    let serve = Serve::start(&setup.config(TERMINAL));
    // The Fay's own public key is not the terminal's.
    let wrong = setup.dir.join("pin-fay.key.pub");
    let out = load_dtp(
        serve.addr,
        &fay,
        &wrong,
        &["--workload", "stream", "--connections", "2"],
    );
    assert_failed(&out, "2001 CAP_FAILED");
    assert!(stderr(&out).contains("pinned"), "{}", stderr(&out));
}

#[test]
fn nothing_listening_fails_the_run() {
    let addr = nobody();
    let want = format!("nothing listens on {addr}");
    assert_failed(&load(addr, &["--connections", "2"]), &want);
    let setup = Setup::new("load-status-nobody");
    let fay = setup.fay("nobody-fay", &[]);
    let out = load_dtp(
        addr,
        &fay,
        &setup.dir.join("terminal.key.pub"),
        &["--workload", "stream", "--connections", "2"],
    );
    assert_failed(&out, &want);
}

#[test]
fn arguments_that_cannot_work_are_refused_before_anything_runs() {
    // Nothing listens there: each case must fail on its arguments first.
    let addr = nobody();
    for (args, needle) in [
        (&["--rate", "0"][..], "--rate 0"),
        (&["--workload", "stream", "--rate", "10"], "--rate"),
        (&["--payload", "0"], "--payload 0"),
        (&["--shards", "0"], "--shards 0"),
        (&["--min-success", "0"], "--min-success"),
        (&["--min-success", "1.5"], "--min-success"),
        (&["--connections", "0"], "--connections"),
        (&["--window", "100", "--workload", "stream"], "--window"),
        (&["--duration", "0"], "--duration"),
        (&["--duration", "nan"], "--duration"),
    ] {
        let out = dtp()
            .args(["load", "--target", &addr.to_string()])
            .args(args)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: BAD_ARGUMENT") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn hold_keeps_a_session_open_until_interrupted_then_releases_it() {
    let setup = Setup::new("load-status-hold");
    let serve = Serve::start(&setup.config(TERMINAL));
    let fay = setup.fay("holder", &["res-0=write"]);
    // The Fay's own files; --duration bounds the test should SIGINT be lost.
    let mut child = dtp()
        .args(["load", "--dtp", "--control", "hold", "--resource", "res-0"])
        .args(["--target", &serve.addr.to_string(), "--duration", "20"])
        .arg("--fay-key")
        .arg(&fay.key)
        .arg("--credential")
        .arg(&fay.credential)
        .arg("--pin-terminal")
        .arg(setup.dir.join("terminal.key.pub"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("hold printed nothing").unwrap();
    let id = first
        .strip_prefix("holding session ")
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_owned();
    // While it runs, the admin API lists the session, held by this Fay.
    let sessions = serve.ctl_json(&["sessions"]);
    let listed = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not in {sessions:#}"))
        .clone();
    assert_eq!(listed["fay_id"], "holder", "{listed:#}");
    assert_eq!(listed["resource_id"], "res-0", "{listed:#}");
    let text = serve.ctl_ok(&["sessions"]);
    assert!(text.contains(&id), "{text}");
    // Ctrl-C: it releases the session and exits 0.
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}: {err}\n{rest:?}");
    assert!(
        rest.iter().any(|l| *l == format!("released session {id}")),
        "{rest:?}"
    );
    assert_eq!(serve.ctl_ok(&["sessions"]), "no sessions\n");
}

#[test]
fn hold_on_an_unknown_resource_fails_with_the_terminal_s_reason() {
    let setup = Setup::new("load-status-hold-unknown");
    let serve = Serve::start(&setup.config(TERMINAL));
    let out = dtp()
        .args(["load", "--dtp", "--control", "hold", "--resource", "res-9"])
        .args(["--target", &serve.addr.to_string(), "--duration", "5"])
        .arg("--issuer-key")
        .arg(setup.dir.join("issuer.key"))
        .arg("--pin-terminal")
        .arg(setup.dir.join("terminal.key.pub"))
        .output()
        .unwrap();
    assert_failed(&out, "has no resource \"res-9\"");
    // Without a resource, it is refused before anything runs.
    let out = dtp()
        .args(["load", "--dtp", "--control", "hold"])
        .args(["--target", &nobody().to_string()])
        .arg("--issuer-key")
        .arg(setup.dir.join("issuer.key"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("--resource"), "{}", stderr(&out));
}
