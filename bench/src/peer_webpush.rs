//! The peer of the `push` workload of `dtp bench`: the Rust `web-push`
//! crate as its users call it — per notification a VAPID signature
//! (`VapidSignatureBuilder`, one ES256 JWT each), the message
//! (`WebPushMessageBuilder`, RFC 8291 `aes128gcm` through `ece`) and its
//! request (`request_builder::build_request`).
//!
//! The crate's own clients (isahc over curl, hyper 0.14 over native-tls)
//! offer no way to trust the bench's private CA, so the requests it builds
//! are sent by hyper 1 (`client::conn::http1`, keep-alive) over
//! tokio-rustls trusting that CA: `concurrency` connections, one request in
//! flight on each, on a tokio runtime with as many worker threads, named
//! [`PEER_THREAD`] so that their CPU time can be read alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};
use web_push::{
    ContentEncoding, PartialVapidSignatureBuilder, SubscriptionInfo, Urgency,
    VapidSignatureBuilder, WebPushMessageBuilder,
};

/// The name of the peer's runtime threads.
pub const PEER_THREAD: &str = "push-peer";

/// One run of the peer.
pub struct PeerRun {
    /// The local push service's port on 127.0.0.1.
    pub port: u16,
    /// The CA that signed its certificate.
    pub ca: CertificateDer<'static>,
    /// The VAPID private key: the 32-byte scalar, base64url.
    pub vapid_private: String,
    /// The VAPID `sub` contact.
    pub subject: String,
    /// The subscriptions: endpoint, `p256dh` and `auth` in base64url.
    pub subscriptions: Vec<(String, String, String)>,
    /// The plaintext of every notification.
    pub payload: Vec<u8>,
    /// The `TTL` header.
    pub ttl: u32,
    /// Notifications to send (round robin over the subscriptions).
    pub notifications: u64,
    /// Connections, each with one request in flight, and runtime threads.
    pub concurrency: usize,
}

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct PeerResult {
    /// Notifications the service answered 201 to.
    pub sent: u64,
    /// From the first request to the last answer.
    pub elapsed: Duration,
    /// CPU time of the peer's runtime threads over that span, ns.
    pub cpu_ns: u64,
}

/// Runs the peer to the end; `edge` is called just after the CPU is read
/// at the start and at the end of the window (to read other threads').
pub fn run(r: &PeerRun, mut edge: impl FnMut()) -> Result<PeerResult, String> {
    let concurrency = r.concurrency.max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(concurrency)
        .thread_name(PEER_THREAD)
        .enable_all()
        .build()
        .map_err(|e| format!("web-push peer runtime: {e}"))?;
    let mut roots = RootCertStore::empty();
    roots
        .add(r.ca.clone())
        .map_err(|e| format!("web-push peer CA: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("web-push peer TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let vapid = VapidSignatureBuilder::from_base64_no_sub(&r.vapid_private)
        .map_err(|e| format!("web-push VAPID key: {e}"))?;
    let subs: Arc<Vec<SubscriptionInfo>> = Arc::new(
        r.subscriptions
            .iter()
            .map(|(e, p, a)| SubscriptionInfo::new(e.as_str(), p.as_str(), a.as_str()))
            .collect(),
    );
    let next = Arc::new(AtomicU64::new(0));
    let pid = std::process::id();
    let cpu0 = crate::procstat::thread_cpu_ns(pid, PEER_THREAD).unwrap_or(0);
    edge();
    let start = Instant::now();
    let results: Vec<Result<(u64, Sender), String>> = rt.block_on(async {
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let c = Conn {
                    tls: tls.clone(),
                    port: r.port,
                    vapid: vapid.clone(),
                    subject: r.subject.clone(),
                    subs: subs.clone(),
                    payload: r.payload.clone(),
                    ttl: r.ttl,
                    next: next.clone(),
                    total: r.notifications,
                };
                tokio::spawn(c.run())
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
        }
        out
    });
    let elapsed = start.elapsed();
    let cpu1 = crate::procstat::thread_cpu_ns(pid, PEER_THREAD).unwrap_or(0);
    edge();
    let mut sent = 0;
    for r in results {
        // The connections close here, after `edge` has read the service's
        // threads serving them.
        sent += r?.0;
    }
    drop(rt);
    Ok(PeerResult {
        sent,
        elapsed,
        cpu_ns: cpu1.saturating_sub(cpu0),
    })
}

/// A connection's request handle: the connection lives as long as it.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// One connection's loop.
struct Conn {
    tls: tokio_rustls::TlsConnector,
    port: u16,
    vapid: PartialVapidSignatureBuilder,
    subject: String,
    subs: Arc<Vec<SubscriptionInfo>>,
    payload: Vec<u8>,
    ttl: u32,
    next: Arc<AtomicU64>,
    total: u64,
}

impl Conn {
    /// Takes notifications off the shared counter until none is left;
    /// returns how many were answered 201, and the connection.
    async fn run(self) -> Result<(u64, Sender), String> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let stream = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP/1.1: {e}"))?;
        tokio::spawn(conn);
        let mut sent = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.total {
                return Ok((sent, send));
            }
            let len = self.subs.len().max(1) as u64;
            let Some(info) = self.subs.get((i % len) as usize) else {
                return Err("no subscription".into());
            };
            let request = self.request(info)?;
            send.ready().await.map_err(|e| format!("HTTP/1.1: {e}"))?;
            let answer = send
                .send_request(request)
                .await
                .map_err(|e| format!("request: {e}"))?;
            if answer.status() != hyper::StatusCode::CREATED {
                return Err(format!("the push service answered {}", answer.status()));
            }
            sent += 1;
        }
    }

    /// web-push's message and request for `info`, as a hyper 1 request.
    fn request(&self, info: &SubscriptionInfo) -> Result<hyper::Request<Full<Bytes>>, String> {
        let e = |e: web_push::WebPushError| format!("web-push: {e}");
        let mut sig = self.vapid.clone().add_sub_info(info);
        sig.add_claim("sub", self.subject.as_str());
        let mut message = WebPushMessageBuilder::new(info);
        message.set_payload(ContentEncoding::Aes128Gcm, &self.payload);
        message.set_ttl(self.ttl);
        message.set_urgency(Urgency::Normal);
        message.set_vapid_signature(sig.build().map_err(e)?);
        let built =
            web_push::request_builder::build_request::<Vec<u8>>(message.build().map_err(e)?);
        // web-push speaks `http` 0.2, hyper 1 `http` 1: the same request
        // carried across, with the `Host` a client adds.
        let (parts, body) = built.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let host = parts.uri.authority().map_or("", |a| a.as_str()).to_owned();
        let mut out = hyper::Request::builder()
            .method(hyper::Method::POST)
            .uri(path)
            .header(hyper::header::HOST, host);
        for (name, value) in &parts.headers {
            out = out.header(name.as_str(), value.as_bytes());
        }
        out.body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("request: {e}"))
    }
}
