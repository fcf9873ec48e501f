//! `/metrics`: the Prometheus text exposition of the shards, the control
//! thread and, when it runs, the terminal plane.

use std::sync::Arc;

use crate::plane::PlaneSnapshot;
use dtp_engine::{ControlMetrics, ShardMetrics, ShardSnapshot};
use dtp_transports::BackendChoice;

/// One exported series: name, type, help, and how to read it from a snapshot.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ShardSnapshot) -> u64,
);

/// What `/metrics` reports.
pub struct Exporter {
    /// Every shard's counters.
    pub shards: Vec<Arc<ShardMetrics>>,
    /// The control thread's counters, if it runs.
    pub control: Option<Arc<ControlMetrics>>,
    /// The IO backend, and why.
    pub backend: BackendChoice,
    /// The terminal plane's counters, when `[terminal]` runs.
    pub plane: Option<crate::PlaneHandle>,
    /// The realtime front ends' counters, when `[realtime]` runs.
    pub realtime: Option<Arc<crate::realtime::FrontMetrics>>,
    /// The Web Push counters, when `[realtime.push]` runs (SPEC RT-12).
    pub push: Option<Arc<crate::realtime::PushMetrics>>,
    /// The realtime ledgers' counters, when their log is shared by a
    /// cluster (`[cluster] nats`, SPEC RT-6).
    pub ledgers: Option<Arc<crate::realtime::RealtimeMetrics>>,
}

impl Exporter {
    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
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
        let series: [Series; 16] = [
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
                "dtp_send_reserve_refusals_total",
                "counter",
                "Sends refused because their connection held its share of the core's send chunks and only the reserve kept for other connections was left.",
                |s| s.send_reserve_refusals,
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
            (
                "dtp_pool_bytes_reserved",
                "gauge",
                "The core's pool backing: used and free chunks (reserved capacity, not RSS).",
                |s| s.pool_bytes_reserved,
            ),
            (
                "dtp_pool_metadata_bytes",
                "gauge",
                "The core's pool metadata: handle, lease, ticket and queue tables.",
                |s| s.pool_metadata_bytes,
            ),
            (
                "dtp_pool_live_bytes",
                "gauge",
                "Valid data in the core's pool buffers.",
                |s| s.pool_live_bytes,
            ),
        ];
        render_memory(&mut out);
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
        render_cap_refusals(&mut out);
        if let Some(rt) = &self.realtime {
            render_realtime(&mut out, rt);
        }
        if let Some(push) = &self.push {
            render_push(&mut out, push);
        }
        if let Some(m) = &self.ledgers {
            render_ledgers(&mut out, m);
        }
        if let Some(plane) = &self.plane {
            render_plane(&mut out, &plane.metrics());
        }
        out
    }
}

/// The terminal plane's counters as `dtp_terminal_<name>_total`, with the
/// help their fields document in the engine (a renamed counter is a
/// compile error here; a new one needs its line).
/// SPEC MEM-3: what lies outside the cores' pools. The heap (connection
/// state, resume caches, ledgers, terminal state, HTTP and WebSocket
/// assembly) is external to every pool's ceiling: counted when the binary
/// counts its allocations, else unmeasured; either way the ceiling claim
/// is void (`dtp_memory_ceiling_holds 0`). RSS is shown beside, never added.
fn render_memory(out: &mut String) {
    let mut gauge = |name: &str, help: &str, v: u64| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}\n"
        ));
    };
    if let Some((live, peak)) = dtp_pool::heap_bytes() {
        gauge(
            "dtp_heap_bytes",
            "Bytes live on the process heap: outside every pool's budget (external).",
            live,
        );
        gauge(
            "dtp_heap_bytes_peak",
            "Most bytes live on the heap at once.",
            peak,
        );
    }
    gauge(
        "dtp_memory_ceiling_holds",
        "1 if every byte held is inside the pools' ceilings; 0: the heap holds state outside them.",
        0,
    );
    if let Some(rss) = resident_bytes() {
        gauge(
            "dtp_process_resident_bytes",
            "The process's resident set (RSS), as the kernel counts it.",
            rss,
        );
    }
}

