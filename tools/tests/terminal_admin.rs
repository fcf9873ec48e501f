//! The terminal's configuration and admin surface at their edges: bad
//! `[terminal]` sections refused with the key named, `--print-config`
//! with the section's defaults, the admin port's HTTP errors (JSON, right
//! status, bounded), the bearer token, `/metrics`, and `dtp ctl`'s exit
//! statuses.

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

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{Serve, Setup, dtp};

const MINIMAL: &str = "[terminal.control]\nterminal_id = \"t1\"\n[[terminal.control.resources]]\nresource_id = \"arm\"\n";

/// `dtp serve --config` on `text` must exit 2 with BAD_CONFIG naming `key`.
fn refused(setup: &Setup, text: &str, key: &str) {
    let path = setup.dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = dtp()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{text}: {err}");
    assert!(
        err.starts_with("error: BAD_CONFIG") && err.contains(key),
        "{text}: {err}"
    );
}

#[test]
fn bad_terminal_sections_are_refused_naming_the_key() {
    let setup = Setup::new("badconfig");
    // Without DTP there is no authenticated Fay to give a session to.
    refused(&setup, MINIMAL, "[dtp] enabled = true");
    let with_dtp = |extra: &str| {
        let path = setup.config(&format!("{MINIMAL}{extra}"));
        std::fs::read_to_string(path).unwrap()
    };
    for (extra, key) in [
        ("[terminal]\nsurprise = 1\n", "surprise"),
        ("[terminal]\nmodel_workers = 0\n", "terminal.model_workers"),
        ("[terminal]\nhuman_queue = 100000\n", "terminal.human_queue"),
        (
            "[terminal.control.liveness]\nheartbeat_interval_ms = 100\n",
            "heartbeat_interval_ms",
        ),
        (
            "[terminal.control.handover]\nqueue_capacity = 9\n",
            "queue_capacity",
        ),
        (
            "[terminal.os_access]\nkind = \"command\"\ngrant = []\nrevoke = [\"true\"]\n",
            "terminal.os_access",
        ),
        ("[terminal.os_access]\nkind = \"setfacl\"\n", "setfacl"),
        (
            "[terminal.audit]\npath = \"/nonexistent-dir/x/audit.jsonl\"\nfsync = \"sometimes\"\n",
            "sometimes",
        ),
    ] {
        refused(&setup, &with_dtp(extra), key);
    }
    // No token, and the admin endpoints would face the network.
    let open = with_dtp("").replace("127.0.0.1:0", "0.0.0.0:0");
    refused(&setup, &open, "admin.listen");
}

