//! Stream ledgers shared by several gateways through NATS JetStream (SPEC
//! RT-6: "the ordering meaning survives server scale-out"; DESIGN.md §3,
//! state behind seams).
//!
//! Each realtime stream is one JetStream stream (one subject), limited by
//! the stream's own retention. JetStream's sequence is the stream's
//! sequence; the epoch is derived from the JetStream stream's creation
//! time, which every node reads alike and which changes only when the
//! stream was deleted and made again (its history lost). Cursors are
//! tagged with a key every node derives from the cluster's shared secret,
//! so a cursor issued by one gateway resumes exactly on another.
//!
//! Nothing here blocks the control thread: a publication goes to the
//! publisher worker, which owns a [`JetStream`] and hands back the
//! acknowledgement (or the failure) as an input, waking the control
//! thread; only then is the event fanned out and the publisher answered
//! (RT-6: committed before anyone is told). The follower worker reads
//! every stream from its last seen sequence, in order, and hands each
//! event back the same way: events published by other gateways reach this
//! one's subscribers through the same encode-once broadcast, and an event
//! this gateway published is appended once (whichever of its
//! acknowledgement and its reading comes first; the later is a duplicate
//! by sequence and dropped). A sequence retention removed before it was
//! read is a gap: older cursors get RESET_REQUIRED, never a silent skip.
//!
//! At start (before the engine runs, so blocking is allowed there) the
//! streams are made or updated and their retained window is read into the
//! ledgers, so a resumer whose cursor another gateway issued is replayed
//! from memory from the first request on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_cluster::nats::{
    JetStream, Nats, NatsAuth, NatsConfig, Publish, Replayed, StoredMessage, StreamConfig,
};
use dtp_engine::ControlWaker;
use dtp_realtime::StreamSpec;
use dtp_transports::ConnId;

use super::msg::{PageSize, SubKey};

/// Publications queued for the publisher worker at most; past it a
/// publication is refused (unavailable), never queued without bound.
const MAX_QUEUED: usize = 1024;

/// Messages the follower reads from one stream before it looks at the
/// next (so one busy stream does not starve the others).
const FOLLOW_BATCH: usize = 256;

/// Inputs the workers hand the control thread, queued at most (and taken
/// at most per tick): every byte has an owner, none grows unbounded.
const MAX_INPUTS: usize = 4096;

/// Replay pages queued for the reader worker at most; past it a resumer
/// whose events only the log holds is reset.
const MAX_READS: usize = 256;

/// The follower's longest wait when no stream has anything new: the bound
/// of the delay before another gateway's event is seen here. The follower
/// watches the streams' subjects, so a publication ends the wait at once;
/// the bound is for a notice missed (and when the watch could not be set
/// up, the follower sleeps, backing off up to it).
const FOLLOW_IDLE_MAX: Duration = Duration::from_millis(20);

/// How often an idle follower checks that its streams are still the ones
/// it read (an epoch change: a stream deleted and made again).
const IDENTITY_PERIOD: Duration = Duration::from_secs(1);

/// The sleep after the follower lost the server.
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// How a gateway joins the cluster's ledgers.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// NATS servers (`nats://host:port`).
    pub servers: Vec<String>,
    /// This gateway's name: the prefix of its publications' dedupe ids.
    pub node_id: String,
    /// Time allowed for one connection and one request.
    pub timeout: Duration,
    /// The cursor key, the same on every gateway (derived from the
    /// cluster's shared secret by the caller).
    pub cursor_key: [u8; 32],
    /// Credentials, sent on every connection (each worker's own).
    pub auth: Option<NatsAuth>,
    /// TLS to the servers: the CA their certificates are checked against.
    pub tls: Option<dtp_cluster::ClusterTls>,
}

/// The JetStream stream name of realtime stream `id` (its bytes in hex: a
/// stream id may hold dots, which JetStream names may not).
pub fn jetstream_name(id: &str) -> String {
    format!("DTP_RT_{}", hex(id.as_bytes()))
}