/// The process's RSS (`VmRSS` of `/proc/self/status`), if it can be read.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn render_plane(out: &mut String, m: &PlaneSnapshot) {
    let series: [(&str, &str, u64); 21] = [
        ("requests", "Requests taken from the shards.", m.requests),
        ("sent", "Messages sent to connections.", m.sent),
        ("closed", "Connections closed for misuse.", m.closed),
        (
            "refused",
            "Requests refused with a code no message carries.",
            m.refused,
        ),
        (
            "unroutable",
            "Decisions for connections already gone.",
            m.unroutable,
        ),
        (
            "policy_asked",
            "Handover policies asked (HO-3).",
            m.policy_asked,
        ),
        (
            "policy_answers_refused",
            "Policy answers the terminal refused (too late or unknown).",
            m.policy_answers_refused,
        ),
        ("model_calls", "Model calls started (HO-3b).", m.model_calls),
        (
            "model_busy",
            "Model calls not started: every worker busy.",
            m.model_busy,
        ),
        (
            "human_asked",
            "Human decisions queued (HO-3c).",
            m.human_asked,
        ),
        (
            "human_expired",
            "Human decisions that reached their deadline.",
            m.human_expired,
        ),
        ("audit_records", "Audit records written.", m.audit_records),
        (
            "events_dropped",
            "Built-in realtime events dropped (more than 65,536 between two drains).",
            m.events_dropped,
        ),
        (
            "audit_failures",
            "Audit records lost to a write failure or a full queue.",
            m.audit_failures,
        ),
        (
            "state_changes",
            "Session state changes published.",
            m.state_changes,
        ),
        (
            "state_changes_dropped",
            "State changes dropped from a full ring.",
            m.state_changes_dropped,
        ),
        ("admin_commands", "Admin commands run.", m.admin_commands),
        (
            "os_operations",
            "OS access operations handed to the workers (TS-4).",
            m.os_operations,
        ),
        (
            "os_busy",
            "OS access operations failed at once: every worker busy.",
            m.os_busy,
        ),
        (
            "audit_torn_repairs",
            "Torn last audit records repaired at open.",
            m.audit_torn_repairs,
        ),
        (
            "audit_torn_bytes",
            "Bytes those repairs moved out of the audit log.",
            m.audit_torn_bytes,
        ),
    ];
    for (name, help, v) in series {
        out.push_str(&format!(
            "# HELP dtp_terminal_{name}_total {help}\n# TYPE dtp_terminal_{name}_total counter\ndtp_terminal_{name}_total {v}\n"
        ));
    }
}

/// The realtime front ends' series (SPEC RT-15).
fn render_realtime(out: &mut String, m: &crate::realtime::FrontMetrics) {
    let r = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    for (name, kind, help, v) in [
        (
            "dtp_realtime_connections_opened_total",
            "counter",
            "Realtime connections opened.",
            r(&m.connections_opened),
        ),
        (
            "dtp_realtime_connections_closed_total",
            "counter",
            "Realtime connections closed.",
            r(&m.connections_closed),
        ),
        (
            "dtp_realtime_subscriptions",
            "gauge",
            "Live subscriptions (SSE streams and WebSocket subscriptions).",
            r(&m.subscriptions),
        ),
        (
            "dtp_realtime_delivered_total",
            "counter",
            "Events written to subscribers.",
            r(&m.delivered),
        ),
        (
            "dtp_realtime_queue_overflow_total",
            "counter",
            "Subscribers ended as slow consumers (QUEUE_OVERFLOW).",
            r(&m.queue_overflows),
        ),
        (
            "dtp_realtime_overload_hints_total",
            "counter",
            "WebSocket sessions of those closed CLOSE OVERLOADED with a retryAfterMs hint.",
            r(&m.overload_hints),
        ),
        (
            "dtp_realtime_resets_total",
            "counter",
            "Resumes answered RESET_REQUIRED.",
            r(&m.resets),
        ),
        (
            "dtp_realtime_poll_not_modified_total",
            "counter",
            "Snapshot polls answered 304.",
            r(&m.poll_not_modified),
        ),
        (
            "dtp_realtime_rate_limited_total",
            "counter",
            "Requests answered 429.",
            r(&m.rate_limited),
        ),
        (
            "dtp_realtime_refused_total",
            "counter",
            "Requests refused with another 4xx.",
            r(&m.refused),
        ),
        (
            "dtp_realtime_ws_protocol_errors_total",
            "counter",
            "WebSocket sessions closed for a protocol violation.",
            r(&m.ws_protocol_errors),
        ),
    ] {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        ));
    }
}

/// The shared ledgers' series (SPEC RT-6 scale-out).
fn render_ledgers(out: &mut String, m: &crate::realtime::RealtimeMetrics) {
    let r = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    for (name, help, v) in [
        (
            "unavailable",
            "Publications refused because the cluster's log (NATS JetStream) was unreachable.",
            r(&m.cluster_unavailable),
        ),
        (
            "followed",
            "Events another gateway published, read from the cluster's log.",
            r(&m.cluster_followed),
        ),
        (
            "gaps",
            "Ranges of the cluster's log removed by retention before this gateway read them.",
            r(&m.cluster_gaps),
        ),
    ] {
        out.push_str(&format!(
            "# HELP dtp_realtime_cluster_{name}_total {help}\n# TYPE dtp_realtime_cluster_{name}_total counter\ndtp_realtime_cluster_{name}_total {v}\n"
        ));
    }
}

