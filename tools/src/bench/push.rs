//! The `push` workload of `dtp bench`: Web Push notifications (the same
//! WEB_PUSH_HINT_V1 hint, RFC 8291 encryption, a VAPID signature with the
//! same key) to [`SUBSCRIPTIONS`] subscriptions on a local push service
//! (`dtp_bench::push_service`: HTTPS on loopback, 201 to every POST), sent
//! by our sender (`dtp_gateway::push`, driven in this process) and by the
//! `web-push` crate peer (`dtp_bench::peer_webpush`), with the same number
//! of requests in flight: one per sender worker, [`WORKERS`] of them.
//!
//! The figures: notifications per second and the CPU time per notification
//! of the sending threads alone — our sender's workers (`dtp-push-N`), the
//! peer's tokio runtime threads — read per thread from schedstat, since
//! both run inside this process beside the push service. The connections
//! are opened and the VAPID tokens made before the window of ours (a
//! warm-up); the peer opens its [`WORKERS`] connections inside its window
//! (a handful of handshakes against thousands of notifications). The push
//! service's threads take the load generator's place in the report
//! (`client_cpu_s`, `saturated`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[cfg(feature = "webpush-peer")]
use dtp_bench::peer_webpush::{self, PeerRun};
use dtp_bench::procstat;
use dtp_bench::push_service::PushService;
use dtp_bench::report::{Cores, Figures};
use dtp_gateway::push::{PushJob, PushSender, PushSenderConfig};
#[cfg(feature = "webpush-peer")]
use dtp_realtime::push::base64url_encode;
use dtp_realtime::push::{
    Outcome, PushSubscription, ReceiverSecret, SubscriptionId, Urgency, VapidKey, WebPushHint,
};

/// The side name of the `web-push` crate peer.
pub(crate) const WEB_PUSH: &str = "web-push";

/// The sides of the workload: ours, and the peer when it is built (the
/// `webpush-peer` feature: the crate needs OpenSSL).
#[cfg(feature = "webpush-peer")]
pub(crate) const SIDES: &[&str] = &[dtp_bench::report::OURS, WEB_PUSH];
/// The sides of the workload: ours alone, the peer not being built.
#[cfg(not(feature = "webpush-peer"))]
pub(crate) const SIDES: &[&str] = &[dtp_bench::report::OURS];

/// Why the peer is missing, and how to add it (a note of the report).
#[cfg(not(feature = "webpush-peer"))]
pub(crate) const NO_PEER: &str = "push: the web-push crate peer is not in this build (its encryption needs OpenSSL's headers and links libssl); build dtp with `cargo build --release -p dtp-tools --features webpush-peer` to measure it";

/// The push service's threads (`push-service`, `push-service-c`): their
/// CPU is the report's load generator (client) figure.
const SERVICE_THREADS: &str = "push-service";

/// Subscriptions the notifications go to, round robin.
pub(crate) const SUBSCRIPTIONS: usize = 64;

/// Our sender's worker threads, and the peer's connections and threads.
pub(crate) const WORKERS: usize = 2;

/// Notifications sent per second of the bench's window: the count of a
/// run is this × `--duration` (a run ends when all are answered).
const PER_SECOND_OF_WINDOW: f64 = 2_000.0;

/// The VAPID private scalar both sides sign with.
const VAPID: [u8; 32] = [7; 32];

/// The VAPID contact.
const SUBJECT: &str = "mailto:bench@example.invalid";

/// The `TTL` both sides send (ours derives it from the hint's lifetime).
const TTL_SECS: u32 = 600;

/// Notifications in one run of `window`.
pub(crate) fn notifications(window: Duration) -> u64 {
    ((window.as_secs_f64() * PER_SECOND_OF_WINDOW) as u64).max(200)
}

/// The subscriptions on the service at `port`: endpoint and keys.
fn subscriptions(port: u16) -> Result<Vec<PushSubscription>, String> {
    (0..SUBSCRIPTIONS)
        .map(|i| {
            let mut private = [0x42u8; 32];
            if let Some(head) = private.get_mut(..8) {
                head.copy_from_slice(&(i as u64 + 1).to_be_bytes());
            }
            let secret = ReceiverSecret::new(&private, [i as u8 ^ 0x5a; 16])
                .map_err(|e| format!("subscription key: {e}"))?;
            PushSubscription::new(
                &format!("https://127.0.0.1:{port}/push/s{i}"),
                secret.keys().clone(),
            )
            .map_err(|e| format!("subscription: {e}"))
        })
        .collect()
}

/// The hint every notification carries.
fn hint() -> WebPushHint {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    WebPushHint {
        notification_type: "demo.alert".into(),
        notification_id: "n-bench".into(),
        association_epoch: "ae-1".into(),
        release_epoch: "r-1".into(),
        issued_at_ms: now,
        expires_at_ms: now + u64::from(TTL_SECS) * 1000,
        route_intent: "demo.open".into(),
    }
}

