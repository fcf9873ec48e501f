//! `dtp serve --print-config`: the effective configuration as TOML, every
//! section and key under a comment saying what it is.
//!
//! The comments come from [`DOCS`], a table kept by hand beside the
//! sections' types; a test serialises a configuration with every optional
//! part present and checks that the table covers every key it has, so a
//! key added without a line here fails the build's tests rather than
//! printing bare.

use toml::{Table, Value};

use super::Config;

/// Every section and key: its dotted path (a `*` segment stands for a
/// name the user chooses: a policy, a script, a metadata key) and what it
/// is. Sections of `[[arrays]]` are named without an index.
const DOCS: &[(&str, &str)] = &[
    ("engine", "The core shards and their listeners."),
    ("engine.shards", "Core shards; 0 = one per available core."),
    ("engine.pin", "Pin each shard to its core."),
    (
        "engine.listen",
        "Endpoints the gateway listens on, every shard on each: `HOST:PORT` (TCP, SO_REUSEPORT; a port another process holds is refused), `unix:PATH` (a Unix stream socket; a stale socket file is replaced, a live one refused; relative paths from the file's folder), `ws:HOST:PORT/PATH` (DTP frames as WebSocket binary messages, subprotocol `dtp.v1`, on a TCP port of its own), `rtsp:HOST:PORT` (RTSP-interleaved: `$` packets after OPTIONS, SETUP and RECORD), `quic:HOST:PORT` (one QUIC stream per connection; see `[quic]`), `ble:ADDR/psm/N?mtu=M` (a Bluetooth LE L2CAP channel on the adapter ADDR, 00:00:00:00:00:00 for any, and PSM N, SDUs of at most M bytes, default 247; refused at start-up on a host without Bluetooth) or `ble-sim:PATH?mtu=M` (the BLE link simulated on a Unix seqpacket socket, for tests; M below `io.chunk_size`, the same at both ends).",
    ),
    (
        "engine.drain_ms",
        "Milliseconds a stopping gateway waits for connections to close.",
    ),
    (
        "engine.control_ring",
        "Slots of each ring between a shard and the control thread.",
    ),
    ("io", "The IO backend and its buffers."),
    (
        "io.backend",
        "`auto`, `uring` or `epoll` (also DTP_IO_BACKEND).",
    ),
    (
        "io.ring_entries",
        "io_uring: submission queue entries per shard.",
    ),
    (
        "io.chunk_size",
        "Bytes of one pool chunk (receive and send buffers).",
    ),
    (
        "io.recv_buffers",
        "Receive buffers per shard (a power of two, at most 32768): its whole receive memory; an idle connection holds none.",
    ),
    (
        "io.send_chunks",
        "Send chunks shared by all connections of a shard.",
    ),
    (
        "io.max_send_queue",
        "Most bytes one connection may have queued for sending (backpressure beyond that).",
    ),
    (
        "io.max_connections",
        "Most connections (accepted and connected) per shard at once.",
    ),
    ("io.nodelay", "TCP_NODELAY on every connection."),
    (
        "io.tcp_congestion",
        "TCP congestion control of every connection (`system`: the kernel's default).",
    ),
    (
        "io.batch",
        "io_uring: while streaming, completions one wait holds out for (1: return at the first).",
    ),
    (
        "io.batch_wait_us",
        "io_uring: µs a wait may hold out for `batch` completions.",
    ),
    (
        "io.send_zc_threshold",
        "io_uring: SEND_ZC for sends of at least this many bytes (0: never).",
    ),
    (
        "io.fixed_files",
        "io_uring: accept connections as direct descriptors (no per-operation file lookup) where the kernel has them.",
    ),
    (
        "io.connect_timeout_ms",
        "Milliseconds an outgoing connect may take.",
    ),
    ("limits", "Frame ceilings."),
    (
        "limits.max_frame_len",
        "Largest frame body accepted, in bytes.",
    ),
    (
        "admin",
        "The admin port: /metrics, /healthz, /readyz and, with [terminal], the /v1 admin endpoints (dtp ctl).",
    ),
    (
        "admin.listen",
        "Where the admin port listens; \"\" (or dtp serve --no-admin): none. Keep it on loopback.",
    ),
    (
        "admin.token_file",
        "A file holding a bearer token (16–256 printable ASCII characters) that every /v1 request needs; required with [terminal] off loopback. Relative to this file's folder.",
    ),
    (
        "dtp",
        "The DTP protocol (SPEC §1): off, the plaintext benchmark protocol; on, CAP, encryption, agreements and resume.",
    ),
    ("dtp.enabled", "Run the DTP protocol on every connection."),
    (
        "dtp.terminal_key",
        "The terminal's Noise private key file (dtp cred noise-key); relative to this file's folder.",
    ),
    (
        "dtp.trust",
        "Issuer public key files whose credentials are trusted (dtp cred issuer-key writes FILE.pub).",
    ),
    (
        "dtp.revocations",
        "A revocation list file (dtp cred revoke); empty for none.",
    ),
    (
        "dtp.algorithms",
        "The session AEADs allowed: `aes-256-gcm`, `chacha20-poly1305`.",
    ),
    (
        "dtp.max_suspended",
        "Suspended sessions kept for a resume, across all shards (in memory, or in session_store).",
    ),
    (
        "dtp.session_store",
        "A directory where suspended sessions are kept, one file each, so that a Fay resumes after the gateway restarts (SPEC SES-2, SES-3); created if needed; empty: in memory only. Relative to this file's folder.",
    ),
    (
        "dtp.idle_timeout_ms",
        "Milliseconds a DTP connection with no agreement may go without traffic before it is closed (SESSION_TIMEOUT); above 60000, the longest heartbeat interval (SPEC LIV-2).",
    ),
    (
        "quic",
        "DTP over QUIC (SPEC TRN-1, TRN-4), for `quic:HOST:PORT` listeners: TLS 1.3 with ALPN dtp/1, one bidirectional stream per connection.",
    ),
    (
        "quic.cert",
        "The certificate chain presented (PEM); empty: a self-signed one made at start-up, whose SHA-256 dtp serve prints for clients to pin (dtp load --quic-pin). Relative to this file's folder.",
    ),
    (
        "quic.key",
        "The certificate's private key (PEM); with quic.cert only.",
    ),
    (
        "quic.idle_timeout_ms",
        "Milliseconds a QUIC connection may hear nothing before it is closed.",
    ),
    (
        "quic.keep_alive_ms",
        "Milliseconds between keep-alives of an idle QUIC connection; below quic.idle_timeout_ms.",
    ),
    (
        "realtime",
        "The realtime front end (SPEC §4): SSE, WebSocket realtime.v1, snapshots, publication.",
    ),
    ("realtime.enabled", "Serve the realtime endpoints."),
    ("realtime.listen", "Where the realtime front end listens."),
    (
        "realtime.cookie",
        "The session cookie a browser presents (its value is a client token).",
    ),
    (
        "realtime.origins",
        "Origins allowed to open a WebSocket, exactly (scheme://host:port). The page's own origin on a loopback listener (http://127.0.0.1:PORT, http://localhost:PORT) is allowed without listing; never one derived from the request's Host.",
    ),
    (
        "realtime.echo",
        "The plain WebSocket echo endpoint /v1/echo (for RFC 6455 conformance suites).",
    ),
    (
        "realtime.echo_max_message",
        "The echo endpoint's largest message (up to 16 MiB).",
    ),
    (
        "realtime.limits",
        "Ceilings (SPEC RT-13: they may be lowered, never raised).",
    ),
    (
        "realtime.limits.max_message",
        "Largest inbound WebSocket message and largest event, in bytes.",
    ),
    (
        "realtime.limits.max_outbound",
        "Outbound bytes queued per connection before it is a slow consumer (closed with QUEUE_OVERFLOW, RT-10).",
    ),
    (
        "realtime.limits.max_subscriptions",
        "Logical subscriptions per WebSocket connection.",
    ),
    (
        "realtime.limits.sse_heartbeat_ms",
        "SSE comment heartbeat period (ms).",
    ),
    (
        "realtime.limits.sse_retry_ms",
        "The least SSE `retry:` hint sent on connect (ms); each stream's hint is spread over [this, twice this), so that browsers reconnecting after a restart do not all come back at once.",
    ),
    (
        "realtime.limits.overload_retry_ms",
        "The least `retryAfterMs` hint of the CLOSE OVERLOADED that ends a WebSocket session past its outbound ceiling (ms, at most 30 000); each close's hint is spread over [this, twice this). Clients retry no sooner, within their budgets (RT-7).",
    ),
    (
        "realtime.limits.idle_timeout_ms",
        "How long an idle keep-alive HTTP connection is kept (ms).",
    ),
    (
        "realtime.limits.head_timeout_ms",
        "How long a request head may take from its first byte (ms); later bytes do not extend it (slowloris).",
    ),
    (
        "realtime.limits.poll_burst",
        "Snapshot polls per client per core per 5 s (RT-11); more get 429 with Retry-After.",
    ),
    (
        "realtime.clients",
        "A client credential (the demo token is refused off loopback).",
    ),
    (
        "realtime.clients.token",
        "The secret, as `Authorization: Bearer` or the cookie's value.",
    ),
    (
        "realtime.clients.streams",
        "Streams it may read (`*`: all).",
    ),
    ("realtime.clients.publish", "May publish to them."),
    ("realtime.clients.admin", "May cut their retention."),
    ("realtime.streams", "A stream."),
    ("realtime.streams.id", "Its id."),
    (
        "realtime.streams.recovery",
        "`CURSOR`, `SNAPSHOT_ONLY` or `SESSION_REBUILD`.",
    ),
    (
        "realtime.streams.event_types",
        "The event types it carries.",
    ),
    (
        "realtime.streams.scope",
        "The scope binding its envelopes carry (opaque).",
    ),
    (
        "realtime.streams.retain_events",
        "Replay retention: events.",
    ),
    ("realtime.streams.retain_bytes", "Replay retention: bytes."),
    ("realtime.streams.retain_secs", "Replay retention: seconds."),
    (
        "realtime.streams.push",
        "Send a Web Push hint for each publication to the registrations bound to this stream (a registration names it in `streams`; needs [realtime.push]). The hint names neither the stream nor the event.",
    ),
    (
        "realtime.streams.push.notification_type",
        "The hint's notificationType (one of realtime.push.notification_types).",
    ),
    (
        "realtime.streams.push.route_intent",
        "The hint's routeIntent (one of realtime.push.route_intents).",
    ),
    (
        "realtime.streams.push.ttl_seconds",
        "The hint's lifetime, seconds (1–86400).",
    ),
    (
        "realtime.streams.push.urgency",
        "very-low, low, normal or high.",
    ),
    (
        "realtime.streams.push.topic",
        "A Topic (1–32 base64url characters): the push service keeps only the latest undelivered hint of it, so a burst reaches an offline browser once.",
    ),
    (
        "realtime.push",
        "Web Push (SPEC RT-12): the sender that posts encrypted WEB_PUSH_HINT_V1 hints to browsers' push services, on its own worker threads. Off while vapid_key is empty.",
    ),
    (
        "realtime.push.vapid_key",
        "The VAPID private key file (`dtp cred vapid-key --out FILE`; PEM PKCS#8, PEM SEC1 or base64url); FILE.pub is the browsers' applicationServerKey. Empty: no Web Push.",
    ),
    (
        "realtime.push.subject",
        "The VAPID contact a push service may write to: `mailto:…` or `https://…`; required with vapid_key.",
    ),
    (
        "realtime.push.extra_roots",
        "PEM CA files trusted besides the system's roots (a private push service).",
    ),
    (
        "realtime.push.allow_private_endpoints",
        "Let endpoints resolve to loopback, private or link-local addresses. Off by default: endpoints come from browsers, so the sender refuses them rather than reach into the local network.",
    ),
    (
        "realtime.push.notification_types",
        "The notification types a hint may name (closed registry).",
    ),
    (
        "realtime.push.route_intents",
        "The route intents a hint may name (closed registry).",
    ),
    (
        "realtime.push.max_subscriptions_per_client",
        "Push registrations one client may hold (1–256).",
    ),
    (
        "realtime.push.max_in_flight",
        "Notifications queued, sending or waiting to retry, at most (1–65536); more are refused.",
    ),
    (
        "realtime.push.max_attempts",
        "Requests per notification at most, the first included (1–20); 429, 5xx and connection failures are retried after Retry-After or a full-jitter backoff, never past the hint's expiry.",
    ),
    ("realtime.push.workers", "Sender worker threads (1–64)."),
    (
        "realtime.push.max_connections_per_origin",
        "Idle keep-alive connections to one push service, per worker (1–64).",
    ),
    (
        "realtime.push.store",
        "The file registrations are kept in across restarts (JSON lines, mode 0600, written and fsynced by a worker before a registration is answered; endpoints and keys sealed under a key derived from the VAPID key, clients named by a keyed fingerprint). Empty: in memory only, lost at a restart.",
    ),
    (
        "cluster",
        "Several gateways sharing state (DESIGN.md §3). Absent: every piece of state stays in this process.",
    ),
    (
        "cluster.node_id",
        "This gateway's name in the cluster: 1-64 characters of [A-Za-z0-9_-], unique among the gateways.",
    ),
    (
        "cluster.etcd",
        "etcd endpoints, `http://HOST:PORT`, or all `https://HOST:PORT` for TLS (with `ca_file`) (ownership leases, SPEC HO-4, TS-8).",
    ),
    (
        "cluster.nats",
        "The NATS server, `nats://HOST:PORT` (`tls://HOST:PORT` for TLS, with `ca_file`): every realtime stream is a JetStream stream shared by the gateways (SPEC RT-6 scale-out); a publication is answered and fanned out only after JetStream stored it, and refused (503, PROVIDER_UNAVAILABLE) while the server cannot be reached. Needs `secret_file`. Empty: the ledgers stay in the process.",
    ),
    (
        "cluster.secret_file",
        "A file holding the cluster's shared secret (at least 16 bytes; the same file on every gateway): the realtime cursor key is derived from it, so a cursor one gateway issued resumes on another.",
    ),
    (
        "cluster.timeout_ms",
        "Time allowed for one connection or request to etcd or NATS (ms, 1-60000; at most a third of `lease_ttl_secs`).",
    ),
    (
        "cluster.lease_ttl_secs",
        "Lifetime of an ownership lease in etcd (s, 2-3600), renewed every third of it.",
    ),
    (
        "cluster.etcd_user",
        "The etcd user the gateway authenticates as (etcd's user/password auth); needs `etcd_password_file`. Its token goes with every request and is earned again when etcd forgets it. Empty: no authentication.",
    ),
    (
        "cluster.etcd_password_file",
        "A file whose first line is `etcd_user`'s password (never logged or printed).",
    ),
    (
        "cluster.nats_user",
        "The NATS user the gateway connects as (nats-server `--user`/`--pass` or an accounts block); needs `nats_password_file`. Empty: no user.",
    ),
    (
        "cluster.nats_password_file",
        "A file whose first line is `nats_user`'s password (never logged or printed).",
    ),
    (
        "cluster.nats_token_file",
        "A file whose first line is the NATS token (nats-server `--auth`); instead of `nats_user`, not with it.",
    ),
    (
        "cluster.ca_file",
        "The CA certificate(s), PEM, that `https://` etcd and `tls://` NATS servers' certificates are checked against (only these, not the system's); needed exactly when an endpoint is `https://` or `tls://`. No client certificates are sent.",
    ),
    (
        "terminal",
        "The terminal control plane (SPEC §2–3; needs [dtp] enabled): sessions, liveness, handover, audit.",
    ),
    (
        "terminal.model_workers",
        "Model calls in flight at most (1–64).",
    ),
    (
        "terminal.os_workers",
        "OS access operations (a command's grants and revokes) running at most, off the control thread (1–64).",
    ),
    (
        "terminal.human_queue",
        "Human decisions pending at most (1–4096).",
    ),
    (
        "terminal.state_changes",
        "Session state changes kept for observers (1–1048576).",
    ),
    (
        "terminal.admin_queue",
        "Admin commands queued for the control thread at most (1–4096).",
    ),
    ("terminal.control", "The terminal machine."),
    (
        "terminal.control.terminal_id",
        "The terminal's id; its human user is `human:<terminal_id>` (SPEC HO-9).",
    ),
    (
        "terminal.control.revoke_retry_ms",
        "SPEC TS-12: wait before retrying an OS revoke that failed while a session was terminating (ms).",
    ),
    (
        "terminal.control.tombstones",
        "SPEC LIV-5: ended sessions remembered, so requests for them get E_SESSION_TERMINATED.",
    ),
    (
        "terminal.control.liveness",
        "SPEC LIV-2, LIV-4: heartbeats.",
    ),
    (
        "terminal.control.liveness.heartbeat_interval_ms",
        "The interval runtimes beat at (1–60 s).",
    ),
    (
        "terminal.control.liveness.heartbeat_timeout_ms",
        "The threshold of the dual judgment (2×–6× the interval).",
    ),
    ("terminal.control.limits", "SPEC TS-17: session limits."),
    (
        "terminal.control.limits.per_terminal",
        "Live sessions on the terminal.",
    ),
    (
        "terminal.control.limits.per_fay",
        "Live sessions of one Fay.",
    ),
    (
        "terminal.control.limits.reads_per_resource",
        "Read sessions on one resource.",
    ),
    (
        "terminal.control.handover",
        "SPEC HO-6, HO-8: handover serialisation and retries.",
    ),
    (
        "terminal.control.handover.concurrent",
        "A handover request while another runs: `queue` or `reject`.",
    ),
    (
        "terminal.control.handover.queue_capacity",
        "Queue length per resource (1–8).",
    ),
    (
        "terminal.control.handover.max_retries",
        "Retries per (source session, target Fay) pair after the first attempt (0–3).",
    ),
    (
        "terminal.control.handover.min_retry_interval_ms",
        "Least time between two attempts of one pair (ms; 0 disables the check).",
    ),
    (
        "terminal.control.resources",
        "SPEC TS-8: a resource this terminal owns.",
    ),
    ("terminal.control.resources.resource_id", "The Resource_ID."),
    (
        "terminal.control.resources.metadata",
        "Metadata shown to handover policies (HO-3a).",
    ),
    (
        "terminal.control.resources.metadata.*",
        "One metadata entry.",
    ),
    (
        "terminal.control.resources.handover_policy",
        "The name of its handover policy; absent, no handover is possible.",
    ),
    (
        "terminal.control.resources.available",
        "Whether it is available at start (SPEC TS-10).",
    ),
    (
        "terminal.control.policies",
        "SPEC HO-3: handover policies by name, referenced by resources.",
    ),
    ("terminal.control.policies.*", "One named policy."),
    (
        "terminal.control.policies.*.hard_timeout_ms",
        "SPEC HO-7: the handover's hard timeout (ms); by kind: script 1000 (500–2000), model 1000 (500–3000), human 30000 (5000–120000).",
    ),
    (
        "terminal.control.policies.*.on_auth_request",
        "SPEC HO-1: whether another Fay's AuthRequest for the held resource starts a handover (else E_RESOURCE_BUSY).",
    ),
    (
        "terminal.control.policies.*.human_fallback",
        "SPEC HO-3b: the human-decision policy asked when this one answers `require_human` (an ai_model policy without one asks [terminal.policy.ai_fallback] human_decision).",
    ),
    (
        "terminal.control.policies.*.policy",
        "The policy, by `policy_type`: `priority_script`, `ai_model` or `human_decision`.",
    ),
    (
        "terminal.control.policies.*.policy.policy_type",
        "`priority_script` (HO-3a), `ai_model` (HO-3b) or `human_decision` (HO-3c).",
    ),
    (
        "terminal.control.policies.*.policy.script_id",
        "priority_script: the script, by its id in [terminal.policy.scripts].",
    ),
    (
        "terminal.control.policies.*.policy.parameters",
        "priority_script: passed to the script as the read-only map `params`.",
    ),
    (
        "terminal.control.policies.*.policy.parameters.*",
        "One parameter.",
    ),
    (
        "terminal.control.policies.*.policy.model_endpoint",
        "ai_model: the model's inference endpoint, `http://host[:port]/path`.",
    ),
    (
        "terminal.control.policies.*.policy.context_fields",
        "ai_model: the input fields sent to the model (empty: the default set).",
    ),
    (
        "terminal.control.policies.*.policy.decision_timeout_ms",
        "ai_model: the model call's own timeout (ms).",
    ),
    (
        "terminal.control.policies.*.policy.ui_channel",
        "human_decision: where the person is asked.",
    ),
    (
        "terminal.control.policies.*.policy.decision_timeout_seconds",
        "human_decision: how long the person has; then `default_action` applies.",
    ),
    (
        "terminal.control.policies.*.policy.default_action",
        "human_decision: what happens when nobody decides in time.",
    ),
    (
        "terminal.policy",
        "SPEC HO-3a, HO-3b: priority scripts and what an ai_model policy falls back to.",
    ),
    (
        "terminal.policy.scripts",
        "Rhai priority scripts by `script_id`.",
    ),
    ("terminal.policy.scripts.*", "One script's source."),
    (
        "terminal.policy.ai_fallback",
        "Required with an ai_model policy: the script run when the model is unavailable, the person asked on `require_human`.",
    ),
    (
        "terminal.policy.ai_fallback.priority_script",
        "The fallback priority script.",
    ),
    (
        "terminal.policy.ai_fallback.priority_script.script_id",
        "The script, by its id in [terminal.policy.scripts].",
    ),
    (
        "terminal.policy.ai_fallback.priority_script.parameters",
        "Passed to the script as the read-only map `params`.",
    ),
    (
        "terminal.policy.ai_fallback.priority_script.parameters.*",
        "One parameter.",
    ),
    (
        "terminal.policy.ai_fallback.human_decision",
        "The person asked when a model answers `require_human` and its policy has no `human_fallback` (listed as the policy `ai_fallback`, a name then taken).",
    ),
    (
        "terminal.policy.ai_fallback.human_decision.ui_channel",
        "Where the person is asked.",
    ),
    (
        "terminal.policy.ai_fallback.human_decision.decision_timeout_seconds",
        "How long the person has; then `default_action` applies.",
    ),
    (
        "terminal.policy.ai_fallback.human_decision.default_action",
        "What happens when nobody decides in time.",
    ),
    (
        "terminal.audit",
        "SPEC TS-12, HO-10: the audit log (JSON lines); absent, records are dropped.",
    ),
    (
        "terminal.audit.path",
        "The log file (created if missing); relative to this file's folder.",
    ),
    (
        "terminal.audit.fsync",
        "`every_record`, `interval` or `never` (only at stop).",
    ),
    (
        "terminal.audit.fsync_interval_ms",
        "Under `interval`: the longest a record stays unsynced (ms).",
    ),
    (
        "terminal.audit.rotation",
        "Size-based rotation; absent, the file grows.",
    ),
    (
        "terminal.audit.rotation.max_bytes",
        "The size a file may reach (bytes).",
    ),
    ("terminal.audit.rotation.keep", "Rotated files kept."),
    (
        "terminal.os_access",
        "SPEC TS-4: how a session's holder is let at its resource.",
    ),
    (
        "terminal.os_access.kind",
        "`noop` (the resource enforces access itself) or `command` (argv templates, no shell).",
    ),
    (
        "terminal.os_access.grant",
        "command: run to grant access; {resource_id} {access_mode} {session_id} {fay_id} substituted; a program named with a folder is relative to this file's folder.",
    ),
    ("terminal.os_access.revoke", "command: run to revoke it."),
    (
        "terminal.os_access.timeout_ms",
        "command: the longest a command may run before it is killed (ms); a killed command fails its step and marks the resource for reconciliation (SPEC TS-4).",
    ),
];

