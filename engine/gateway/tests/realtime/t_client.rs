//! The browser client is served (`/v1/client.js`, the modules it imports,
//! `/v1/client.d.ts`): public code, no credentials, cacheable and
//! revalidated by its entity tag, byte for byte the files in `web/`.

use crate::client::request;
use crate::server::{BACKENDS, start_default};

fn on_disk(file: &str) -> Vec<u8> {
    std::fs::read(format!("{}/web/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn the_client_module_and_its_types_are_served_without_credentials() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        for (path, file, media) in [
            (
                "/v1/client.js",
                "client.js",
                "text/javascript; charset=utf-8",
            ),
            (
                "/v1/client.d.ts",
                "client.d.ts",
                "application/typescript; charset=utf-8",
            ),
            (
                "/v1/client/runtime.js",
                "client/runtime.js",
                "text/javascript; charset=utf-8",
            ),
        ] {
            let r = request(srv.addr, &format!("GET {path} HTTP/1.1"), b"");
            assert_eq!(r.status, 200, "{path}: {}", r.text());
            assert_eq!(r.header("content-type"), Some(media), "{path}");
            assert_eq!(
                r.header("cache-control"),
                Some("public, max-age=300, must-revalidate"),
                "{path}"
            );
            assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
            assert!(r.body == on_disk(file), "{path} is the file in web/");
            let etag = r.header("etag").unwrap().to_owned();
            // Revalidation: the same tag, no body.
            let again = request(
                srv.addr,
                &format!("GET {path} HTTP/1.1\r\nIf-None-Match: {etag}"),
                b"",
            );
            assert_eq!(again.status, 304, "{path}");
            assert!(again.body.is_empty());
            assert_eq!(again.header("etag"), Some(etag.as_str()));
        }
        let r = request(srv.addr, "POST /v1/client.js HTTP/1.1", b"");
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("GET"));
        let r = request(srv.addr, "GET /v1/client/nothing.js HTTP/1.1", b"");
        assert_eq!(r.status, 404);
    }
}