/// The subject of realtime stream `id`'s publications.
pub fn subject(id: &str) -> String {
    format!("dtp.rt.{}", hex(id.as_bytes()))
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// The epoch every gateway derives for a JetStream stream: a digest of its
/// name and creation time (SPEC RT-6: it changes only when the history is
/// lost, i.e. the stream was made again).
pub fn derived_epoch(name: &str, created: &str) -> u64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"dtp-realtime/cluster-epoch/v1");
    for part in [name, created] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let d = ctx.finish();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d.as_ref()[..8]);
    u64::from_le_bytes(b)
}

/// The JetStream configuration of a realtime stream: its retention.
fn stream_config(spec: &StreamSpec) -> StreamConfig {
    let (name, subject) = (jetstream_name(&spec.id), subject(&spec.id));
    let mut c = StreamConfig::new(&name, &[&subject]);
    c.max_msgs = Some(spec.retention.max_events as u64);
    c.max_bytes = Some(spec.retention.max_bytes as u64);
    c.max_age = Some(spec.retention.max_age);
    c
}

/// A publication as stored: `<unix ms> <event type>\n<payload>`, so every
/// gateway writes the same `occurredAt` and event type.
fn frame(unix_ms: u64, event_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + event_type.len() + payload.len());
    b.extend_from_slice(unix_ms.to_string().as_bytes());
    b.push(b' ');
    b.extend_from_slice(event_type.as_bytes());
    b.push(b'\n');
    b.extend_from_slice(payload);
    b
}

/// A stored publication read back (`None`: not one of ours).
fn unframe(body: &[u8]) -> Option<Followed> {
    let nl = body.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&body[..nl]).ok()?;
    let (ms, event_type) = head.split_once(' ')?;
    Some(Followed {
        unix_ms: ms.parse().ok()?,
        event_type: event_type.into(),
        payload: Bytes::copy_from_slice(&body[nl + 1..]),
    })
}

/// An event read from a stream.
#[derive(Debug)]
pub(super) struct Followed {
    pub(super) unix_ms: u64,
    pub(super) event_type: Box<str>,
    pub(super) payload: Bytes,
}

/// A publication on its way to JetStream.
#[derive(Debug)]
pub(super) struct PubJob {
    /// The stream's index.
    pub(super) stream: u32,
    /// Who to answer (none for a built-in event of another plane).
    pub(super) to: Option<(usize, ConnId)>,
    pub(super) event: Followed,
    /// When it was handed over: a job that waited longer than the
    /// timeout behind a slow server is refused, not sent late.
    pub(super) queued: Instant,
}

/// A replay page to read from the log: events this gateway's window no
/// longer holds (its memory retention counts encoded bytes, the log's the
/// stored ones, so the log may keep more).
#[derive(Debug)]
pub(super) struct ReadJob {
    /// The shard, connection and subscription that asked.
    pub(super) to: (usize, ConnId, SubKey),
    /// The stream's index.
    pub(super) stream: u32,
    /// The epoch the replay is in.
    pub(super) epoch: Arc<str>,
    /// The last sequence the subscriber has.
    pub(super) after: u64,
    /// The last sequence to read (the one before the window's first).
    pub(super) until: u64,
    /// The page's ceilings.
    pub(super) page: PageSize,
    /// When it was handed over (see [`PubJob::queued`]).
    pub(super) queued: Instant,
}

/// Why a replay page could not be read from the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadFail {
    /// The log no longer holds an event the subscriber needs.
    Gone,
    /// The log could not be reached.
    Unavailable,
}

