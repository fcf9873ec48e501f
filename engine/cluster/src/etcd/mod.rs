//! A blocking etcd v3 client over etcd's HTTP/JSON gateway (`/v3/kv/*`,
//! `/v3/lease/*`, `/v3/watch`), for worker threads.
//!
//! One [`Etcd`] holds one kept-alive connection and a list of endpoints;
//! when connecting to one fails it moves to the next. A read that fails
//! mid-way is tried on the next endpoint; a write that fails after it was
//! sent is [`Error::OutcomeUnknown`]: read the key back to learn whether it
//! was applied.
//!
//! With credentials ([`HttpConfig::auth`]) every request — watches and
//! lease keep-alives too — carries a token, earned on the first request
//! and shared by the clients of one config (see [`EtcdAuth`]). When etcd
//! refuses a token (unused for its `--auth-token-ttl`, or lost in a
//! restart), the client authenticates again once and sends the request
//! once more: etcd checks the token before it applies anything, so even a
//! write is not applied twice. Wrong credentials are
//! [`Error::AuthRefused`].

mod auth;
mod types;
mod watch;
pub(crate) mod wire;

use serde_json::{Value, json};

pub use auth::EtcdAuth;
pub use types::{
    Compare, CompareOp, CompareTarget, EventKind, Get, KeyValue, Lease, OpResponse, Range, Txn,
    TxnOp, TxnResponse, WatchEvent, prefix_end,
};
pub use watch::Watch;

use crate::error::{Error, Result};
use crate::http::{HttpClient, HttpConfig, Retry};
use auth::Bearer;
use wire::{WDelete, WLease, WPut, WRange, WStreamed, WTxn};

/// etcd's gRPC code for "not found" (a lease that does not exist).
const GRPC_NOT_FOUND: i64 = 5;

/// A blocking etcd client (see the module doc).
#[derive(Debug)]
pub struct Etcd {
    http: HttpClient,
    auth: Option<EtcdAuth>,
}

impl Etcd {
    /// A client of `endpoints` (`host:port`, `http://host:port`, or all
    /// `https://host:port` with [`HttpConfig::tls`]), tried in order, with
    /// [`HttpConfig::auth`]'s credentials if set. Connects lazily, on the
    /// first request.
    pub fn new(endpoints: &[&str], config: HttpConfig) -> Result<Self> {
        let auth = config.auth.clone();
        Ok(Self {
            http: HttpClient::new(endpoints, config)?,
            auth,
        })
    }

    /// Reads one key.
    pub fn get(&mut self, key: &[u8]) -> Result<Get> {
        let r = self.range(key, None)?;
        Ok(Get {
            revision: r.revision,
            kv: r.kvs.into_iter().find(|kv| kv.key == key),
        })
    }

    /// Reads the keys in `[key, range_end)`, or just `key` if `range_end`
    /// is `None` (see [`prefix_end`] for a prefix).
    pub fn range(&mut self, key: &[u8], range_end: Option<&[u8]>) -> Result<Range> {
        let (endpoint, body) = self.call(
            "/v3/kv/range",
            wire::range(key, range_end),
            Retry::Idempotent,
        )?;
        let r: WRange = wire::parse(&endpoint, &body)?;
        Ok(Range {
            revision: r.header.revision,
            count: r.count,
            kvs: r.kvs.into_iter().map(KeyValue::from).collect(),
        })
    }

    /// Writes `value` at `key`, attached to `lease` if given; returns the
    /// revision of the write. [`Error::LeaseNotFound`] if the lease is gone.
    pub fn put(&mut self, key: &[u8], value: &[u8], lease: Option<i64>) -> Result<i64> {
        let answer = self.call("/v3/kv/put", wire::put(key, value, lease), Retry::Once);
        let (endpoint, body) = answer.map_err(|e| lease_error(e, lease))?;
        Ok(wire::parse::<WPut>(&endpoint, &body)?.header.revision)
    }

