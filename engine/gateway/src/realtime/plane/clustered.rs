//! The realtime plane with `[cluster] nats`: publications go to JetStream
//! and are fanned out only after its acknowledgement, other gateways'
//! events come in through the follower, and replay older than the ledger's
//! window is read from the log (SPEC RT-6).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use dtp_realtime::time::format_timestamp as format_rfc3339_ms;
use dtp_transports::ConnId;

use super::{ENVELOPE_HEAD, RealtimePlane, Stored, encode, rt_decision};
use crate::app::Decisions;
use crate::plane::Clock;
use crate::realtime::cluster::{Followed, Input, PubJob, ReadJob};
use crate::realtime::json::published_body;
use crate::realtime::msg::{PageSize, ReplayPage, RtDecision, RtRefusal, SubKey};
use crate::realtime::state::{Change, StreamState};

/// The shared ledgers' side of the plane (`[cluster]`, see `cluster.rs`).
impl<C: Clock> RealtimePlane<C> {
    pub(super) fn ledger_of(&mut self, n: u32) -> Option<&mut dtp_realtime::Ledger<Stored>> {
        let id = &self.streams.get(n as usize)?.id;
        self.registry.ledger_mut(id)
    }

    /// Hands an admitted publication to the publisher worker: it is
    /// committed (and answered, and fanned out) when JetStream has
    /// acknowledged it. Refused when the worker cannot take it.
    pub(super) fn submit(
        &mut self,
        to: Option<(usize, ConnId)>,
        (stream, event_type, payload): (&str, &str, Bytes),
        now: Instant,
    ) -> Result<(), RtRefusal> {
        let (n, _) = self.admit(stream, event_type, &payload)?;
        let unix_ms = self.clock.unix_ms(now).0;
        let Some(cluster) = &self.cluster else {
            return Err(RtRefusal::Unavailable);
        };
        let job = PubJob {
            stream: n,
            to,
            event: Followed {
                unix_ms,
                event_type: event_type.into(),
                payload,
            },
            queued: now,
        };
        if cluster.submit(job).is_err() {
            Self::bump(&self.metrics.cluster_unavailable);
            return Err(RtRefusal::Unavailable);
        }
        Ok(())
    }

    /// Asks the reader worker for the replay page after `after` that only
    /// the log holds (the page is answered when it comes back); false when
    /// the worker cannot take it (the subscriber is reset).
    pub(super) fn read_from_log(
        &mut self,
        to: (usize, ConnId, SubKey),
        (stream, epoch, after): (u32, &str, u64),
        page: PageSize,
        now: Instant,
    ) -> bool {
        let Some(l) = self.ledger_of(stream) else {
            return false;
        };
        let until = l
            .first_retained_sequence()
            .map_or(l.last_sequence(), |f| f - 1);
        let Some(c) = &self.cluster else {
            return false;
        };
        let job = ReadJob {
            to,
            stream,
            epoch: epoch.into(),
            after,
            until,
            page,
            queued: now,
        };
        c.read(job).is_ok()
    }

    /// A replay page read from the log, encoded as the live events are
    /// (the cursors of the current epoch; refused if it changed meanwhile).
    pub(super) fn log_page(
        &mut self,
        job: &ReadJob,
        events: Vec<(u64, Followed)>,
    ) -> Result<ReplayPage, RtRefusal> {
        let n = job.stream;
        let s = self
            .streams
            .get(n as usize)
            .ok_or(RtRefusal::UnknownStream)?;
        let l = self
            .registry
            .ledger(&s.id)
            .ok_or(RtRefusal::UnknownStream)?;
        if l.epoch().as_str() != &*job.epoch {
            return Err(RtRefusal::CursorExpired);
        }
        let mut page = Vec::with_capacity(events.len());
        for (sequence, f) in events {
            let at = dtp_realtime::Appended {
                sequence,
                cursor: l.cursor_for(sequence),
            };
            let occurred = format_rfc3339_ms(f.unix_ms).unwrap_or_default();
            let bound =
                ENVELOPE_HEAD + s.id.len() + s.scope.len() + f.event_type.len() + f.payload.len();
            let head = (&*job.epoch, l.recovery(), &*f.event_type, occurred.as_str());
            let event = encode(n, s, head, &mut self.event_id, &at, (&f.payload, bound));
            if event.sse.is_empty() {
                return Err(RtRefusal::CursorExpired);
            }
            page.push(event);
        }
        Ok(ReplayPage {
            events: page,
            more: true,
        })
    }