/// Measures one side (`ours` or [`WEB_PUSH`]) sending `n` notifications.
pub(crate) fn measure(side: &str, n: u64) -> Result<Figures, String> {
    let service = PushService::start()?;
    let subs = subscriptions(service.port())?;
    let pid = std::process::id();
    let mut edges = Vec::new();
    let edge = || edges.push(procstat::threads_by_prefix(pid, SERVICE_THREADS));
    let (sent, elapsed, cpu_ns) = if side == WEB_PUSH {
        #[cfg(feature = "webpush-peer")]
        {
            measure_peer(&service, &subs, n, edge)?
        }
        #[cfg(not(feature = "webpush-peer"))]
        return Err(NO_PEER.to_owned());
    } else {
        measure_ours(&service, &subs, n, edge)?
    };
    let service_cpu_ns = match &edges[..] {
        [a, b] => procstat::grown_ns(a, b),
        _ => 0,
    };
    if service.requests() < sent {
        return Err(format!(
            "{side}: the push service saw {} requests for {sent} notifications",
            service.requests()
        ));
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    let cores = Cores {
        machine: std::thread::available_parallelism().map_or(1, |n| n.get()),
        server: WORKERS,
        client: WORKERS,
    };
    Ok(Figures {
        ops_per_s: sent as f64 / secs,
        bytes_per_s: service.bytes() as f64 / secs,
        cpu_ns_per_op: cpu_ns as f64 / sent.max(1) as f64,
        server_cpu_s: cpu_ns as f64 / 1e9,
        ops: sent,
        ..Figures::default()
    }
    .with_client(service_cpu_ns, elapsed, cores))
}

/// Our sender: warm-up, then `n` jobs; (sent, elapsed, worker CPU ns).
fn measure_ours(
    service: &PushService,
    subs: &[PushSubscription],
    n: u64,
    mut edge: impl FnMut(),
) -> Result<(u64, Duration, u64), String> {
    let dir = std::env::temp_dir().join(format!("dtp-bench-push-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, service.ca_pem()).map_err(|e| format!("{}: {e}", ca.display()))?;
    let vapid = VapidKey::from_bytes(&VAPID).map_err(|e| format!("VAPID key: {e}"))?;
    let mut config = PushSenderConfig::new(vapid, SUBJECT);
    config.extra_roots = vec![ca];
    config.allow_private_endpoints = true;
    config.workers = WORKERS;
    let sender = PushSender::start(config, Arc::new(|| {}));
    let _ = std::fs::remove_dir_all(&dir);
    let mut sender = sender.map_err(|e| e.to_string())?;
    let hint = hint();
    let ids: Vec<SubscriptionId> = (0..subs.len())
        .map(|i| SubscriptionId::from_raw(i as u64 + 1))
        .collect();
    let mut send = |n: u64| -> Result<u64, String> {
        let mut next = 0u64;
        let mut done = 0u64;
        while done < n {
            while next < n {
                let k = (next % subs.len() as u64) as usize;
                let (Some(sub), Some(id)) = (subs.get(k), ids.get(k)) else {
                    return Err("no subscription".into());
                };
                let job = PushJob {
                    id: next,
                    subscription_id: *id,
                    subscription: sub.clone(),
                    hint: hint.clone(),
                    urgency: Urgency::Normal,
                    topic: None,
                };
                if sender.submit(job).is_err() {
                    break;
                }
                next += 1;
            }
            let Some(d) = sender.wait_finished(Duration::from_secs(30)) else {
                return Err(format!(
                    "ours: {} of {n} notifications unanswered after 30 s",
                    n - done
                ));
            };
            match d.result {
                Ok(Outcome::Delivered { .. }) => done += 1,
                other => return Err(format!("ours: notification {}: {other:?}", d.id)),
            }
        }
        Ok(done)
    };
    // Warm-up: connections open, VAPID tokens made.
    send(4 * WORKERS as u64)?;
    let pid = std::process::id();
    let cpu = || procstat::thread_prefix_cpu_ns(pid, "dtp-push-").ok_or("no sender thread CPU");
    let cpu0 = cpu()?;
    edge();
    let start = Instant::now();
    let sent = send(n)?;
    let elapsed = start.elapsed();
    let cpu1 = cpu()?;
    edge();
    Ok((sent, elapsed, cpu1.saturating_sub(cpu0)))
}

/// The `web-push` crate peer; (sent, elapsed, runtime threads' CPU ns).
#[cfg(feature = "webpush-peer")]
fn measure_peer(
    service: &PushService,
    subs: &[PushSubscription],
    n: u64,
    edge: impl FnMut(),
) -> Result<(u64, Duration, u64), String> {
    let payload = hint().encode().map_err(|e| format!("hint: {e}"))?;
    let run = |notifications: u64, edge: &mut dyn FnMut()| {
        peer_webpush::run(
            &PeerRun {
                port: service.port(),
                ca: service.ca_der(),
                vapid_private: base64url_encode(&VAPID),
                subject: SUBJECT.to_owned(),
                subscriptions: subs
                    .iter()
                    .map(|s| {
                        (
                            s.endpoint().to_owned(),
                            base64url_encode(s.keys().p256dh()),
                            base64url_encode(s.keys().auth()),
                        )
                    })
                    .collect(),
                payload: payload.clone(),
                ttl: TTL_SECS,
                notifications,
                concurrency: WORKERS,
            },
            edge,
        )
    };
    // Warm-up, as for ours (the peer's connections do not outlive a run).
    run(4 * WORKERS as u64, &mut || {})?;
    let mut edge = edge;
    let r = run(n, &mut edge)?;
    if r.sent != n {
        return Err(format!("{WEB_PUSH}: {} of {n} notifications sent", r.sent));
    }
    Ok((r.sent, r.elapsed, r.cpu_ns))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use super::*;

    /// Both sides send every notification to the local service and report
    /// a rate and a CPU figure.
    #[test]
    fn both_sides_send_every_notification() {
        for &side in SIDES {
            let f = measure(side, 40).unwrap();
            assert_eq!(f.ops, 40, "{side}");
            assert!(f.ops_per_s > 0.0, "{side}");
            assert!(f.bytes_per_s > 0.0, "{side}");
        }
    }
}