/// What the workers hand the control thread.
#[derive(Debug)]
pub(super) enum Input {
    /// A replay page read from the log, oldest first.
    Read {
        job: ReadJob,
        result: Result<Vec<(u64, Followed)>, ReadFail>,
    },
    /// JetStream stored the publication at this sequence, or could not be
    /// reached (the publication is refused: fail closed).
    Acked {
        job: PubJob,
        result: Result<u64, String>,
    },
    /// The event at `seq` of a stream (`None`: a message that is not a
    /// publication; its sequence is a gap).
    Event {
        stream: u32,
        seq: u64,
        event: Option<Followed>,
    },
    /// The stream was made again: a new epoch, starting after `base`.
    Epoch { stream: u32, epoch: u64, base: u64 },
}

/// A stream as found at start: its epoch and retained window.
pub(super) struct Start {
    pub(super) epoch: u64,
    /// The sequence before the first retained event.
    pub(super) base: u64,
    pub(super) window: Vec<(u64, Option<Followed>)>,
}

/// The control thread's end of the workers.
pub(super) struct ClusterLedgers {
    jobs: SyncSender<PubJob>,
    reads: SyncSender<ReadJob>,
    inputs: Receiver<Input>,
    waker: Arc<OnceLock<ControlWaker>>,
    stop: Arc<AtomicBool>,
    /// Publications acknowledged whose answer waits for the ledger to reach
    /// their sequence: (shard, conn, stream, epoch at ack, sequence).
    pub(super) pending: Vec<(usize, ConnId, u32, Arc<str>, u64)>,
}

/// Why the cluster could not be joined at start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(String);

fn nats_config(s: &ClusterSettings, what: &str) -> NatsConfig {
    NatsConfig {
        connect_timeout: s.timeout,
        request_timeout: s.timeout,
        name: format!("dtp-{}-{what}", s.node_id),
        auth: s.auth.clone(),
        tls: s.tls.clone(),
        ..NatsConfig::default()
    }
}

fn connect(s: &ClusterSettings, what: &str) -> dtp_cluster::Result<JetStream> {
    let servers: Vec<&str> = s.servers.iter().map(String::as_str).collect();
    Nats::connect(&servers, nats_config(s, what)).map(JetStream::new)
}

impl ClusterLedgers {
    /// Makes or updates every stream's JetStream stream, reads their
    /// retained windows and starts the workers. Blocks: call before the
    /// engine runs.
    pub(super) fn start(
        s: &ClusterSettings,
        specs: &[StreamSpec],
    ) -> Result<(Self, Vec<Start>), ClusterError> {
        let fail = |what: &str, e: dtp_cluster::Error| ClusterError(format!("{what}: {e}"));
        let mut js = connect(s, "setup").map_err(|e| fail("connect", e))?;
        let mut starts = Vec::new();
        let mut follow = Vec::new();
        for spec in specs {
            let config = stream_config(spec);
            let info = js
                .ensure_stream(&config)
                .map_err(|e| fail(&format!("stream {}", spec.id), e))?;
            if info.created.is_empty() {
                return Err(ClusterError(format!(
                    "stream {} has no creation time to derive its epoch from",
                    spec.id
                )));
            }
            let epoch = derived_epoch(&config.name, &info.created);
            let first = info.state.first_seq.max(1);
            let mut window = Vec::new();
            for r in js.replay(&config.name, first) {
                match r.map_err(|e| fail(&format!("reading stream {}", spec.id), e))? {
                    Replayed::Message(m) if m.seq > info.state.last_seq => break,
                    Replayed::Message(m) => window.push((m.seq, unframe(&m.payload))),
                    Replayed::Gap { to, .. } => window.push((to, None)),
                }
            }
            let next = window.last().map_or(first, |w| w.0 + 1);
            starts.push(Start {
                epoch,
                base: first - 1,
                window,
            });
            follow.push(Followee {
                config,
                created: info.created,
                next,
            });
        }
        let (jobs, job_rx) = mpsc::sync_channel(MAX_QUEUED);
        let (tx, inputs) = mpsc::sync_channel(MAX_INPUTS);
        let waker: Arc<OnceLock<ControlWaker>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let names = names_of(specs);
        let boot = format!(
            "{}-{:016x}",
            s.node_id,
            derived_epoch(&s.node_id, &now_text())
        );
        let timeout = s.timeout;
        let publisher = Worker {
            tx: tx.clone(),
            waker: waker.clone(),
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map(|_| ())
                .map_err(|e| ClusterError(format!("starting the {name} thread: {e}")))
        };
        spawn(
            "dtp-rt-publish",
            Box::new(move || publisher.publish(js, &job_rx, &names, (&boot, timeout))),
        )?;
        let (reads, read_rx) = mpsc::sync_channel(MAX_READS);
        let reader = Worker {
            tx: tx.clone(),
            waker: waker.clone(),
        };
        let read_js = connect(s, "read").map_err(|e| fail("connect", e))?;
        let read_names = names_of(specs);
        spawn(
            "dtp-rt-read",
            Box::new(move || reader.read(read_js, &read_rx, &read_names, timeout)),
        )?;
        let follower = Worker {
            tx,
            waker: waker.clone(),
        };
        let follow_js = connect(s, "follow").map_err(|e| fail("connect", e))?;
        let stop2 = stop.clone();
        spawn(
            "dtp-rt-follow",
            Box::new(move || follower.follow(follow_js, follow, &stop2)),
        )?;
        Ok((
            Self {
                jobs,
                reads,
                inputs,
                waker,
                stop,
                pending: Vec::new(),
            },
            starts,
        ))
    }