/// What `dtp serve --print-config` prints: `config` as TOML, every section
/// and key under its comment from [`DOCS`]. The text reads back as the
/// same configuration.
pub(crate) fn annotated(config: &Config) -> Result<String, String> {
    let value =
        Value::try_from(config).map_err(|e| format!("cannot print the configuration: {e}"))?;
    let Value::Table(root) = value else {
        return Err("cannot print the configuration: not a table".to_owned());
    };
    let mut out = String::from(
        "# dtp serve: the effective configuration (file and command line).\n# Every key is optional; relative file names are relative to the\n# configuration file's folder.\n",
    );
    let mut path = Vec::new();
    write_table(&mut out, &mut path, &root);
    if config.terminal.is_none() {
        // Present, the section turns the plane on, so its defaults are
        // only shown once it is there.
        out.push_str(
            "\n# [terminal] is absent: the minimal control plane runs. Add\n# [terminal.control] terminal_id = \"...\" (with [dtp] enabled) for the\n# terminal control plane; --print-config then shows its defaults.\n",
        );
    }
    Ok(out)
}

/// The doc of `path`, if [`DOCS`] has one (exact, or with `*` segments).
fn doc(path: &[String]) -> Option<&'static str> {
    DOCS.iter().find_map(|(key, doc)| {
        let segments: Vec<&str> = key.split('.').collect();
        let hit = segments.len() == path.len()
            && segments
                .iter()
                .zip(path)
                .all(|(s, p)| *s == "*" || *s == p.as_str());
        hit.then_some(*doc)
    })
}

