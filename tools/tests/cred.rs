//! `dtp cred` as an operator runs it: keys, issue, inspect, verify, revoke,
//! each in a scratch directory; every failure one line with the right exit
//! status (2 bad input, 1 unreadable file) and, for verification, the CAP
//! wire code.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// 2026-01-01T00:00:00Z.
const JAN_2026: u64 = 1_767_225_600;
/// 2027-01-01T00:00:00Z.
const JAN_2027: u64 = 1_798_761_600;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dtp-cred-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Runs `dtp` in this directory.
    fn dtp(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_dtp"))
            .args(args)
            .current_dir(&self.0)
            .output()
            .unwrap()
    }

    /// Runs `dtp`, expects success, returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.dtp(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    }

    /// An issuer key pair `NAME` + `NAME.pub`; returns the key id.
    fn issuer(&self, name: &str) -> String {
        self.ok(&["cred", "issuer-key", "--out", name])
            .trim()
            .to_owned()
    }

    /// A credential for `fay-7` on `camera-1=read,write` and
    /// `door=execute`, valid through 2026, signed by `issuer`; returns its
    /// descriptor id.
    fn credential(&self, issuer: &str, out: &str) -> String {
        if !self.path("fay.key.pub").exists() {
            self.ok(&["cred", "noise-key", "--out", "fay.key"]);
        }
        self.ok(&[
            "cred",
            "issue",
            "--issuer-key",
            issuer,
            "--fay-id",
            "fay-7",
            "--noise-key",
            "fay.key.pub",
            "--grant",
            "camera-1=read,write",
            "--grant",
            "door=execute",
            "--not-before",
            "2026-01-01T00:00:00Z",
            "--not-after",
            &JAN_2027.to_string(),
            "--out",
            out,
        ])
        .trim()
        .to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Exactly one line `error: <code> …` and the given exit status.
fn assert_error(o: &Output, status: i32, code: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(status), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    assert!(err.starts_with(&format!("error: {code} ")), "stderr: {err}");
    assert!(o.stdout.is_empty(), "stdout on error");
    err
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_decode(text: &str) -> Vec<u8> {
    let sextets: Vec<u32> = text
        .bytes()
        .filter(|c| *c != b'=')
        .map(|c| B64.iter().position(|b| *b == c).unwrap() as u32)
        .collect();
    let mut out = Vec::new();
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, s)| n | s << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let mut b = [0u8; 3];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The binary form of a credential file.
fn credential_bytes(text: &str) -> Vec<u8> {
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    base64_decode(&body)
}

fn credential_text(bytes: &[u8]) -> String {
    let b64 = base64_encode(bytes);
    let mut out = String::from("-----BEGIN DTP CREDENTIAL-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str("-----END DTP CREDENTIAL-----\n");
    out
}

#[test]
fn issue_inspect_verify_revoke_then_verify_again() {
    let s = Scratch::new("flow");
    let key_id = s.issuer("issuer.key");
    assert_eq!(key_id.len(), 16, "{key_id}");
    assert!(key_id.bytes().all(|b| b.is_ascii_hexdigit()));
    let noise = s.ok(&["cred", "noise-key", "--out", "fay.key"]);
    let noise = noise.trim();
    assert_eq!(noise.len(), 64);
    assert_eq!(
        fs::read_to_string(s.path("fay.key.pub")).unwrap().trim(),
        noise
    );
    let id = s.credential("issuer.key", "fay.cred");
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 4);

    let text = s.ok(&["cred", "inspect", "fay.cred"]);
    for line in [
        format!("descriptor_id {id}"),
        "fay_id        fay-7".to_owned(),
        format!("noise_key     {noise}"),
        format!("issuer_key_id {key_id}"),
        format!("not_before    {JAN_2026} (2026-01-01T00:00:00Z)"),
        format!("not_after     {JAN_2027} (2027-01-01T00:00:00Z)"),
        "  camera-1 read,write".to_owned(),
        "  door execute".to_owned(),
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    assert!(text.contains("not verified"));

    let json: serde_json::Value =
        serde_json::from_str(&s.ok(&["cred", "inspect", "fay.cred", "--json"])).unwrap();
    assert_eq!(json["descriptor_id"], id.as_str());
    assert_eq!(json["fay_id"], "fay-7");
    assert_eq!(json["not_after"], JAN_2027);
    assert_eq!(json["not_after_utc"], "2027-01-01T00:00:00Z");
    assert_eq!(json["grants"][0]["resource_id"], "camera-1");
    assert_eq!(
        json["grants"][0]["modes"],
        serde_json::json!(["read", "write"])
    );
    assert_eq!(json["verified"], false);

    let at = "2026-06-01T00:00:00Z";
    let valid = s.ok(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "issuer.key.pub",
        "--at",
        at,
    ]);
    assert_eq!(valid.lines().next(), Some("valid"));
    assert!(valid.contains("fay_id        fay-7"), "{valid}");
    assert!(valid.contains("  camera-1 read,write"), "{valid}");

    // Revoke by id; the list file is created. Revoking again is a no-op.
    assert_eq!(
        s.ok(&["cred", "revoke", "--list", "revoked.txt", &id]),
        format!("revoked {id}\n")
    );
    assert_eq!(
        s.ok(&["cred", "revoke", "--list", "revoked.txt", "fay.cred"]),
        format!("already revoked {id}\n")
    );
    let list = fs::read_to_string(s.path("revoked.txt")).unwrap();
    assert_eq!(list.lines().filter(|l| *l == id).count(), 1, "{list}");

    let o = s.dtp(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "issuer.key.pub",
        "--revocations",
        "revoked.txt",
        "--at",
        at,
    ]);
    let err = assert_error(&o, 2, "2005 CREDENTIAL_REVOKED");
    assert!(err.contains(&id), "{err}");
}

#[test]
fn expiry_is_exclusive_and_reported_as_expired() {
    let s = Scratch::new("expired");
    s.issuer("issuer.key");
    s.credential("issuer.key", "fay.cred");
    let verify_at = |t: &str| {
        s.dtp(&[
            "cred",
            "verify",
            "fay.cred",
            "--trust",
            "issuer.key.pub",
            "--at",
            t,
        ])
    };

    assert_eq!(
        verify_at(&(JAN_2027 - 1).to_string()).status.code(),
        Some(0)
    );
    let err = assert_error(
        &verify_at(&JAN_2027.to_string()),
        2,
        "2004 CREDENTIAL_EXPIRED",
    );
    assert!(err.contains("2027-01-01T00:00:00Z"), "{err}");
    assert_error(&verify_at("2030-01-01"), 2, "2004 CREDENTIAL_EXPIRED");

    // Before not_before: invalid (no dedicated wire code exists).
    assert_eq!(verify_at(&JAN_2026.to_string()).status.code(), Some(0));
    let err = assert_error(
        &verify_at(&(JAN_2026 - 1).to_string()),
        2,
        "2003 CREDENTIAL_INVALID",
    );
    assert!(err.contains("not valid before"), "{err}");
}

#[test]
fn another_issuers_key_is_unknown_issuer() {
    let s = Scratch::new("unknown");
    let ours = s.issuer("issuer.key");
    let theirs = s.issuer("other.key");
    s.credential("issuer.key", "fay.cred");
    let o = s.dtp(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "other.key.pub",
        "--at",
        "2026-06-01",
    ]);
    let err = assert_error(&o, 2, "2006 UNKNOWN_ISSUER");
    assert!(err.contains(&ours) && err.contains(&theirs), "{err}");
    // Trusting both, it verifies.
    let o = s.dtp(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "other.key.pub",
        "issuer.key.pub",
        "--at",
        "2026-06-01",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn tampered_credentials_are_invalid() {
    let s = Scratch::new("tampered");
    s.issuer("issuer.key");
    s.credential("issuer.key", "fay.cred");
    let text = fs::read_to_string(s.path("fay.cred")).unwrap();
    let bytes = credential_bytes(&text);
    assert_eq!(credential_text(&bytes), text, "the test's base64 is right");
    let verify = |name: &str| {
        s.dtp(&[
            "cred",
            "verify",
            name,
            "--trust",
            "issuer.key.pub",
            "--at",
            "2026-06-01",
        ])
    };

    // Another Fay id (`fay-7` starts at byte 78), and a later not_after
    // (bytes 69..77): well-formed, but the signature no longer matches.
    let mut other_fay = bytes.clone();
    assert_eq!(&other_fay[78..83], b"fay-7");
    other_fay[82] = b'8';
    let mut longer = bytes.clone();
    longer[69..77].copy_from_slice(&(JAN_2027 * 2).to_be_bytes());
    for (name, forged) in [("fay8.cred", other_fay), ("longer.cred", longer)] {
        fs::write(s.path(name), credential_text(&forged)).unwrap();
        let err = assert_error(&verify(name), 2, "2003 CREDENTIAL_INVALID");
        assert!(err.contains("signature"), "{err}");
    }

    // Broken armour, a truncated credential, and something else entirely.
    let mut armour = text.clone().into_bytes();
    armour[40] = b'*';
    fs::write(s.path("armour.cred"), &armour).unwrap();
    fs::write(s.path("short.cred"), credential_text(&bytes[..60])).unwrap();
    for name in ["armour.cred", "short.cred", "issuer.key.pub"] {
        assert_error(&verify(name), 2, "2003 CREDENTIAL_INVALID");
        assert_error(
            &s.dtp(&["cred", "inspect", name]),
            2,
            "2003 CREDENTIAL_INVALID",
        );
    }
}

#[test]
fn inspect_shows_a_fingerprint_never_the_signature() {
    let s = Scratch::new("fingerprint");
    s.issuer("issuer.key");
    s.credential("issuer.key", "fay.cred");
    let bytes = credential_bytes(&fs::read_to_string(s.path("fay.cred")).unwrap());
    let signature = &bytes[bytes.len() - 64..];
    let sig_hex: String = signature.iter().map(|b| format!("{b:02x}")).collect();
    for args in [
        &["cred", "inspect", "fay.cred"][..],
        &["cred", "inspect", "--json", "fay.cred"],
        &[
            "cred",
            "verify",
            "fay.cred",
            "--trust",
            "issuer.key.pub",
            "--at",
            "2026-06-01",
        ],
    ] {
        let out = s.ok(args);
        // No run of 8 signature bytes, in hex or base64.
        for w in 0..=56 {
            assert!(!out.contains(&sig_hex[2 * w..2 * w + 16]), "{out}");
        }
        assert!(!out.contains(&base64_encode(&signature[..12])), "{out}");
    }
    let text = s.ok(&["cred", "inspect", "fay.cred"]);
    let line = text.lines().find(|l| l.starts_with("signature")).unwrap();
    assert!(line.contains("sha256:"), "{line}");
}

#[test]
fn bad_modes_grants_and_times_exit_2_with_one_line() {
    let s = Scratch::new("badargs");
    s.issuer("issuer.key");
    s.ok(&["cred", "noise-key", "--out", "fay.key"]);
    // `--fay-id` and `--noise-key` default to good values unless `extra`
    // gives them.
    let issue = |extra: &[&str]| {
        let mut args = vec![
            "cred",
            "issue",
            "--issuer-key",
            "issuer.key",
            "--out",
            "fay.cred",
        ];
        for (flag, default) in [("--fay-id", "fay-7"), ("--noise-key", "fay.key.pub")] {
            if !extra.contains(&flag) {
                args.extend_from_slice(&[flag, default]);
            }
        }
        args.extend_from_slice(extra);
        s.dtp(&args)
    };
    let err = assert_error(
        &issue(&["--grant", "camera-1=read,fly", "--valid-for", "30d"]),
        2,
        "BAD_GRANT",
    );
    assert!(err.contains("`fly`"), "{err}");
    assert_error(
        &issue(&["--grant", "camera-1", "--valid-for", "30d"]),
        2,
        "BAD_GRANT",
    );
    assert_error(
        &issue(&[
            "--grant",
            "a=read",
            "--grant",
            "a=write",
            "--valid-for",
            "1d",
        ]),
        2,
        "BAD_GRANT",
    );
    // No expiry at all.
    let err = assert_error(&issue(&["--grant", "camera-1=read"]), 2, "BAD_ARGUMENT");
    assert!(err.contains("must expire"), "{err}");
    assert_error(
        &issue(&["--not-after", "2027-01-01", "--valid-for", "1d"]),
        2,
        "BAD_ARGUMENT",
    );
    for bad in [
        &["--not-after", "next tuesday"][..],
        &["--not-after", "2027-01-01T00:00:00"],
        &["--not-after", "2027-02-30"],
        &["--valid-for", "30 days"],
        &["--not-before", "2027-01-01", "--not-after", "2026-01-01"],
    ] {
        assert_error(&issue(bad), 2, "BAD_TIME");
    }
    let long_id = "f".repeat(256);
    assert_error(
        &issue(&["--fay-id", &long_id, "--valid-for", "1d"]),
        2,
        "BAD_ARGUMENT",
    );
    // A Noise private key where the public one belongs is refused by name.
    let err = assert_error(
        &issue(&["--noise-key", "fay.key", "--valid-for", "1d"]),
        2,
        "BAD_KEY",
    );
    assert!(err.contains("private key"), "{err}");
    assert_error(
        &issue(&["--noise-key", "abcd", "--valid-for", "1d"]),
        2,
        "BAD_KEY",
    );
    // An issuer key that is not one.
    assert_error(
        &s.dtp(&[
            "cred",
            "issue",
            "--issuer-key",
            "issuer.key.pub",
            "--fay-id",
            "f",
            "--noise-key",
            "fay.key.pub",
            "--valid-for",
            "1d",
            "--out",
            "x.cred",
        ]),
        2,
        "BAD_KEY",
    );
    assert_error(
        &s.dtp(&["cred", "revoke", "--list", "r.txt", "not-an-id"]),
        2,
        "BAD_ARGUMENT",
    );
    fs::write(s.path("bad-list.txt"), "# ok\nnot-a-uuid\n").unwrap();
    let err = assert_error(
        &s.dtp(&[
            "cred",
            "revoke",
            "--list",
            "bad-list.txt",
            &uuid::Uuid::nil().to_string(),
        ]),
        2,
        "BAD_REVOCATION_LIST",
    );
    assert!(err.contains("line 2"), "{err}");
    assert_error(
        &s.dtp(&["cred", "verify", "fay.key.pub"]),
        2,
        "BAD_ARGUMENT",
    );
    // Nothing was written by any of these.
    assert!(!s.path("fay.cred").exists());
    assert!(!s.path("r.txt").exists());
}

#[test]
fn missing_files_exit_2_and_unreadable_ones_exit_1() {
    let s = Scratch::new("unreadable");
    s.issuer("issuer.key");
    s.credential("issuer.key", "fay.cred");
    fs::create_dir(s.path("a-directory")).unwrap();
    // A file that exists but cannot be read: outside the input's fault.
    let o = s.dtp(&["cred", "inspect", "a-directory"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // A file or folder named that does not exist: bad usage.
    for args in [
        &["cred", "inspect", "missing.cred"][..],
        &["cred", "verify", "fay.cred", "--trust", "missing.pub"],
        &[
            "cred",
            "verify",
            "fay.cred",
            "--trust",
            "issuer.key.pub",
            "--revocations",
            "missing.txt",
        ],
        &[
            "cred",
            "issue",
            "--issuer-key",
            "missing.key",
            "--fay-id",
            "f",
            "--noise-key",
            "fay.key.pub",
            "--valid-for",
            "1d",
            "--out",
            "x.cred",
        ],
        &["cred", "issuer-key", "--out", "no-such-dir/issuer.key"],
        &[
            "cred",
            "revoke",
            "--list",
            "no-such-dir/r.txt",
            &uuid::Uuid::nil().to_string(),
        ],
    ] {
        let o = s.dtp(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: NOT_FOUND "), "{err}");
    }
}

#[test]
fn existing_files_are_never_overwritten_without_force() {
    let s = Scratch::new("overwrite");
    let first = s.issuer("issuer.key");
    let private = fs::read_to_string(s.path("issuer.key")).unwrap();
    let err = assert_error(
        &s.dtp(&["cred", "issuer-key", "--out", "issuer.key"]),
        2,
        "FILE_EXISTS",
    );
    assert!(err.contains("--force"), "{err}");
    assert_eq!(fs::read_to_string(s.path("issuer.key")).unwrap(), private);

    // Only FILE.pub in the way: nothing is written either.
    fs::write(s.path("noise.key.pub"), "keep me").unwrap();
    assert_error(
        &s.dtp(&["cred", "noise-key", "--out", "noise.key"]),
        2,
        "FILE_EXISTS",
    );
    assert!(!s.path("noise.key").exists());
    assert_eq!(
        fs::read_to_string(s.path("noise.key.pub")).unwrap(),
        "keep me"
    );

    s.credential("issuer.key", "fay.cred");
    let cred = fs::read_to_string(s.path("fay.cred")).unwrap();
    let o = s.dtp(&[
        "cred",
        "issue",
        "--issuer-key",
        "issuer.key",
        "--fay-id",
        "f",
        "--noise-key",
        "fay.key.pub",
        "--valid-for",
        "1d",
        "--out",
        "fay.cred",
    ]);
    assert_error(&o, 2, "FILE_EXISTS");
    assert_eq!(fs::read_to_string(s.path("fay.cred")).unwrap(), cred);

    // --force replaces, with a new key.
    let second = s.ok(&["cred", "issuer-key", "--out", "issuer.key", "--force"]);
    assert_ne!(second.trim(), first);
    assert_ne!(fs::read_to_string(s.path("issuer.key")).unwrap(), private);
}

#[test]
fn private_keys_are_mode_0600() {
    let s = Scratch::new("modes");
    s.issuer("issuer.key");
    s.ok(&["cred", "noise-key", "--out", "fay.key"]);
    assert_eq!(mode(&s.path("issuer.key")), 0o600);
    assert_eq!(mode(&s.path("fay.key")), 0o600);
    // Public halves are readable by others (umask permitting), never writable.
    assert_eq!(mode(&s.path("issuer.key.pub")) & 0o077 & !0o044, 0);
    // A replaced key that had been left world-readable is private again.
    fs::set_permissions(s.path("fay.key"), fs::Permissions::from_mode(0o644)).unwrap();
    s.ok(&["cred", "noise-key", "--out", "fay.key", "--force"]);
    assert_eq!(mode(&s.path("fay.key")), 0o600);
    let private = fs::read_to_string(s.path("issuer.key")).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{private}"
    );
}

#[test]
fn noise_keys_as_hex_and_validity_from_now() {
    let s = Scratch::new("hex");
    s.issuer("issuer.key");
    let noise = s.ok(&["cred", "noise-key", "--out", "fay.key"]);
    // The key in hex on the command line, valid for a week from now.
    s.ok(&[
        "cred",
        "issue",
        "--issuer-key",
        "issuer.key",
        "--fay-id",
        "fay-7",
        "--noise-key",
        noise.trim(),
        "--valid-for",
        "1w",
        "--out",
        "fay.cred",
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&s.ok(&["cred", "inspect", "--json", "fay.cred"])).unwrap();
    assert_eq!(json["noise_key"], noise.trim());
    let (nb, na) = (
        json["not_before"].as_u64().unwrap(),
        json["not_after"].as_u64().unwrap(),
    );
    assert_eq!(na - nb, 7 * 86_400);
    assert_eq!(json["grants"], serde_json::json!([]));
    // Valid now (no --at), and at its last second; expired at not_after.
    s.ok(&["cred", "verify", "fay.cred", "--trust", "issuer.key.pub"]);
    s.ok(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "issuer.key.pub",
        "--at",
        &(na - 1).to_string(),
    ]);
    let o = s.dtp(&[
        "cred",
        "verify",
        "fay.cred",
        "--trust",
        "issuer.key.pub",
        "--at",
        &na.to_string(),
    ]);
    assert_error(&o, 2, "2004 CREDENTIAL_EXPIRED");
}

#[test]
fn vapid_keys_are_p256_pem_0600_and_their_pub_is_the_application_server_key() {
    use dtp_realtime::push::{VapidKey, base64url_decode};
    let s = Scratch::new("vapid");
    let printed = s.ok(&["cred", "vapid-key", "--out", "vapid.key"]);
    assert_eq!(mode(&s.path("vapid.key")), 0o600);
    let private = fs::read_to_string(s.path("vapid.key")).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{private}"
    );
    let public = fs::read_to_string(s.path("vapid.key.pub")).unwrap();
    assert_eq!(public, printed);
    let point = base64url_decode(public.trim()).unwrap();
    assert_eq!((point.len(), point[0]), (65, 0x04));
    // The file reads back as the key whose public half FILE.pub holds.
    let key = VapidKey::from_text(&private).unwrap();
    assert_eq!(&key.public_key()[..], &point[..]);
    // Never overwritten without --force; a second key differs.
    assert_error(
        &s.dtp(&["cred", "vapid-key", "--out", "vapid.key"]),
        2,
        "FILE_EXISTS",
    );
    let again = s.ok(&["cred", "vapid-key", "--out", "vapid.key", "--force"]);
    assert_ne!(again, printed);
    assert_eq!(mode(&s.path("vapid.key")), 0o600);
}

#[test]
fn help_explains_every_subcommand() {
    let s = Scratch::new("help");
    let top = s.ok(&["cred", "--help"]);
    for sub in [
        "issuer-key",
        "noise-key",
        "vapid-key",
        "issue",
        "inspect",
        "verify",
        "revoke",
        "Exit status",
    ] {
        assert!(top.contains(sub), "{top}");
    }
    for (sub, words) in [
        ("issuer-key", &["--out", "--force", "0600"][..]),
        ("noise-key", &["--out", "FILE.pub"]),
        ("vapid-key", &["--out", "0600", "applicationServerKey"]),
        (
            "issue",
            &[
                "--issuer-key",
                "--fay-id",
                "--noise-key",
                "--grant",
                "--not-before",
                "--not-after",
                "--valid-for",
                "RFC 3339",
                "configure",
            ],
        ),
        ("inspect", &["--json", "fingerprint"]),
        (
            "verify",
            &[
                "--trust",
                "--revocations",
                "--at",
                "CREDENTIAL_REVOKED",
                "UNKNOWN_ISSUER",
            ],
        ),
        ("revoke", &["--list", "DESCRIPTOR_ID"]),
    ] {
        let text = s.ok(&["cred", sub, "--help"]);
        for w in words {
            assert!(
                text.contains(w),
                "`dtp cred {sub} --help` lacks {w}:\n{text}"
            );
        }
    }
}