    /// Deletes `key`; returns how many keys were deleted (0 or 1) and the
    /// store's revision after.
    pub fn delete(&mut self, key: &[u8]) -> Result<(i64, i64)> {
        let (endpoint, body) =
            self.call("/v3/kv/deleterange", wire::range(key, None), Retry::Once)?;
        let d: WDelete = wire::parse(&endpoint, &body)?;
        Ok((d.deleted, d.header.revision))
    }

    /// Runs a transaction (see [`Txn`]). [`Error::LeaseNotFound`] if a put
    /// of the branch that ran names a lease that is gone.
    pub fn txn(&mut self, txn: &Txn) -> Result<TxnResponse> {
        if txn.compare.iter().any(|c| c.key.is_empty()) {
            return Err(Error::InvalidRequest("a compare needs a key".into()));
        }
        let req = json!({
            "compare": txn.compare.iter().map(wire::compare).collect::<Vec<_>>(),
            "success": txn.then.iter().map(wire::txn_op).collect::<Vec<_>>(),
            "failure": txn.otherwise.iter().map(wire::txn_op).collect::<Vec<_>>(),
        });
        let leased = txn
            .then
            .iter()
            .chain(&txn.otherwise)
            .find_map(|op| match op {
                TxnOp::Put { lease, .. } => *lease,
                _ => None,
            });
        let answer = self.call("/v3/kv/txn", req, Retry::Once);
        let (endpoint, body) = answer.map_err(|e| lease_error(e, leased))?;
        let t: WTxn = wire::parse(&endpoint, &body)?;
        let mut responses = Vec::with_capacity(t.responses.len());
        for r in t.responses {
            responses.push(
                match (r.response_put, r.response_delete_range, r.response_range) {
                    (Some(p), _, _) => OpResponse::Put {
                        revision: p.header.revision,
                    },
                    (_, Some(d), _) => OpResponse::Delete { deleted: d.deleted },
                    (_, _, Some(g)) => OpResponse::Get {
                        kvs: g.kvs.into_iter().map(KeyValue::from).collect(),
                    },
                    (None, None, None) => {
                        return Err(Error::protocol(&endpoint, "a txn answer of no known kind"));
                    }
                },
            );
        }
        Ok(TxnResponse {
            succeeded: t.succeeded,
            revision: t.header.revision,
            responses,
        })
    }

    /// Grants a lease of `ttl_seconds` (etcd may grant a longer one; see
    /// [`Lease::ttl`]).
    pub fn lease_grant(&mut self, ttl_seconds: i64) -> Result<Lease> {
        let req = json!({ "TTL": wire::int(ttl_seconds) });
        let (endpoint, body) = self.call("/v3/lease/grant", req, Retry::Once)?;
        let l: WLease = wire::parse(&endpoint, &body)?;
        if !l.error.is_empty() || l.id == 0 {
            return Err(Error::Etcd {
                code: 0,
                message: crate::error::server_text(&l.error),
            });
        }
        Ok(Lease {
            id: l.id,
            ttl: l.ttl,
        })
    }

    /// Refreshes `lease` once; returns its new time to live in seconds.
    /// [`Error::LeaseNotFound`] if it expired or was revoked. Call it well
    /// within the TTL (a third of it is usual).
    pub fn lease_keepalive_once(&mut self, lease: i64) -> Result<i64> {
        let req = json!({ "ID": wire::int(lease) });
        let body = to_body(&req)?;
        let path = "/v3/lease/keepalive";
        let answer = self.with_token(|http, token| {
            let (endpoint, body) = post(http, path, &body, token, Retry::Idempotent)?;
            // A streamed answer: one `{"result": …}` line for our one request.
            let line = body
                .split(|&b| b == b'\n')
                .find(|l| !l.is_empty())
                .unwrap_or_default();
            let msg: WStreamed<WLease> = wire::parse(&endpoint, line)?;
            match (msg.result, msg.error) {
                (_, Some(e)) => Err(Error::Etcd {
                    code: e.code,
                    message: crate::error::server_text(&e.message),
                }),
                (Some(l), None) => Ok(l.ttl),
                (None, None) => Err(Error::protocol(
                    &endpoint,
                    "keepalive answer without a result",
                )),
            }
        });
        match answer {
            // etcd answers a lease it does not know with no TTL.
            Ok(ttl) if ttl > 0 => Ok(ttl),
            Ok(_)
            | Err(Error::Etcd {
                code: GRPC_NOT_FOUND,
                ..
            }) => Err(Error::LeaseNotFound(lease)),
            Err(e) => Err(e),
        }
    }