#[test]
fn print_config_shows_the_terminal_section_with_its_defaults() {
    let setup = Setup::new("print");
    let path = setup.config(MINIMAL);
    let out = dtp()
        .args(["serve", "--print-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "[terminal]",
        "model_workers = 2",
        "[terminal.control.liveness]",
        "heartbeat_interval_ms = 10000",
        "heartbeat_timeout_ms = 30000",
        "per_fay = 64",
        "queue_capacity = 8",
        "resource_id = \"arm\"",
        "[terminal.os_access]",
        "kind = \"noop\"",
        "token_file = \"\"",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

/// One raw request to the admin port; the status and the body.
fn raw(admin: &str, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

fn post(admin: &str, path: &str, body: &str) -> (u16, String) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(admin, &request)
}

/// The `error` code of a JSON error body.
fn code(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(v["message"].is_string(), "{body}");
    v["error"].as_str().unwrap().to_owned()
}

#[test]
fn the_admin_port_answers_errors_as_json_with_the_right_status() {
    let setup = Setup::new("http");
    let serve = Serve::start(&setup.config(MINIMAL));
    let admin = serve.admin.as_str();
    let get = |path: &str| raw(admin, &format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n"));

    let (status, body) = get("/v1/sessions");
    assert_eq!((status, body.as_str()), (200, "{\"sessions\":[]}"));
    let cases = [
        (get("/v1/nothing"), 404, "NOT_FOUND"),
        (get("/v1/sessions/x/terminate"), 405, "METHOD_NOT_ALLOWED"),
        (post(admin, "/v1/sessions", ""), 405, "METHOD_NOT_ALLOWED"),
        (
            post(admin, "/v1/sessions/nope/terminate", ""),
            400,
            "BAD_UUID",
        ),
        (
            post(
                admin,
                "/v1/sessions/0190c4a1-0000-7000-8000-000000000000/terminate",
                "",
            ),
            404,
            "E_SESSION_NOT_FOUND",
        ),
        (
            post(admin, "/v1/resources/arm/availability", "{"),
            400,
            "BAD_JSON",
        ),
        (
            post(admin, "/v1/resources/arm/availability", "{\"up\":true}"),
            400,
            "BAD_JSON",
        ),
        (
            post(
                admin,
                "/v1/resources/nope/availability",
                "{\"available\":false}",
            ),
            404,
            "UNKNOWN_RESOURCE",
        ),
        (
            post(admin, "/v1/resources/nope/reconciled", ""),
            404,
            "UNKNOWN_RESOURCE",
        ),
        (
            post(
                admin,
                "/v1/handovers",
                "{\"resource_id\":\"arm\",\"target_credential\":\"human\"}",
            ),
            409,
            "NO_CONTROLLER",
        ),
        (
            post(
                admin,
                "/v1/decisions/0190c4a1-0000-7000-8000-000000000000",
                "{\"decision\":\"maybe\"}",
            ),
            400,
            "BAD_DECISION",
        ),
        (
            post(admin, "/v1/revocations", "{\"descriptor_id\":\"x\"}"),
            400,
            "BAD_UUID",
        ),
        (
            raw(
                admin,
                "POST /v1/revocations HTTP/1.1\r\ncontent-length: 999999999\r\n\r\n",
            ),
            413,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            raw(
                admin,
                &format!(
                    "GET /v1/sessions HTTP/1.1\r\nx: {}\r\n\r\n",
                    "a".repeat(9000)
                ),
            ),
            431,
            "HEADERS_TOO_LARGE",
        ),
    ];
    for ((status, body), want_status, want_code) in cases {
        assert_eq!(
            (status, code(&body)),
            (want_status, want_code.to_owned()),
            "{body}"
        );
    }
    // SPEC TS-4: an operator's clear of a resource with no marks.
    let (status, body) = post(admin, "/v1/resources/arm/reconciled", "");
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"resource_id\":\"arm\",\"cleared\":0}")
    );
    // A credential-shaped value in a bad body is not echoed.
    let (status, body) = post(
        admin,
        "/v1/handovers",
        "{\"resource_id\":\"arm\",\"target_credential\":\"not-a-credential-SECRET\",\"source_session_id\":\"0190c4a1-0000-7000-8000-000000000000\"}",
    );
    assert_eq!((status, code(&body)), (400, "BAD_CREDENTIAL".to_owned()));
    assert!(!body.contains("SECRET"), "{body}");
    let (status, metrics) = get("/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("dtp_terminal_admin_commands_total "),
        "{metrics}"
    );
}

#[test]
fn a_token_guards_v1_but_not_metrics() {
    let setup = Setup::new("token");
    let token = setup.dir.join("admin.token");
    std::fs::write(&token, "correct-horse-battery-staple\n").unwrap();
    let path = setup.config(MINIMAL);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "[admin]\n",
        &format!("[admin]\ntoken_file = \"{}\"\n", token.display()),
    );
    std::fs::write(&path, text).unwrap();
    let serve = Serve::start(&path);
    let denied = serve.ctl(&["sessions"]);
    assert_eq!(denied.status.code(), Some(1));
    let err = String::from_utf8(denied.stderr).unwrap();
    assert!(err.contains("401 UNAUTHORIZED"), "{err}");
    let token_arg = token.display().to_string();
    let out = serve.ctl_ok(&["--token-file", &token_arg, "sessions"]);
    assert_eq!(out, "no sessions\n");
    let (status, _) = raw(&serve.admin, "GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
}

#[test]
fn ctl_fails_with_one_line_and_the_documented_status() {
    // A port nothing listens on: bind, learn it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = format!("127.0.0.1:{port}");
    let out = dtp()
        .args(["ctl", "--admin", &closed, "sessions"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: admin port") && err.lines().count() == 1,
        "{err}"
    );
    for args in [
        vec!["terminate", "not-a-uuid"],
        vec!["decide", "nope", "allow"],
        vec!["revoke", "1234"],
        vec!["decide", "0190c4a1-0000-7000-8000-000000000000", "maybe"],
        vec!["resource", "arm"],
        vec![
            "handover",
            "--resource",
            "arm",
            "--credential",
            "human",
            "--source-session",
            "x",
        ],
    ] {
        let out = dtp()
            .args(["ctl", "--admin", &closed])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let out = dtp()
        .args(["ctl", "--admin", &closed, "terminate", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err, "error: BAD_UUID the session id `x` is not a UUID\n");
    for sub in [
        "sessions",
        "resources",
        "handovers",
        "terminate",
        "resource",
        "handover",
        "decisions",
        "decide",
        "revoke",
    ] {
        let out = dtp().args(["ctl", sub, "--help"]).output().unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success() && help.contains("--admin"),
            "{sub}: {help}"
        );
    }
}