    /// Takes what the cluster's workers handed back: acknowledgements
    /// (answered once the ledger holds their sequence), events read from
    /// the log (appended in sequence order) and epoch changes.
    pub(super) fn cluster_inputs(&mut self, now: Instant, out: &mut Decisions) -> bool {
        let mut inputs = std::mem::take(&mut self.inputs);
        let more = self.cluster.as_ref().is_some_and(|c| c.take(&mut inputs));
        for input in inputs.drain(..) {
            match input {
                Input::Acked {
                    job,
                    result: Ok(seq),
                } => {
                    let n = job.stream;
                    // Appended now if it is the next one; else the follower
                    // brings it after the events before it (read from the
                    // log: this gateway has not seen them yet).
                    let last = self.ledger_of(n).map_or(0, |l| l.last_sequence());
                    if seq == last + 1 {
                        self.follow(n, seq, Some(job.event), now, out);
                    }
                    if let (Some((shard, conn)), Some(l)) = (job.to, self.ledger_of(n)) {
                        let epoch: Arc<str> = l.epoch().as_str().into();
                        if let Some(c) = &mut self.cluster {
                            c.pending.push((shard, conn, n, epoch, seq));
                        }
                    }
                }
                Input::Acked {
                    job,
                    result: Err(e),
                } => {
                    Self::bump(&self.metrics.cluster_unavailable);
                    tracing::warn!(error = %e, "a publication was refused: the cluster's log is unavailable");
                    if let Some((shard, conn)) = job.to {
                        out.push(self.refuse(shard, conn, 0, RtRefusal::Unavailable));
                    }
                }
                Input::Event { stream, seq, event } => {
                    let known = self.ledger_of(stream).map(|l| l.last_sequence());
                    if known.is_some_and(|last| seq > last) && event.is_some() {
                        Self::bump(&self.metrics.cluster_followed);
                    }
                    self.follow(stream, seq, event, now, out);
                }
                Input::Epoch {
                    stream,
                    epoch,
                    base,
                } => self.new_cluster_epoch(stream, epoch, base, out),
                Input::Read { job, result } => {
                    let page = match result {
                        Ok(events) => self.log_page(&job, events),
                        Err(_) => Err(RtRefusal::CursorExpired),
                    };
                    if page.is_err() {
                        Self::bump(&self.metrics.resets);
                    }
                    let (shard, conn, key) = job.to;
                    out.push((shard, rt_decision(RtDecision::Replay { conn, key, page })));
                }
            }
        }
        self.inputs = inputs;
        self.answer_pending(out);
        more
    }

    /// Appends the log's event `seq` of stream `n` if it is new here: a
    /// sequence already held is a duplicate (this gateway's own
    /// publication, read back), one past a hole first moves the ledger
    /// over the hole (older cursors are reset), and a message that is not
    /// a publication is a hole itself.
    pub(super) fn follow(
        &mut self,
        n: u32,
        seq: u64,
        event: Option<Followed>,
        now: Instant,
        out: &mut Decisions,
    ) {
        let Some(ledger) = self.ledger_of(n) else {
            return;
        };
        let last = ledger.last_sequence();
        if seq <= last {
            return;
        }
        if seq > last + 1 {
            ledger.skip_to(seq - 1);
            Self::bump(&self.metrics.cluster_gaps);
        }
        let Some(e) = event else {
            if let Some(l) = self.ledger_of(n) {
                l.skip_to(seq);
            }
            return;
        };
        // Committed by the log already: a state it does not fit is left
        // as it was, the event is delivered all the same.
        let change = self.streams[n as usize]
            .state
            .check(&e.payload)
            .unwrap_or(Change::Last);
        let done = self.commit(n, (&e.event_type, e.payload), change, (now, e.unix_ms), out);
        if let (Err(_), Some(l)) = (done, self.ledger_of(n)) {
            l.skip_to(seq);
        }
    }

    /// The log's stream was made again: its history is gone, so the ledger
    /// starts the new epoch after `base` and the stream's subscribers are
    /// ended (they resume, are reset, and take a snapshot).
    pub(super) fn new_cluster_epoch(&mut self, n: u32, epoch: u64, base: u64, out: &mut Decisions) {
        let Some(l) = self.ledger_of(n) else {
            return;
        };
        let _ = l.new_epoch(epoch);
        l.skip_to(base);
        let s = &mut self.streams[n as usize];
        s.state = StreamState::new(crate::plane::built_in_table(&s.id));
        for to in 0..self.shards {
            out.push((to, rt_decision(RtDecision::Kick(n))));
        }
    }

    /// Answers the publishers whose event the ledger now holds.
    pub(super) fn answer_pending(&mut self, out: &mut Decisions) {
        let Some(c) = &mut self.cluster else {
            return;
        };
        let mut pending = std::mem::take(&mut c.pending);
        pending.retain(|(shard, conn, n, epoch, seq)| {
            let s = &self.streams[*n as usize];
            let Some(l) = self.registry.ledger(&s.id) else {
                return false;
            };
            let same = l.epoch().as_str() == &**epoch;
            if same && l.last_sequence() < *seq {
                return true;
            }
            // Another epoch: committed in the old one, which has no
            // cursors any more.
            let cursor = if same { l.cursor_for(*seq) } else { None };
            let body = published_body(&s.id, epoch, *seq, cursor.as_deref());
            let d = RtDecision::Published { conn: *conn, body };
            out.push((*shard, rt_decision(d)));
            false
        });
        if let Some(c) = &mut self.cluster {
            c.pending = pending;
        }
    }
}