    /// Hands a publication to the publisher worker; gives it back when the
    /// worker's queue is full or it is gone.
    pub(super) fn submit(&self, job: PubJob) -> Result<(), PubJob> {
        self.jobs.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })
    }

    /// Hands a replay page to the reader worker; gives it back when the
    /// worker's queue is full.
    pub(super) fn read(&self, job: ReadJob) -> Result<(), ReadJob> {
        self.reads.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })
    }

    /// What the workers handed back since the last call, at most
    /// [`MAX_INPUTS`] (one tick's work stays bounded); true when there may
    /// be more.
    pub(super) fn take(&self, into: &mut Vec<Input>) -> bool {
        for _ in 0..MAX_INPUTS {
            match self.inputs.try_recv() {
                Ok(i) => into.push(i),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return false,
            }
        }
        true
    }

    /// Lets the workers wake the control thread.
    pub(super) fn attach(&self, waker: ControlWaker) {
        let _ = self.waker.set(waker);
    }
}

impl Drop for ClusterLedgers {
    fn drop(&mut self) {
        // The publisher ends when its queue's sender is dropped, the
        // follower at its next look at the flag.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Each stream's JetStream name and subject, in index order.
fn names_of(specs: &[StreamSpec]) -> Vec<(String, String)> {
    specs
        .iter()
        .map(|sp| (jetstream_name(&sp.id), subject(&sp.id)))
        .collect()
}

/// Something unique to this start of the process (with the node id: the
/// dedupe ids of two starts never meet).
fn now_text() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{}.{}",
        t.as_secs(),
        t.subsec_nanos(),
        std::process::id()
    )
}

/// A stream the follower reads.
struct Followee {
    config: StreamConfig,
    created: String,
    next: u64,
}

/// A worker's way back to the control thread.
struct Worker {
    tx: SyncSender<Input>,
    waker: Arc<OnceLock<ControlWaker>>,
}

