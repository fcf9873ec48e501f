//! etcd's user/password authentication: `POST /v3/auth/authenticate`
//! earns a token, sent as `Authorization` on every later request.
//!
//! [`EtcdAuth`] holds the credentials and the token they last earned. It
//! is shared: every client made from clones of one
//! [`HttpConfig`](crate::HttpConfig) — the lease keeper and each worker's
//! own connection — uses the same token, so when etcd forgets it (its
//! `--auth-token-ttl` passed without use, or a restart lost it) and several workers
//! are refused at once, one of them authenticates again and the others
//! take its token: each refused client names the token generation it was
//! refused with, and only a client still seeing that generation goes to
//! etcd. The lock is held across that one request, so the others wait for
//! its answer instead of each sending their own (at most the client's
//! timeouts; etcd checks a password with bcrypt, which is slow on purpose).
//!
//! Secret: neither the password nor a token appears in `Debug`, an error
//! or a log line. A token is a server's bytes: it is checked to be a
//! short run of visible ASCII before it goes into a header.

use std::sync::PoisonError;
#[cfg(not(loom))]
use std::sync::{Arc, Mutex};

#[cfg(loom)]
use loom::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;

use super::wire;
use crate::error::{Error, Result, server_text};
use crate::http::{HttpClient, Retry};

/// The longest token accepted from etcd (a JWT with a large key is well
/// under it).
const MAX_TOKEN: usize = 4096;

/// etcd credentials and the token they last earned (see the module doc).
/// Cloning shares the token.
#[derive(Clone)]
pub struct EtcdAuth {
    inner: Arc<Inner>,
}

struct Inner {
    user: String,
    password: String,
    slot: Mutex<Slot>,
}

/// The token every client of these credentials sends.
#[derive(Default)]
struct Slot {
    /// Counts authentications: a client refused with generation `g`
    /// authenticates again only if the slot is still at `g`.
    generation: u64,
    /// `None` until the first authentication succeeds.
    token: Option<Token>,
}

/// What etcd gave for the credentials.
#[derive(Clone)]
enum Token {
    /// etcd runs without authentication: nothing to send.
    NotNeeded,
    /// Send this as `Authorization`.
    Value(std::sync::Arc<str>),
}

/// A token a client sends, with the generation it belongs to.
#[derive(Clone)]
pub(crate) struct Bearer {
    generation: u64,
    token: Option<std::sync::Arc<str>>,
}

impl Bearer {
    /// No token: for a client without credentials.
    pub(crate) fn none() -> Self {
        Self {
            generation: 0,
            token: None,
        }
    }

    /// The `Authorization` header's value, if any.
    pub(crate) fn header(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

impl std::fmt::Debug for EtcdAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAuth")
            .field("user", &self.inner.user)
            .finish_non_exhaustive()
    }
}

impl EtcdAuth {
    /// Credentials of etcd user `user`. Both must be non-empty; the user
    /// name may hold no control character.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Result<Self> {
        let (user, password) = (user.into(), password.into());
        if user.is_empty() || user.chars().any(char::is_control) {
            return Err(Error::InvalidRequest(
                "an etcd user name is non-empty, without control characters".into(),
            ));
        }
        if password.is_empty() {
            return Err(Error::InvalidRequest("an empty etcd password".into()));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                user,
                password,
                slot: Mutex::new(Slot::default()),
            }),
        })
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.inner.user
    }

    /// How many tokens these credentials have earned, over every client
    /// sharing them: one, plus one per token etcd forgot.
    pub fn authentications(&self) -> u64 {
        let slot = self.inner.slot.lock();
        slot.unwrap_or_else(PoisonError::into_inner).generation
    }

    /// The token to send: the shared one, or — when there is none yet, or
    /// the server refused generation `refused` and nobody has replaced it
    /// since — a new one, earned over `http`.
    pub(crate) fn bearer(&self, http: &mut HttpClient, refused: Option<u64>) -> Result<Bearer> {
        let (user, password) = (&self.inner.user, &self.inner.password);
        self.bearer_with(refused, || authenticate(http, user, password))
    }

    /// [`bearer`](Self::bearer) with the authentication round trip given:
    /// the shared slot's rule alone, which the loom model checks.
    fn bearer_with(
        &self,
        refused: Option<u64>,
        authenticate: impl FnOnce() -> Result<Token>,
    ) -> Result<Bearer> {
        let mut slot = self
            .inner
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let stale = refused.is_some_and(|g| g == slot.generation);
        if let (Some(token), false) = (&slot.token, stale) {
            return Ok(bearer(slot.generation, token));
        }
        slot.token = None;
        let token = authenticate()?;
        slot.generation += 1;
        slot.token = Some(token.clone());
        Ok(bearer(slot.generation, &token))
    }
}