/// Writes `table`'s plain keys, then its sub-tables and arrays of tables
/// (TOML wants them after the keys).
fn write_table(out: &mut String, path: &mut Vec<String>, table: &Table) {
    for (key, value) in table {
        if !is_table(value) && !is_table_array(value) {
            path.push(key.clone());
            comment(out, path);
            out.push_str(&format!("{} = {value}\n", bare(key)));
            path.pop();
        }
    }
    for (key, value) in table {
        path.push(key.clone());
        match value {
            Value::Table(t) => {
                out.push('\n');
                comment(out, path);
                out.push_str(&format!("[{}]\n", dotted(path)));
                write_table(out, path, t);
            }
            Value::Array(items) if is_table_array(value) => {
                for item in items {
                    if let Value::Table(t) = item {
                        out.push('\n');
                        comment(out, path);
                        out.push_str(&format!("[[{}]]\n", dotted(path)));
                        write_table(out, path, t);
                    }
                }
            }
            _ => {}
        }
        path.pop();
    }
}

fn comment(out: &mut String, path: &[String]) {
    if let Some(doc) = doc(path) {
        out.push_str(&format!("# {doc}\n"));
    }
}

fn is_table(v: &Value) -> bool {
    matches!(v, Value::Table(_))
}

fn is_table_array(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty() && a.iter().all(is_table))
}

