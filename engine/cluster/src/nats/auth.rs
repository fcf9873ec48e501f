//! How a NATS client proves who it is: `user`/`pass` or `auth_token` in
//! CONNECT, sent again on every connection (reconnects included). A
//! server that refuses them answers `-ERR 'Authorization Violation'` and
//! closes: that is [`Error::AuthRefused`], never retried with the same
//! credentials. Neither the password nor the token appears in `Debug`, an
//! error or a log line.

use serde_json::Value;

use crate::error::{Error, server_text};

/// NATS credentials (nats-server's `--user`/`--pass`, or `--auth`).
#[derive(Clone, PartialEq, Eq)]
pub enum NatsAuth {
    /// A user and its password.
    UserPassword {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// A bare token.
    Token(String),
}

impl std::fmt::Debug for NatsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UserPassword { user, .. } => f
                .debug_struct("UserPassword")
                .field("user", user)
                .finish_non_exhaustive(),
            Self::Token(_) => f.write_str("Token(..)"),
        }
    }
}

impl NatsAuth {
    /// Adds the credentials' fields to a CONNECT object.
    pub(crate) fn add_to(&self, connect: &mut Value) {
        match self {
            Self::UserPassword { user, password } => {
                connect["user"] = user.as_str().into();
                connect["pass"] = password.as_str().into();
            }
            Self::Token(token) => connect["auth_token"] = token.as_str().into(),
        }
    }
}

/// A handshake error as [`Error::AuthRefused`] when it is the server
/// refusing the credentials; `credentials` says whether any were sent.
pub(crate) fn refusal(e: Error, server: &str, credentials: bool) -> Error {
    match e {
        Error::Nats(text)
            if text
                .to_ascii_lowercase()
                .contains("authorization violation") =>
        {
            Error::AuthRefused {
                endpoint: server.to_owned(),
                message: if credentials {
                    text
                } else {
                    server_text(&format!(
                        "{text} (the server requires credentials and none are set)"
                    ))
                },
            }
        }
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_fields_and_a_debug_without_secrets() {
        let up = NatsAuth::UserPassword {
            user: "gw".into(),
            password: "s3cret-pass".into(),
        };
        let mut connect = serde_json::json!({ "verbose": false });
        up.add_to(&mut connect);
        assert_eq!(
            (connect["user"].as_str(), connect["pass"].as_str()),
            (Some("gw"), Some("s3cret-pass"))
        );
        let token = NatsAuth::Token("tok-s3cret".into());
        token.add_to(&mut connect);
        assert_eq!(connect["auth_token"], "tok-s3cret");
        let shown = format!("{up:?} {token:?}");
        assert!(shown.contains("gw") && !shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn only_an_authorization_violation_is_a_refusal() {
        let e = refusal(Error::Nats("Authorization Violation".into()), "h:1", true);
        assert!(matches!(e, Error::AuthRefused { .. }), "{e}");
        let e = refusal(Error::Nats("Authorization Violation".into()), "h:1", false);
        assert!(e.to_string().contains("requires credentials"), "{e}");
        let e = refusal(
            Error::Nats("Maximum Connections Exceeded".into()),
            "h:1",
            true,
        );
        assert!(matches!(e, Error::Nats(_)), "{e}");
    }
}
