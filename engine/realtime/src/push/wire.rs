//! The push request on the wire (SPEC RT-12, RFC 8030 §5): where an
//! endpoint points ([`PushTarget`]), the HTTP/1.1 bytes of one request
//! ([`write_request`]), and which resolved addresses a sender may connect
//! to ([`is_public_address`]). Sans-IO: no resolver, socket or TLS here —
//! the sender resolves, checks each address with [`is_public_address`],
//! connects to exactly the address it checked, and writes these bytes.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use super::delivery::PushRequest;
use super::subscription::audience_of;

/// Where a subscription's endpoint points: `https://host[:port]/path`.
/// `Debug` shows neither host nor path (seed §12.3: endpoints are
/// delivery capability material).
#[derive(Clone, PartialEq, Eq)]
pub struct PushTarget {
    origin: String,
    host: String,
    port: u16,
    path: String,
}

impl PushTarget {
    /// The target of an endpoint a [`PushSubscription`](super::PushSubscription)
    /// accepted (`https://` origin, visible ASCII, no fragment); `None` for
    /// anything else.
    pub fn parse(endpoint: &str) -> Option<Self> {
        let origin = audience_of(endpoint)?;
        let authority = origin.strip_prefix("https://")?;
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, 443),
        };
        let rest = endpoint.get(origin.len()..).unwrap_or_default();
        let path = if rest.starts_with('/') {
            rest.to_owned()
        } else {
            format!("/{rest}")
        };
        Some(Self {
            origin: origin.to_owned(),
            host: host.to_owned(),
            port,
            path,
        })
    }

    /// `https://host[:port]`: the VAPID `aud` (RFC 8292 §2) and the key of
    /// a connection pool.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The host name (or IPv4 literal): what to resolve and the TLS server
    /// name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port (443 unless the endpoint names one).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request target: the endpoint's path and query.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The `Host` header value: the origin without its scheme.
    pub fn authority(&self) -> &str {
        self.origin.get("https://".len()..).unwrap_or_default()
    }
}

impl fmt::Debug for PushTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushTarget")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// SPEC RT-12: the whole HTTP/1.1 request for `request` to `target`, with
/// `authorization` (a [`VapidCache`](super::VapidCache) value) — request
/// line, `Host`, the delivery's headers, `Authorization`, `Content-Type:
/// application/octet-stream`, `Content-Length`, then the `aes128gcm` body.
/// Keep-alive is HTTP/1.1's default, so no `Connection` header is sent.
pub fn write_request(request: &PushRequest, target: &PushTarget, authorization: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 + authorization.len() + request.body.len());
    out.extend_from_slice(request.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.path().as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut header = |name: &str, value: &str| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    };
    header("Host", target.authority());
    for (name, value) in &request.headers {
        header(name, value);
    }
    header("Authorization", authorization);
    header("Content-Type", "application/octet-stream");
    header("Content-Length", &request.body.len().to_string());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&request.body);
    out
}

