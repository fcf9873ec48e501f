//! The admin port: Prometheus `/metrics` over plain HTTP/1.1, on its own
//! thread so a slow scraper never touches a core shard.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use dtp_engine::{ControlMetrics, ShardMetrics, ShardSnapshot};

/// One exported series: name, type, help, and how to read it from a snapshot.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ShardSnapshot) -> u64,
);
use dtp_transports::BackendChoice;

/// The largest request head accepted.
const MAX_REQUEST: usize = 8 * 1024;

/// What `/metrics` reports.
pub(crate) struct Exporter {
    pub(crate) shards: Vec<Arc<ShardMetrics>>,
    pub(crate) control: Option<Arc<ControlMetrics>>,
    pub(crate) backend: BackendChoice,
}

impl Exporter {
    /// The Prometheus text exposition (version 0.0.4).
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let reason = self
            .backend
            .reason
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        out.push_str("# HELP dtp_backend_info The IO backend in use and why it was chosen.\n# TYPE dtp_backend_info gauge\n");
        out.push_str(&format!(
            "dtp_backend_info{{backend=\"{}\",reason=\"{reason}\"}} 1\n",
            self.backend.kind.name()
        ));
        let snaps: Vec<_> = self.shards.iter().map(|m| m.snapshot()).collect();
        let series: [Series; 12] = [
            ("dtp_connections", "gauge", "Connections open now.", |s| {
                s.connections
            }),
            (
                "dtp_connections_opened_total",
                "counter",
                "Connections opened.",
                |s| s.opened,
            ),
            (
                "dtp_connections_closed_total",
                "counter",
                "Connections closed.",
                |s| s.closed,
            ),
            ("dtp_frames_in_total", "counter", "Frames decoded.", |s| {
                s.frames_in
            }),
            ("dtp_bytes_in_total", "counter", "Bytes received.", |s| {
                s.bytes_in
            }),
            ("dtp_bytes_out_total", "counter", "Bytes sent.", |s| {
                s.bytes_out
            }),
            (
                "dtp_decode_errors_total",
                "counter",
                "Malformed frames (each closed its connection).",
                |s| s.decode_errors,
            ),
            (
                "dtp_backpressure_pauses_total",
                "counter",
                "Times reading paused for backpressure.",
                |s| s.paused,
            ),
            (
                "dtp_polls_total",
                "counter",
                "Driver polls (kernel enters).",
                |s| s.polls,
            ),
            (
                "dtp_pool_bytes_used",
                "gauge",
                "Pool bytes in use (whole chunks).",
                |s| s.pool_bytes_used,
            ),
            (
                "dtp_control_pending",
                "gauge",
                "Requests waiting for the control thread (ring and backlog).",
                |s| s.control_pending,
            ),
            (
                "dtp_pool_bytes_high_water",
                "gauge",
                "Most pool bytes in use at once.",
                |s| s.pool_bytes_high_water,
            ),
        ];
        for (name, kind, help, get) in series {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            for (i, s) in snaps.iter().enumerate() {
                out.push_str(&format!("{name}{{shard=\"{i}\"}} {}\n", get(s)));
            }
        }
        if let Some(c) = &self.control {
            let r = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            for (name, help, v) in [
                (
                    "dtp_control_requests_total",
                    "Requests the control thread took off its rings.",
                    r(&c.requests),
                ),
                (
                    "dtp_control_decisions_total",
                    "Decisions the control thread pushed.",
                    r(&c.decisions),
                ),
                (
                    "dtp_control_parks_total",
                    "Times the control thread went idle.",
                    r(&c.parks),
                ),
                (
                    "dtp_control_ring_full_total",
                    "Times a decision ring was full.",
                    r(&c.decision_ring_full),
                ),
            ] {
                out.push_str(&format!(
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n"
                ));
            }
        }
        out
    }
}

/// Serves `exporter` on `addr` from a background thread; returns the bound address.
pub(crate) fn spawn(addr: SocketAddr, exporter: Exporter) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let exporter = Arc::new(exporter);
    std::thread::Builder::new()
        .name("dtp-admin".to_owned())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = answer(stream, &exporter) {
                    tracing::debug!(error = %e, "admin request failed");
                }
            }
        })?;
    Ok(local)
}

fn answer(mut stream: TcpStream, exporter: &Exporter) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut tmp = [0u8; 1024];
    let (status, body) = loop {
        let n = stream.read(&mut tmp)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                break match (req.method, req.path) {
                    (Some("GET"), Some("/metrics")) => ("200 OK", exporter.render()),
                    (Some("GET"), _) => ("404 Not Found", "not found: try /metrics\n".to_owned()),
                    _ => ("405 Method Not Allowed", "only GET\n".to_owned()),
                };
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => {}
            Ok(httparse::Status::Partial) => {
                break ("431 Request Header Fields Too Large", String::new());
            }
            Err(_) => break ("400 Bad Request", "malformed request\n".to_owned()),
        }
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}