/// The Web Push series (SPEC RT-12): notifications by closed outcome, in
/// flight, and the send latency as the control thread sees it (from the
/// hand-over to the sender to the outcome's arrival).
fn render_push(out: &mut String, m: &crate::realtime::PushMetrics) {
    use std::fmt::Write as _;
    let r = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    for (name, kind, help, v) in [
        (
            "dtp_push_registered_total",
            "counter",
            "Web Push registrations created.",
            r(&m.registered),
        ),
        (
            "dtp_push_revoked_total",
            "counter",
            "Web Push registrations revoked by their owner.",
            r(&m.revoked),
        ),
        (
            "dtp_push_registrations",
            "gauge",
            "Live Web Push registrations.",
            r(&m.registrations),
        ),
        (
            "dtp_push_refused_total",
            "counter",
            "Web Push requests refused (4xx, 503).",
            r(&m.refused),
        ),
        (
            "dtp_push_accepted_total",
            "counter",
            "Notifications accepted (202) and handed to the sender.",
            r(&m.accepted),
        ),
        (
            "dtp_push_retried_total",
            "counter",
            "Requests to push services sent again (429, 5xx, connection failures).",
            r(&m.retried),
        ),
        (
            "dtp_push_in_flight",
            "gauge",
            "Notifications in the sender, not finished.",
            r(&m.in_flight),
        ),
    ] {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        );
    }
    out.push_str("# HELP dtp_push_notifications_total Notifications finished, by closed outcome.\n# TYPE dtp_push_notifications_total counter\n");
    for (outcome, v) in [
        ("delivered", r(&m.delivered)),
        ("gone", r(&m.gone)),
        ("failed", r(&m.failed)),
        ("expired", r(&m.expired)),
    ] {
        let _ = writeln!(
            out,
            "dtp_push_notifications_total{{outcome=\"{outcome}\"}} {v}"
        );
    }
    out.push_str("# HELP dtp_push_send_seconds Notification send latency, hand-over to outcome.\n# TYPE dtp_push_send_seconds histogram\n");
    let mut cumulative = 0;
    for (i, bucket) in m.latency_buckets.iter().enumerate() {
        cumulative += r(bucket);
        match crate::realtime::LATENCY_BUCKETS_MS.get(i) {
            Some(ms) => {
                let le = *ms as f64 / 1000.0;
                let _ = writeln!(
                    out,
                    "dtp_push_send_seconds_bucket{{le=\"{le}\"}} {cumulative}"
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "dtp_push_send_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
                );
            }
        }
    }
    let sum = r(&m.latency_us_sum) as f64 / 1e6;
    let _ = writeln!(out, "dtp_push_send_seconds_sum {sum}");
    let _ = writeln!(out, "dtp_push_send_seconds_count {cumulative}");
}

/// Refused CAP handshakes by code (`crate::dtp::cap_refusals`).
fn render_cap_refusals(out: &mut String) {
    out.push_str("# HELP dtp_cap_refused_total CAP handshakes this terminal refused, by code.\n# TYPE dtp_cap_refused_total counter\n");
    for (code, n) in crate::dtp::cap_refusals().snapshot() {
        out.push_str(&format!(
            "dtp_cap_refused_total{{code=\"{}\"}} {n}\n",
            code.0
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::render_push;
    use crate::realtime::PushMetrics;

    /// SPEC RT-12: outcomes by label, in flight, and a cumulative latency
    /// histogram whose count is every finished notification.
    #[test]
    fn push_series_are_outcomes_in_flight_and_a_cumulative_histogram() {
        let m = PushMetrics::default();
        m.delivered.store(3, Ordering::Relaxed);
        m.gone.store(1, Ordering::Relaxed);
        m.in_flight.store(2, Ordering::Relaxed);
        m.latency_buckets[0].store(1, Ordering::Relaxed);
        m.latency_buckets[4].store(2, Ordering::Relaxed);
        m.latency_buckets[10].store(1, Ordering::Relaxed);
        m.latency_us_sum.store(1_500_000, Ordering::Relaxed);
        let mut out = String::new();
        render_push(&mut out, &m);
        for line in [
            "dtp_push_notifications_total{outcome=\"delivered\"} 3",
            "dtp_push_notifications_total{outcome=\"gone\"} 1",
            "dtp_push_notifications_total{outcome=\"expired\"} 0",
            "dtp_push_in_flight 2",
            "dtp_push_send_seconds_bucket{le=\"0.01\"} 1",
            "dtp_push_send_seconds_bucket{le=\"0.1\"} 1",
            "dtp_push_send_seconds_bucket{le=\"0.25\"} 3",
            "dtp_push_send_seconds_bucket{le=\"10\"} 3",
            "dtp_push_send_seconds_bucket{le=\"+Inf\"} 4",
            "dtp_push_send_seconds_sum 1.5",
            "dtp_push_send_seconds_count 4",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line} missing from:\n{out}"
            );
        }
    }
}
