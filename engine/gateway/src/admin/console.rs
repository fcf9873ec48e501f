//! `GET /console`: the operator console, a page of the admin port (SPEC
//! HO-3c, TS-10, TS-11). It shows live sessions, resources, handovers in
//! progress and the human-decision panel, and decides through the same
//! `POST /v1/decisions/{id}` as `dtp ctl decide`.
//!
//! Why the admin port and not the realtime port: the admin port already
//! carries `/v1/decisions`, sessions, resources and handovers behind its
//! token (or on loopback), while the realtime port faces the browsers of
//! end users, who must never reach an operator's controls. For the same
//! reason the page reads the admin `/v1` JSON (polled: decisions every
//! 500 ms, the lists every second) rather than the realtime client module:
//! same origin, same token, no cross-origin grant, and it works where the
//! realtime port is not reachable from the operator's browser.
//!
//! The three files are static and carry no data, so they are served
//! without the token; every `/v1` call the page makes needs it (the page
//! asks for it once and keeps it in the tab's session storage). The
//! answers forbid framing (an Allow button must not be clickjacked) and
//! load only the page's own script and style.

use super::http::Response;

/// The page, its script and its style, compiled in from `web/console/`.
const FILES: &[(&str, &str, &str)] = &[
    (
        "console",
        "text/html; charset=utf-8",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/web/console/index.html"
        )),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/web/console/console.js"
        )),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/web/console/console.css"
        )),
    ),
];

/// The console file named `name` (`console`, `console.js`,
/// `console.css`), if it is one.
pub(super) fn file(name: &str) -> Option<Response> {
    let (_, content_type, body) = FILES.iter().find(|(n, _, _)| *n == name)?;
    let response = Response::text(200, content_type, (*body).to_owned())
        .with_header(
            "content-security-policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        )
        .with_header("x-frame-options", "DENY")
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "no-referrer");
    Some(response)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_console_files_are_served_with_a_strict_policy() {
        for (name, kind) in [
            ("console", "text/html"),
            ("console.js", "text/javascript"),
            ("console.css", "text/css"),
        ] {
            let r = file(name).unwrap();
            assert_eq!(r.status, 200);
            assert!(r.content_type.starts_with(kind), "{name}");
            assert!(
                r.extra_headers
                    .iter()
                    .any(|(h, v)| *h == "content-security-policy"
                        && v.contains("frame-ancestors 'none'"))
            );
        }
        assert!(file("console.map").is_none());
        let page = String::from_utf8(file("console").unwrap().body).unwrap();
        assert!(page.contains("/console.js") && page.contains("Decisions"));
    }
}
