//! The one error type of this crate. Nothing here carries bytes a server
//! sent beyond its own error text, cut to [`MAX_SERVER_TEXT`] bytes, so a
//! hostile peer cannot make a log line unbounded.

use std::io;

/// The longest server-supplied error text kept in an [`Error`] (bytes).
pub const MAX_SERVER_TEXT: usize = 256;

/// What went wrong talking to etcd or NATS.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No endpoint could be connected to; `last` is the last failure.
    #[error("no endpoint reachable ({tried} tried): {last}")]
    Unavailable {
        /// How many endpoints were tried.
        tried: usize,
        /// The last connect failure.
        last: io::Error,
    },
    /// The connection failed before any request byte was known to have
    /// reached the server, or while reading an answer to a request that
    /// may be repeated: nothing changed on the server because of it.
    #[error("connection to {endpoint} failed: {source}")]
    Io {
        /// `host:port` of the server.
        endpoint: String,
        /// The socket error.
        source: io::Error,
    },
    /// The connection failed after a request that changes state was sent
    /// and before its answer came: it may or may not have been applied.
    /// Read the state back (e.g. `Ownership::holder`) to learn which.
    #[error(
        "outcome unknown: connection to {endpoint} failed after the request was sent: {source}"
    )]
    OutcomeUnknown {
        /// `host:port` of the server.
        endpoint: String,
        /// The socket error.
        source: io::Error,
    },
    /// No answer within the configured timeout.
    #[error("no answer from {endpoint} within the timeout")]
    Timeout {
        /// `host:port` of the server.
        endpoint: String,
    },
    /// The server's bytes are not the protocol this client speaks.
    #[error("protocol error from {endpoint}: {what}")]
    Protocol {
        /// `host:port` of the server.
        endpoint: String,
        /// What was wrong (never the peer's bytes).
        what: String,
    },
    /// An answer or a message larger than this client accepts.
    #[error("{what} larger than the {max}-byte limit")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The limit in bytes.
        max: usize,
    },
    /// A request this client refuses to send (a subject with spaces, a
    /// header value with a line break, an empty key, …).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// etcd answered with an error (its gRPC status code and message).
    #[error("etcd error {code}: {message}")]
    Etcd {
        /// The gRPC status code (5 = not found, 9 = failed precondition, …).
        code: i64,
        /// The server's message.
        message: String,
    },
    /// The lease does not exist (any more): it expired or was revoked, and
    /// every key attached to it has been deleted.
    #[error("etcd lease {0} not found (expired or revoked)")]
    LeaseNotFound(i64),
    /// A watch asked for revisions etcd has compacted away; restart from
    /// a fresh read at or after `compact_revision`.
    #[error("etcd watch start revision compacted (oldest kept: {compact_revision})")]
    Compacted {
        /// The oldest revision still available.
        compact_revision: i64,
    },
    /// The server ended a watch stream.
    #[error("the etcd watch was cancelled by the server")]
    WatchCanceled,
    /// Other writers kept winning a compare-and-swap for `attempts` tries
    /// (nothing was written).
    #[error("contention: {attempts} compare-and-swap attempts lost to other writers")]
    Contention {
        /// The attempts made.
        attempts: u32,
    },
    /// The server refused to let us in: wrong user or password (etcd,
    /// NATS), no credentials where it requires them, or credentials it
    /// still refuses after authenticating again. Trying again with the
    /// same credentials will not help. Never carries a password or token.
    #[error("authentication refused by {endpoint}: {message}")]
    AuthRefused {
        /// `host:port` of the server.
        endpoint: String,
        /// What the server said, cut to [`MAX_SERVER_TEXT`] bytes.
        message: String,
    },
    /// NATS sent `-ERR` (the connection is closed by the server after most).
    #[error("NATS server error: {0}")]
    Nats(String),
    /// Nobody subscribes to the subject of a request (for a JetStream API
    /// subject: JetStream is not enabled, or the stream does not exist).
    #[error("no responders for {subject}")]
    NoResponders {
        /// The request's subject.
        subject: String,
    },
    /// JetStream answered with an API error.
    #[error("JetStream error {code}/{err_code}: {description}")]
    JetStream {
        /// The HTTP-like status (400, 404, 503, …).
        code: u16,
        /// JetStream's own error code (10071 = wrong last sequence, …).
        err_code: u32,
        /// The server's description.
        description: String,
    },
}

/// JetStream's error code for a failed `Nats-Expected-Last-Sequence` or
/// `Nats-Expected-Last-Subject-Sequence` check.
pub const JS_WRONG_LAST_SEQUENCE: u32 = 10071;
/// JetStream's error code for "stream not found".
pub const JS_STREAM_NOT_FOUND: u32 = 10059;
/// JetStream's error code for "no message found" (a read by sequence).
pub const JS_NO_MESSAGE_FOUND: u32 = 10037;
/// JetStream's error code for "stream name already in use" (with another
/// configuration).
pub const JS_STREAM_NAME_IN_USE: u32 = 10058;

impl Error {
    /// Whether this is JetStream's answer to a failed expected-sequence
    /// check (optimistic concurrency lost: someone else published first).
    pub fn is_wrong_last_sequence(&self) -> bool {
        matches!(self, Self::JetStream { err_code, .. } if *err_code == JS_WRONG_LAST_SEQUENCE)
    }

    pub(crate) fn protocol(endpoint: &str, what: impl Into<String>) -> Self {
        Self::Protocol {
            endpoint: endpoint.to_owned(),
            what: what.into(),
        }
    }
}

/// `text` cut to [`MAX_SERVER_TEXT`] bytes at a character boundary.
pub(crate) fn server_text(text: &str) -> String {
    let mut end = text.len().min(MAX_SERVER_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_cuts_at_a_char_boundary() {
        let long = "é".repeat(MAX_SERVER_TEXT);
        let cut = server_text(&long);
        assert!(cut.len() <= MAX_SERVER_TEXT);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(server_text("short"), "short");
    }
}