/// A key as TOML writes it: bare when it can be, else quoted on one line
/// (a value's rendering may choose a multi-line string, which TOML does not
/// allow for a key).
fn bare(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        return key.to_owned();
    }
    let mut out = String::with_capacity(key.len() + 2);
    out.push('"');
    for c in key.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn dotted(path: &[String]) -> String {
    path.iter().map(|k| bare(k)).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// A configuration with every optional part present once.
    const FULL: &str = r#"
[admin]
listen = "127.0.0.1:9700"
token_file = "token"

[dtp]
enabled = true
terminal_key = "terminal.key"
trust = ["issuer.key.pub"]
revocations = "revoked.txt"

[cluster]
node_id = "gw-1"
etcd = ["http://127.0.0.1:2379"]
nats = "nats://127.0.0.1:4222"
secret_file = "cluster.secret"
etcd_user = "dtp"
etcd_password_file = "etcd.password"
nats_user = "dtp"
nats_password_file = "nats.password"

[terminal]
[terminal.control]
terminal_id = "t"
[[terminal.control.resources]]
resource_id = "arm"
metadata = { zone = "a" }
handover_policy = "script"
[terminal.control.policies.script]
policy = { policy_type = "priority_script", script_id = "s", parameters = { k = "v" } }
human_fallback = "human"
[terminal.control.policies.model]
policy = { policy_type = "ai_model", model_endpoint = "http://127.0.0.1:1/m" }
[terminal.control.policies.human]
policy = { policy_type = "human_decision", ui_channel = "external_panel" }
[terminal.policy.scripts]
s = "1"
[terminal.policy.ai_fallback]
priority_script = { script_id = "s", parameters = { k = "v" } }
human_decision = { ui_channel = "external_panel" }
[terminal.audit]
path = "audit.jsonl"
rotation = { max_bytes = 1000000, keep = 3 }
[terminal.os_access]
kind = "command"
grant = ["./grant", "{fay_id}"]
revoke = ["./revoke"]
"#;

    /// Every path of `table`, sections included.
    fn paths(table: &Table, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (key, value) in table {
            path.push(key.clone());
            out.push(path.clone());
            match value {
                Value::Table(t) => paths(t, path, out),
                Value::Array(items) => {
                    for item in items {
                        if let Value::Table(t) = item {
                            paths(t, path, out);
                        }
                    }
                }
                _ => {}
            }
            path.pop();
        }
    }

    #[test]
    fn every_key_has_its_doc_and_the_text_reads_back_the_same() {
        let config: Config = toml::from_str(FULL).unwrap();
        let Value::Table(root) = Value::try_from(&config).unwrap() else {
            panic!("not a table");
        };
        let mut all = Vec::new();
        paths(&root, &mut Vec::new(), &mut all);
        assert!(all.len() > 100, "{}", all.len());
        let missing: Vec<String> = all
            .iter()
            .filter(|p| doc(p).is_none())
            .map(|p| p.join("."))
            .collect();
        assert!(missing.is_empty(), "no doc for {missing:?}");
        let text = annotated(&config).unwrap();
        assert!(
            text.contains("# Core shards; 0 = one per available core.\nshards = 0\n"),
            "{text}"
        );
        let again: Config = toml::from_str(&text).unwrap();
        assert_eq!(
            toml::to_string(&again).unwrap(),
            toml::to_string(&config).unwrap()
        );
        // The defaults print too, with the note about [terminal].
        let text = annotated(&Config::default()).unwrap();
        assert!(text.contains("[[realtime.streams]]\n"), "{text}");
        assert!(text.contains("# [terminal] is absent"), "{text}");
        toml::from_str::<Config>(&text).unwrap();
    }

    #[test]
    fn keys_that_need_quotes_print_on_one_line_and_read_back() {
        let key = r#""a\nb\"c\\\u0001""#;
        let text = format!(
            "[terminal.control]\nterminal_id = \"t\"\n[terminal.policy.scripts]\n{key} = \"1\"\n"
        );
        let config: Config = toml::from_str(&text).unwrap();
        let printed = annotated(&config).unwrap();
        assert!(printed.contains(&format!("\n{key} = \"1\"\n")), "{printed}");
        let again: Config = toml::from_str(&printed).unwrap();
        assert_eq!(
            toml::to_string(&again).unwrap(),
            toml::to_string(&config).unwrap()
        );
    }
}