    /// Revokes `lease`, deleting every key attached to it.
    pub fn lease_revoke(&mut self, lease: i64) -> Result<()> {
        let req = json!({ "ID": wire::int(lease) });
        match self.call("/v3/lease/revoke", req, Retry::Once) {
            Ok(_) => Ok(()),
            Err(Error::Etcd {
                code: GRPC_NOT_FOUND,
                ..
            }) => Err(Error::LeaseNotFound(lease)),
            Err(e) => Err(e),
        }
    }

    /// Watches `key` (or `[key, range_end)`) from `start_revision` (0: from
    /// the next change), on a connection of its own. See [`Watch`].
    pub fn watch(
        &mut self,
        key: &[u8],
        range_end: Option<&[u8]>,
        start_revision: i64,
    ) -> Result<Watch> {
        let mut create = wire::range(key, range_end);
        if start_revision > 0 {
            create["start_revision"] = wire::int(start_revision);
        }
        let req = json!({ "create_request": create });
        let body = to_body(&req)?;
        // etcd refuses a watch's token by cancelling it as it is created.
        self.with_token(|http, token| Watch::start(http.open_stream("/v3/watch", &body, token)?))
    }

    /// POSTs `req`; a 200's body, or the answer's error.
    fn call(&mut self, path: &str, req: Value, retry: Retry) -> Result<(String, Vec<u8>)> {
        let body = to_body(&req)?;
        self.with_token(|http, token| post(http, path, &body, token, retry))
    }

    /// Runs `op` with the current token (none without credentials); if
    /// etcd refuses the token, once more with a fresh one. A refusal that
    /// remains is [`Error::AuthRefused`].
    fn with_token<T>(
        &mut self,
        mut op: impl FnMut(&mut HttpClient, Option<&str>) -> Result<T>,
    ) -> Result<T> {
        let bearer = match &self.auth {
            Some(auth) => auth.bearer(&mut self.http, None)?,
            None => Bearer::none(),
        };
        let result = match (op(&mut self.http, bearer.header()), &self.auth) {
            (Err(e), Some(auth)) if auth::token_refused(&e) => {
                let fresh = auth.bearer(&mut self.http, Some(bearer.generation()))?;
                op(&mut self.http, fresh.header())
            }
            (r, _) => r,
        };
        let credentials = self.auth.is_some();
        result.map_err(|e| auth::refusal(e, self.http.current_endpoint(), credentials))
    }
}

/// `req` as a request body.
fn to_body(req: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(req).map_err(|e| Error::InvalidRequest(e.to_string()))
}

/// POSTs `body`; the endpoint and a 200's body, or the answer's error.
fn post(
    http: &mut HttpClient,
    path: &str,
    body: &[u8],
    token: Option<&str>,
    retry: Retry,
) -> Result<(String, Vec<u8>)> {
    let answer = http.post(path, body, token, retry)?;
    let endpoint = http.current_endpoint().to_owned();
    if answer.status != 200 {
        return Err(wire::error(&endpoint, answer.status, &answer.body));
    }
    Ok((endpoint, answer.body))
}

/// etcd's "lease not found" for a write naming `lease`, as
/// [`Error::LeaseNotFound`].
fn lease_error(e: Error, lease: Option<i64>) -> Error {
    match (e, lease) {
        (
            Error::Etcd {
                code: GRPC_NOT_FOUND,
                ..
            },
            Some(lease),
        ) => Error::LeaseNotFound(lease),
        (e, _) => e,
    }
}
