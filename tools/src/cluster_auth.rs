//! `[cluster]` credentials: etcd's `etcd_user` and `etcd_password_file`;
//! NATS's `nats_user` and `nats_password_file`, or `nats_token_file`; and
//! `ca_file`, the CA that `https://` etcd and `tls://` NATS servers'
//! certificates are checked against.
//!
//! A secret is the first line of its file (a trailing CR dropped), read at
//! start; a missing file or an empty first line is a one-line config
//! error naming the key and the file. Secrets are never shown: not in an
//! error, a log line or `--print-config` (which shows file names only).

use dtp_cluster::ClusterTls;
use dtp_cluster::etcd::EtcdAuth;
use dtp_cluster::nats::NatsAuth;

/// etcd's credentials, if `user` is set (then `password_file` must be).
pub(crate) fn etcd(user: &str, password_file: &str) -> Result<Option<EtcdAuth>, String> {
    match (user, password_file) {
        ("", "") => Ok(None),
        ("", _) => Err("cluster.etcd_user: needed with etcd_password_file".into()),
        (_, "") => Err("cluster.etcd_password_file: needed with etcd_user".into()),
        (user, file) => {
            let password = first_line("cluster.etcd_password_file", file)?;
            EtcdAuth::new(user, password)
                .map(Some)
                .map_err(|e| format!("cluster.etcd_user: {e}"))
        }
    }
}

/// NATS's credentials: a user and password, or a token, or none.
pub(crate) fn nats(
    user: &str,
    password_file: &str,
    token_file: &str,
) -> Result<Option<NatsAuth>, String> {
    match (user, password_file, token_file) {
        ("", "", "") => Ok(None),
        ("", "", file) => Ok(Some(NatsAuth::Token(first_line(
            "cluster.nats_token_file",
            file,
        )?))),
        (_, _, file) if !file.is_empty() => Err(
            "cluster.nats_token_file: set it or nats_user with nats_password_file, not both".into(),
        ),
        ("", _, _) => Err("cluster.nats_user: needed with nats_password_file".into()),
        (_, "", _) => Err("cluster.nats_password_file: needed with nats_user".into()),
        (user, file, _) => Ok(Some(NatsAuth::UserPassword {
            user: user.to_owned(),
            password: first_line("cluster.nats_password_file", file)?,
        })),
    }
}

/// The CA of `ca_file`, needed exactly when some endpoint speaks TLS
/// (`https://` etcd, `tls://` NATS).
pub(crate) fn tls(ca_file: &str, endpoints_tls: bool) -> Result<Option<ClusterTls>, String> {
    match (ca_file, endpoints_tls) {
        ("", false) => Ok(None),
        ("", true) => Err("cluster.ca_file: needed with https:// or tls:// endpoints".into()),
        (_, false) => Err("cluster.ca_file: set, but no endpoint is https:// or tls://".into()),
        (file, true) => {
            let pem = std::fs::read(file).map_err(|e| format!("cluster.ca_file: {file}: {e}"))?;
            ClusterTls::from_ca_pem(&pem)
                .map(Some)
                .map_err(|e| format!("cluster.ca_file: {file}: {e}"))
        }
    }
}

/// The first line of `file` (without its line end), for `key`.
fn first_line(key: &str, file: &str) -> Result<String, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{key}: {file}: {e}"))?;
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(format!("{key}: {file}: the first line is empty"));
    }
    String::from_utf8(line.to_vec()).map_err(|_| format!("{key}: {file}: not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn file(tag: &str, content: &[u8]) -> String {
        let p = std::env::temp_dir().join(format!("dtp-cluster-auth-{tag}-{}", std::process::id()));
        std::fs::write(&p, content).unwrap();
        p.display().to_string()
    }

    #[test]
    fn secrets_are_the_first_line() {
        let pw = file("pw", b"s3cret word\r\nsecond line\n");
        let root = etcd("root", &pw).unwrap().unwrap();
        assert_eq!(root.user(), "root");
        let nats_pw = nats("gw", &pw, "").unwrap().unwrap();
        assert_eq!(
            nats_pw,
            NatsAuth::UserPassword {
                user: "gw".into(),
                password: "s3cret word".into()
            }
        );
        let token = nats("", "", &pw).unwrap().unwrap();
        assert_eq!(token, NatsAuth::Token("s3cret word".into()));
        assert_eq!(etcd("", "").unwrap().map(|a| a.user().to_owned()), None);
        assert_eq!(nats("", "", "").unwrap(), None);
        let _ = std::fs::remove_file(pw);
    }

    #[test]
    fn every_bad_combination_is_one_line_naming_the_key_never_the_secret() {
        let pw = file("bad", b"hunter2-x\n");
        let empty = file("empty", b"\nhunter2-y\n");
        let missing = "/nonexistent/dtp-password";
        let cases: Vec<(Result<(), String>, &str)> = vec![
            (
                etcd("root", "").map(drop),
                "cluster.etcd_password_file: needed",
            ),
            (etcd("", &pw).map(drop), "cluster.etcd_user: needed"),
            (
                etcd("root", missing).map(drop),
                "cluster.etcd_password_file: /nonexistent",
            ),
            (etcd("root", &empty).map(drop), "first line is empty"),
            (nats("gw", &pw, &pw).map(drop), "not both"),
            (nats("", &pw, &pw).map(drop), "not both"),
            (
                nats("gw", "", "").map(drop),
                "cluster.nats_password_file: needed",
            ),
            (nats("", &pw, "").map(drop), "cluster.nats_user: needed"),
            (nats("", "", missing).map(drop), "cluster.nats_token_file"),
            (nats("", "", &empty).map(drop), "first line is empty"),
        ];
        for (got, want) in cases {
            let err = got.unwrap_err();
            assert!(err.contains(want), "{want}: {err}");
            assert!(!err.contains('\n') && !err.contains("hunter2"), "{err}");
        }
        let _ = std::fs::remove_file(pw);
        let _ = std::fs::remove_file(empty);
    }
}