fn bearer(generation: u64, token: &Token) -> Bearer {
    Bearer {
        generation,
        token: match token {
            Token::NotNeeded => None,
            Token::Value(t) => Some(t.clone()),
        },
    }
}

impl Bearer {
    /// The generation to name when the server refuses this token.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

#[derive(Deserialize)]
struct WAuthenticate {
    #[serde(default)]
    token: String,
}

/// etcd's gRPC code for a request it refuses as unauthenticated (an
/// expired, unknown or malformed token).
const GRPC_UNAUTHENTICATED: i64 = 16;
/// etcd's gRPC code for a bad argument: a wrong password is one.
const GRPC_INVALID_ARGUMENT: i64 = 3;
/// etcd's gRPC code for "permission denied".
const GRPC_PERMISSION_DENIED: i64 = 7;

/// One `/v3/auth/authenticate` round trip.
fn authenticate(http: &mut HttpClient, user: &str, password: &str) -> Result<Token> {
    let req = json!({ "name": user, "password": password });
    let body = serde_json::to_vec(&req).map_err(|e| Error::InvalidRequest(e.to_string()))?;
    // Repeating it only earns another token.
    let answer = http.post("/v3/auth/authenticate", &body, None, Retry::Idempotent)?;
    let endpoint = http.current_endpoint().to_owned();
    if answer.status != 200 {
        return match wire::error(&endpoint, answer.status, &answer.body) {
            Error::Etcd { message, .. } if message.contains("authentication is not enabled") => {
                Ok(Token::NotNeeded)
            }
            Error::Etcd {
                code: GRPC_INVALID_ARGUMENT | GRPC_UNAUTHENTICATED | GRPC_PERMISSION_DENIED,
                message,
            } => Err(Error::AuthRefused { endpoint, message }),
            e => Err(e),
        };
    }
    let a: WAuthenticate = wire::parse(&endpoint, &answer.body)?;
    let token = a.token;
    let header_safe = token.bytes().all(|b| b.is_ascii_graphic());
    if token.is_empty() || token.len() > MAX_TOKEN || !header_safe {
        return Err(Error::protocol(
            &endpoint,
            "the authentication token is not a short run of visible ASCII",
        ));
    }
    Ok(Token::Value(token.into()))
}

/// Whether etcd refused a request for its token rather than its content:
/// the token expired or etcd restarted and forgot it (UNAUTHENTICATED,
/// "invalid auth token"), no token where auth is on ("user name is
/// empty"), or a token issued before the auth store changed ("revision of
/// auth store is old"). A fresh token may succeed where this one failed.
pub(crate) fn token_refused(e: &Error) -> bool {
    match e {
        Error::Etcd { code, message } => {
            *code == GRPC_UNAUTHENTICATED
                || message.contains("user name is empty")
                || message.contains("revision of auth store is old")
        }
        _ => false,
    }
}

/// A token refusal that authenticating again cannot cure, as
/// [`Error::AuthRefused`]; `credentials` says whether the client has any.
pub(crate) fn refusal(e: Error, endpoint: &str, credentials: bool) -> Error {
    match e {
        Error::Etcd { message, .. } if token_refused(&e) => Error::AuthRefused {
            endpoint: endpoint.to_owned(),
            message: if credentials {
                server_text(&message)
            } else {
                server_text(&format!(
                    "the server requires credentials and none are set ({message})"
                ))
            },
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_neither_password_nor_token() {
        let auth = EtcdAuth::new("root", "hunter2-secret").unwrap();
        auth.inner.slot.lock().unwrap().token = Some(Token::Value("tok-SECRET.9".into()));
        let shown = format!(
            "{auth:?} {:?}",
            crate::HttpConfig {
                auth: Some(auth.clone()),
                ..crate::HttpConfig::default()
            }
        );
        assert!(shown.contains("root"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("SECRET"),
            "{shown}"
        );
    }

    #[test]
    fn empty_credentials_are_refused() {
        assert!(EtcdAuth::new("", "p").is_err());
        assert!(EtcdAuth::new("u\n", "p").is_err());
        assert!(EtcdAuth::new("u", "").is_err());
    }

    #[test]
    fn which_answers_ask_for_a_new_token() {
        let etcd = |code, message: &str| Error::Etcd {
            code,
            message: message.into(),
        };
        assert!(token_refused(&etcd(16, "etcdserver: invalid auth token")));
        assert!(token_refused(&etcd(3, "etcdserver: user name is empty")));
        assert!(!token_refused(&etcd(3, "etcdserver: key is not provided")));
        assert!(!token_refused(&etcd(7, "etcdserver: permission denied")));
        let e = refusal(etcd(3, "etcdserver: user name is empty"), "h:1", false);
        assert!(
            matches!(&e, Error::AuthRefused { message, .. } if message.contains("requires credentials")),
            "{e}"
        );
    }
}

/// The shared token under every interleaving of two clients (loom, on this
/// very code: `--cfg loom`, see `.ci/run`).
#[cfg(all(test, loom))]
#[allow(
    clippy::unwrap_used,
    reason = "a model check: a panic is the failure report"
)]
mod loom_tests {
    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    use super::*;

    /// Credentials that earned their first token, `t1`.
    fn authenticated() -> EtcdAuth {
        let auth = EtcdAuth::new("u", "p").unwrap();
        let first = auth
            .bearer_with(None, || Ok(Token::Value("t1".into())))
            .unwrap();
        assert_eq!((first.generation(), first.header()), (1, Some("t1")));
        auth
    }

    /// Two clients refused with the same token at once: exactly one of
    /// them authenticates again, and both go on with its token.
    #[test]
    fn two_clients_refused_at_once_authenticate_once() {
        loom::model(|| {
            let auth = authenticated();
            let calls = Arc::new(AtomicUsize::new(0));
            let clients: Vec<_> = ["a", "b"]
                .into_iter()
                .map(|name| {
                    let (auth, calls) = (auth.clone(), calls.clone());
                    loom::thread::spawn(move || {
                        auth.bearer_with(Some(1), || {
                            calls.fetch_add(1, SeqCst);
                            Ok(Token::Value(format!("t2-{name}").into()))
                        })
                        .unwrap()
                    })
                })
                .collect();
            let got: Vec<Bearer> = clients.into_iter().map(|c| c.join().unwrap()).collect();
            assert_eq!(calls.load(SeqCst), 1);
            assert_eq!(auth.authentications(), 2);
            assert!(got.iter().all(|b| b.generation() == 2));
            assert_eq!(got[0].header(), got[1].header());
        });
    }

    /// A client whose new authentication fails leaves no token behind: the
    /// other, refused with the same token, authenticates itself rather
    /// than being handed the stale one, and a client that comes after a
    /// success takes the new token without asking etcd.
    #[test]
    fn a_failed_authentication_leaves_the_next_client_to_try() {
        loom::model(|| {
            let auth = authenticated();
            let failing = {
                let auth = auth.clone();
                loom::thread::spawn(move || {
                    auth.bearer_with(Some(1), || {
                        Err(Error::InvalidRequest("etcd unreachable".into()))
                    })
                })
            };
            let other = auth
                .bearer_with(Some(1), || Ok(Token::Value("t2".into())))
                .unwrap();
            assert_eq!((other.generation(), other.header()), (2, Some("t2")));
            if let Ok(b) = failing.join().unwrap() {
                assert_eq!((b.generation(), b.header()), (2, Some("t2")));
            }
            assert_eq!(auth.authentications(), 2);
        });
    }
}
