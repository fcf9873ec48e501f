//! The browser client served by the realtime front end: `GET
//! /v1/client.js` (an ES module, no build step), the modules it imports
//! (`/v1/client/*.js`) and its types (`/v1/client.d.ts`). Public code: no
//! credentials are asked for, and it may be cached (five minutes, then
//! revalidated by its entity tag).
//!
//! The files live in the crate's `web/` folder, beside their Node tests
//! (`web/test/`), and are compiled in with `include_str!`: the binary
//! serves exactly the code those tests ran, and nothing is read from disk
//! at run time.

use dtp_codec::http::{EntityTag, RequestHead, ResponseHead};

use super::reply::with_headers;
use crate::app::GatewayUp;
use dtp_engine::Outbox;

/// One served file: its path, media type and text.
pub(super) struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";

/// An asset named by its path under `/v1/`, which is also its file under
/// `web/`.
macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            path: concat!("/v1/", $name),
            content_type: $content_type,
            body: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/", $name)),
        }
    };
}

/// Every file the client consists of.
const ASSETS: &[Asset] = &[
    asset!("client.js", JS),
    asset!("client.d.ts", "application/typescript; charset=utf-8"),
    asset!("client/json.js", JS),
    asset!("client/schema.js", JS),
    asset!("client/order.js", JS),
    asset!("client/backoff.js", JS),
    asset!("client/poll.js", JS),
    asset!("client/event-stream.js", JS),
    asset!("client/feed.js", JS),
    asset!("client/live.js", JS),
    asset!("client/snapshot.js", JS),
    asset!("client/lifecycle.js", JS),
    asset!("client/runtime.js", JS),
];

/// The asset at `path`, if it is one.
pub(super) fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// FNV-1a over the text: the entity tag changes whenever the file does.
fn tag(body: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in body.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}

/// Answers `GET` of `asset`: 200 with the file, or 304 when the request's
/// `If-None-Match` names its current tag.
pub(super) fn serve(
    out: &mut Outbox<'_, GatewayUp>,
    asset: &Asset,
    head: &RequestHead,
    keep_alive: bool,
) {
    let etag = tag(asset.body);
    let fresh = match (head.if_none_match(), EntityTag::parse(&etag)) {
        (Some(inm), Some(current)) => inm.matches(&current),
        _ => false,
    };
    let (status, body) = if fresh { (304, "") } else { (200, asset.body) };
    let mut headers = vec![
        ("Cache-Control", "public, max-age=300, must-revalidate"),
        ("ETag", etag.as_str()),
        ("X-Content-Type-Options", "nosniff"),
    ];
    if !fresh {
        headers.insert(0, ("Content-Type", asset.content_type));
    }
    if !keep_alive {
        headers.push(("Connection", "close"));
    }
    with_headers(ResponseHead::new(status), &headers)
        .content_length(body.len() as u64)
        .write(out.wire());
    out.wire().extend_from_slice(body.as_bytes());
    if !keep_alive {
        out.close();
    }
}

#[cfg(test)]
mod tests {
    use super::{ASSETS, find, tag};

    /// Every module a served file imports is served too, at the path a
    /// browser resolves the import to.
    #[test]
    fn every_import_resolves_to_a_served_file() {
        for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let dir = &a.path[..=a.path.rfind('/').unwrap_or(0)];
            for line in a.body.lines() {
                let code = line.trim_start();
                if code.starts_with("//") || code.starts_with('*') {
                    continue;
                }
                let Some(from) = line.split(" from \"").nth(1) else {
                    continue;
                };
                let Some(spec) = from.split('"').next() else {
                    continue;
                };
                let resolved = match spec.strip_prefix("./") {
                    Some(rest) => format!("{dir}{rest}"),
                    None => panic!("{}: a non-relative import {spec}", a.path),
                };
                assert!(
                    find(&resolved).is_some(),
                    "{} imports {resolved}, which is not served",
                    a.path
                );
            }
        }
    }

    #[test]
    fn tags_differ_between_files() {
        let mut tags: Vec<String> = ASSETS.iter().map(|a| tag(a.body)).collect();
        tags.sort();
        tags.dedup();
        assert_eq!(tags.len(), ASSETS.len());
    }
}