/// SPEC RT-12 SSRF guard: whether a sender may connect to `ip` for an
/// endpoint a browser (so, anyone) supplied. False for loopback, private
/// (RFC 1918, IPv6 unique local), link-local, shared (RFC 6598), unspecified,
/// broadcast, multicast, documentation, benchmarking and reserved ranges,
/// and for IPv4-mapped or -translated IPv6 forms of any of them. A
/// deployment whose push service is on a private network sets
/// `allow_private_endpoints` instead.
pub fn is_public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            let embedded_v4 =
                Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
            // 64:ff9b::/96 (NAT64) carries an IPv4 address: judge that.
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public_v4(embedded_v4);
            }
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x2001 && s[1] < 0x0200) // IETF protocol assignments, Teredo
                || s[0] == 0x2002 // 6to4: an IPv4 address behind it
                || (s[..6] == [0; 6])) // IPv4-compatible (deprecated)
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0 // "this network"
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn targets_split_origin_host_port_and_path() {
        let t = PushTarget::parse("https://push.example.net:8443/wpush/v2/abc?x=1").unwrap();
        assert_eq!(t.origin(), "https://push.example.net:8443");
        assert_eq!(t.host(), "push.example.net");
        assert_eq!(t.port(), 8443);
        assert_eq!(t.path(), "/wpush/v2/abc?x=1");
        assert_eq!(t.authority(), "push.example.net:8443");
        let t = PushTarget::parse("https://fcm.googleapis.com").unwrap();
        assert_eq!((t.port(), t.path()), (443, "/"));
        let t = PushTarget::parse("https://h.example?q").unwrap();
        assert_eq!(t.path(), "/?q");
        for bad in [
            "http://push.example.net/a",
            "https://user@push.example.net/a",
            "https://push.example.net/a#frag",
            "https://[::1]/a",
            "https://push.example.net:0/a",
        ] {
            assert_eq!(PushTarget::parse(bad), None, "{bad}");
        }
        assert!(!format!("{t:?}").contains("h.example"));
    }

    #[test]
    fn the_request_is_http11_with_every_rfc8030_header() {
        let t = PushTarget::parse("https://push.example.net/p/1").unwrap();
        let req = PushRequest {
            method: "POST",
            url: "https://push.example.net/p/1".into(),
            headers: vec![
                ("TTL", "60".into()),
                ("Content-Encoding", "aes128gcm".into()),
                ("Urgency", "normal".into()),
                ("Topic", "t1".into()),
            ],
            body: Bytes::from_static(b"\x01\x02"),
        };
        let bytes = write_request(&req, &t, "vapid t=a.b.c, k=K");
        assert_eq!(
            bytes,
            b"POST /p/1 HTTP/1.1\r\nHost: push.example.net\r\nTTL: 60\r\n\
              Content-Encoding: aes128gcm\r\nUrgency: normal\r\nTopic: t1\r\n\
              Authorization: vapid t=a.b.c, k=K\r\n\
              Content-Type: application/octet-stream\r\nContent-Length: 2\r\n\r\n\x01\x02"
                .to_vec()
        );
    }

    proptest::proptest! {
        /// Whatever endpoint a subscription accepts, the request the sender
        /// writes is one HTTP/1.1 request the workspace's own parser reads
        /// back: POST to the endpoint's path, `Host` its authority, every
        /// header, and exactly the body.
        #[test]
        fn every_accepted_endpoint_makes_a_request_that_parses_back(
            host in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z]{2,8}){0,3}",
            port in proptest::option::of(1u16..),
            path in "(/[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,12}){0,4}(\\?[A-Za-z0-9=&%-]{0,16})?",
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let authority = match port {
                Some(p) => format!("{host}:{p}"),
                None => host.clone(),
            };
            let endpoint = format!("https://{authority}{path}");
            let Some(t) = PushTarget::parse(&endpoint) else {
                return Ok(()); // refused endpoints are the subscription's tests
            };
            proptest::prop_assert_eq!(t.origin(), format!("https://{authority}"));
            let req = PushRequest {
                method: "POST",
                url: endpoint.clone(),
                headers: vec![("TTL", "60".into()), ("Content-Encoding", "aes128gcm".into())],
                body: Bytes::from(body.clone()),
            };
            let bytes = write_request(&req, &t, "vapid t=a.b.c, k=K");
            let limits = dtp_codec::http::HttpLimits::default();
            let (head, n) = dtp_codec::http::parse_request_head(&bytes, &limits)
                .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e:?}")))?
                .ok_or_else(|| proptest::test_runner::TestCaseError::fail("incomplete"))?;
            proptest::prop_assert_eq!(head.method().as_str(), "POST");
            proptest::prop_assert_eq!(head.target(), t.path());
            proptest::prop_assert!(head.target().starts_with('/'));
            proptest::prop_assert_eq!(head.header("host"), Some(authority.as_str()));
            proptest::prop_assert_eq!(head.header("content-encoding"), Some("aes128gcm"));
            proptest::prop_assert_eq!(head.content_length(), body.len() as u64);
            proptest::prop_assert_eq!(&bytes[n..], &body[..]);
        }
    }

    #[test]
    fn only_global_unicast_addresses_are_public() {
        let public = [
            "8.8.8.8",
            "142.250.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ];
        for ip in public {
            assert!(is_public_address(ip.parse().unwrap()), "{ip}");
        }
        let private = [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.7",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2001:db8::1",
            "::127.0.0.1",
        ];
        for ip in private {
            assert!(!is_public_address(ip.parse().unwrap()), "{ip}");
        }
    }
}