impl Worker {
    /// Hands `i` over; with the queue full, wakes the control thread
    /// first (it may be parked, waiting for this worker's wake) and waits
    /// for room: the follower reads no faster than the control thread
    /// applies. False when the control thread is gone.
    fn send(&self, i: Input) -> bool {
        match self.tx.try_send(i) {
            Ok(()) => true,
            Err(TrySendError::Full(i)) => {
                self.wake();
                self.tx.send(i).is_ok()
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w.wake();
        }
    }

    /// The publisher: one acknowledged publish per job, in order.
    fn publish(
        self,
        mut js: JetStream,
        jobs: &Receiver<PubJob>,
        names: &[(String, String)],
        (boot, timeout): (&str, Duration),
    ) {
        let mut n = 0u64;
        while let Ok(job) = jobs.recv() {
            n += 1;
            if job.queued.elapsed() > timeout {
                let result = Err("waited longer than the timeout for the server".to_owned());
                if !self.send(Input::Acked { job, result }) {
                    return;
                }
                self.wake();
                continue;
            }
            let id = format!("{boot}-{n}");
            let Some((name, subject)) = names.get(job.stream as usize) else {
                continue;
            };
            let e = &job.event;
            let body = frame(e.unix_ms, &e.event_type, &e.payload);
            let opts = Publish {
                msg_id: Some(&id),
                expected_stream: Some(name),
                ..Publish::default()
            };
            let mut result = js.publish(subject, &body, &opts);
            // A lost connection is tried once more on a fresh one: the
            // dedupe id makes a second store of the same message impossible.
            if matches!(&result, Err(e) if !matches!(e, dtp_cluster::Error::JetStream { .. })) {
                result = js.publish(subject, &body, &opts);
            }
            let result = result.map(|ack| ack.seq).map_err(|e| e.to_string());
            if !self.send(Input::Acked { job, result }) {
                return;
            }
            self.wake();
        }
    }

    /// The reader: replay pages the window no longer holds.
    fn read(
        self,
        mut js: JetStream,
        jobs: &Receiver<ReadJob>,
        names: &[(String, String)],
        timeout: Duration,
    ) {
        while let Ok(job) = jobs.recv() {
            let result = match names.get(job.stream as usize) {
                _ if job.queued.elapsed() > timeout => Err(ReadFail::Unavailable),
                // Reads change nothing: one failed on a connection the
                // server dropped (a restart) is tried once more on a new one.
                Some((name, _)) => match read_page(&mut js, name, &job) {
                    Err(ReadFail::Unavailable) => read_page(&mut js, name, &job),
                    other => other,
                },
                None => Err(ReadFail::Gone),
            };
            if !self.send(Input::Read { job, result }) {
                return;
            }
            self.wake();
        }
    }

    /// The follower: every stream from its last seen sequence, in order.
    fn follow(self, mut js: JetStream, mut streams: Vec<Followee>, stop: &AtomicBool) {
        let subjects: Vec<&str> = streams
            .iter()
            .flat_map(|s| s.config.subjects.iter().map(String::as_str))
            .collect();
        let watching = match js.nats().watch(&subjects) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "realtime follower: cannot watch the subjects: polling");
                false
            }
        };
        let mut idle = Duration::from_millis(1);
        let mut checked = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let mut got = 0usize;
            let mut failed = false;
            for (i, s) in streams.iter_mut().enumerate() {
                let stream = u32::try_from(i).unwrap_or(u32::MAX);
                for _ in 0..FOLLOW_BATCH {
                    match js.get_next(&s.config.name, s.next) {
                        Ok(Some(m)) => {
                            got += 1;
                            s.next = m.seq + 1;
                            if !self.send(event(stream, &m)) {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::debug!(error = %e, "realtime follower: nats read failed");
                            failed = true;
                            break;
                        }
                    }
                }
            }
            if got > 0 {
                self.wake();
                idle = Duration::from_millis(1);
                continue;
            }
            // Also after a failed read: a deleted stream fails every read.
            if checked.elapsed() >= IDENTITY_PERIOD {
                checked = Instant::now();
                if !self.check_identity(&mut js, &mut streams) {
                    return;
                }
            }
            if failed {
                std::thread::sleep(RETRY_AFTER);
                continue;
            }
            if watching {
                // A publication on any stream's subject ends the wait; a
                // failure is seen by the next read.
                let _ = js.nats().wait_watched(FOLLOW_IDLE_MAX);
                continue;
            }
            std::thread::sleep(idle);
            idle = (idle * 2).min(FOLLOW_IDLE_MAX);
        }
    }

    /// Sees whether each stream is still the one read (the same creation
    /// time); a stream made again (or deleted: made again here) is a new
    /// epoch read from its start. False when the control thread is gone.
    fn check_identity(&self, js: &mut JetStream, streams: &mut [Followee]) -> bool {
        for (i, s) in streams.iter_mut().enumerate() {
            let info = match js.stream_info(&s.config.name) {
                Err(dtp_cluster::Error::JetStream { err_code, .. })
                    if err_code == dtp_cluster::JS_STREAM_NOT_FOUND =>
                {
                    js.ensure_stream(&s.config)
                }
                other => other,
            };
            let Ok(info) = info else { continue };
            if info.created == s.created || info.created.is_empty() {
                continue;
            }
            tracing::warn!(stream = %s.config.name, "a realtime stream was made again: new epoch");
            s.created = info.created;
            let first = info.state.first_seq.max(1);
            s.next = first;
            let epoch = derived_epoch(&s.config.name, &s.created);
            let stream = u32::try_from(i).unwrap_or(u32::MAX);
            let base = first - 1;
            if !self.send(Input::Epoch {
                stream,
                epoch,
                base,
            }) {
                return false;
            }
            self.wake();
        }
        true
    }
}

/// The events after `job.after` up to `job.until` that fit its page (at
/// least one): contiguous, or [`ReadFail::Gone`].
fn read_page(
    js: &mut JetStream,
    name: &str,
    job: &ReadJob,
) -> Result<Vec<(u64, Followed)>, ReadFail> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let most = usize::from(job.page.events.max(1));
    for r in js.replay(name, job.after + 1) {
        let m = match r {
            Ok(Replayed::Message(m)) => m,
            Ok(Replayed::Gap { .. }) => return Err(ReadFail::Gone),
            Err(_) => return Err(ReadFail::Unavailable),
        };
        if m.seq > job.until {
            break;
        }
        let f = unframe(&m.payload).ok_or(ReadFail::Gone)?;
        bytes += f.payload.len();
        out.push((m.seq, f));
        if out.len() >= most || bytes >= job.page.bytes as usize {
            break;
        }
    }
    // The window says these events exist: none read is a loss.
    if out.is_empty() {
        return Err(ReadFail::Gone);
    }
    Ok(out)
}

fn event(stream: u32, m: &StoredMessage) -> Input {
    Input::Event {
        stream,
        seq: m.seq,
        event: unframe(&m.payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_injective_and_valid() {
        assert_ne!(jetstream_name("a.b"), jetstream_name("a_b"));
        assert_eq!(jetstream_name("s"), "DTP_RT_73");
        assert_eq!(subject("s.1"), "dtp.rt.732e31");
    }

    #[test]
    fn frames_round_trip() {
        let f = unframe(&frame(17, "t.x", b"{\"a\":\"\\n\"}")).unwrap();
        assert_eq!((f.unix_ms, &*f.event_type), (17, "t.x"));
        assert_eq!(&f.payload[..], b"{\"a\":\"\\n\"}");
        assert!(unframe(b"no frame").is_none());
        assert!(unframe(b"x t\n{}").is_none());
    }

    #[test]
    fn epochs_follow_the_creation_time() {
        let a = derived_epoch("S", "2026-01-01T00:00:00.1Z");
        assert_eq!(a, derived_epoch("S", "2026-01-01T00:00:00.1Z"));
        assert_ne!(a, derived_epoch("S", "2026-01-01T00:00:00.2Z"));
        assert_ne!(a, derived_epoch("T", "2026-01-01T00:00:00.1Z"));
    }
}
