//! SPEC HO-1 across gateways: the terminal's questions to the gateway that
//! holds a resource, and their answers, carried through etcd (DESIGN §3:
//! no transport of our own between gateways).
//!
//! Each node has a mailbox, the keys under `P/mail/<node>/`. A message is
//! one key, `P/mail/<node>/<id>-<kind>`, written by the sender on its lease
//! (a sender that dies takes its unread messages with it) and deleted by
//! the recipient, which takes it only if its delete removed the key — so
//! a message seen both by the watch and by the catch-up read after a
//! reconnect is taken once.
//!
//! Two threads, neither ever the control thread:
//! - the **sender** takes [`Outgoing`] messages from a bounded queue; for
//!   a question it first reads the resource's occupants to find the node
//!   holding it (none, or this node: the question is answered
//!   [`RemoteAnswer::Released`] here at once, so the AuthRequest simply
//!   runs once more);
//! - the **reader** watches this node's mailbox, and after any break reads
//!   it whole, handing each message to the plane over a bounded queue and
//!   waking the control thread.
//!
//! A message that cannot be sent is answered here with a refusal, so every
//! question gets exactly one answer (or its waiting AuthRequest times out:
//! the terminal bounds each wait).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dtp_cluster::etcd::{Etcd, EventKind, KeyValue, prefix_end};
use dtp_cluster::{Error, Occupancy};
use dtp_codec::{AccessMode, ErrorCode};
use dtp_realtime::push::{base64url_decode, base64url_encode};
use dtp_terminal::{RemoteAnswer, RemoteHandover};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cluster_access::{ClusterNode, Shared};

/// Messages waiting for the sender, or for the plane, at most.
pub const MAIL_QUEUE: usize = 1_024;
/// Pause before the reader watches again after a break.
const REWATCH_AFTER: Duration = Duration::from_millis(200);

/// A message for another gateway.
#[derive(Debug)]
enum Outgoing {
    Ask(RemoteHandover),
    Answer {
        to: String,
        id: Uuid,
        answer: RemoteAnswer,
    },
}

/// A message for this gateway's terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// Another gateway's target asks for a resource held here
    /// ([`dtp_terminal::Terminal::remote_handover`]); answer to `from`.
    Ask {
        /// The asking node.
        from: String,
        /// The question.
        ask: RemoteHandover,
    },
    /// The answer to one of this gateway's questions
    /// ([`dtp_terminal::Terminal::remote_answered`]).
    Answer {
        /// The question's id.
        id: Uuid,
        /// The answer.
        answer: RemoteAnswer,
    },
}

/// One message as stored in etcd.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Wire {
    Ask {
        from: String,
        id: Uuid,
        resource_id: String,
        /// The codec's value (1 read … 4 configure).
        access_mode: u8,
        target_fay_id: String,
        /// base64url.
        target_credential: String,
    },
    Answer {
        id: Uuid,
        released: bool,
        #[serde(default)]
        code: u16,
        #[serde(default)]
        message: String,
    },
}

impl Wire {
    fn incoming(self) -> Option<Incoming> {
        match self {
            Wire::Ask {
                from,
                id,
                resource_id,
                access_mode,
                target_fay_id,
                target_credential,
            } => Some(Incoming::Ask {
                from,
                ask: RemoteHandover {
                    id,
                    resource_id,
                    access_mode: AccessMode::from_u8(access_mode)?,
                    target_fay_id,
                    target_credential: base64url_decode(&target_credential)?.into(),
                },
            }),
            Wire::Answer {
                id, released: true, ..
            } => Some(Incoming::Answer {
                id,
                answer: RemoteAnswer::Released,
            }),
            Wire::Answer {
                id, code, message, ..
            } => Some(Incoming::Answer {
                id,
                answer: RemoteAnswer::Refused {
                    code: ErrorCode(code),
                    message,
                },
            }),
        }
    }
}

/// What the threads and the plane share.
struct Mailbox {
    node: Arc<Shared>,
    stop: AtomicBool,
    wake: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl Mailbox {
    fn prefix_of(&self, node: &str) -> String {
        format!("{}/mail/{node}/", self.node.settings.prefix)
    }

    fn wake(&self) {
        let wake = self
            .wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(wake) = wake {
            wake();
        }
    }

    fn deliver(&self, to_plane: &SyncSender<Incoming>, message: Incoming) {
        if hand_over(to_plane, message, &self.stop) {
            self.wake();
        }
    }
}

/// How often a thread waiting for room in the plane's queue looks again.
const FULL_POLL: Duration = Duration::from_millis(1);

/// Hands `message` to the plane; whether it did. While the plane is
/// [`MAIL_QUEUE`] messages behind it waits — backpressure on this thread,
/// never on the control thread — but not past `stop`: a gateway shutting
/// down with its plane behind joins this thread instead of hanging on it.
fn hand_over<T>(to_plane: &SyncSender<T>, mut message: T, stop: &AtomicBool) -> bool {
    loop {
        match to_plane.try_send(message) {
            Ok(()) => return true,
            Err(TrySendError::Full(m)) if !stop.load(Ordering::Acquire) => {
                message = m;
                std::thread::sleep(FULL_POLL);
            }
            Err(_) => return false,
        }
    }
}

/// This gateway's mailbox: questions and answers to and from the other
/// gateways (see the module doc). Dropping it stops its threads.
pub struct ClusterMail {
    mailbox: Arc<Mailbox>,
    outgoing: Option<SyncSender<Outgoing>>,
    incoming: Receiver<Incoming>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ClusterMail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMail").finish_non_exhaustive()
    }
}

impl ClusterNode {
    /// Opens this node's mailbox and starts its threads.
    pub fn mail(&self) -> Result<ClusterMail, String> {
        let mailbox = Arc::new(Mailbox {
            node: self.shared.clone(),
            stop: AtomicBool::new(false),
            wake: Mutex::new(None),
        });
        let (out_tx, out_rx) = mpsc::sync_channel(MAIL_QUEUE);
        let (in_tx, in_rx) = mpsc::sync_channel(MAIL_QUEUE);
        let mut threads = Vec::new();
        let (m, to_plane) = (mailbox.clone(), in_tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name("dtp-mail-send".into())
                .spawn(move || send(&m, &out_rx, &to_plane))
                .map_err(|e| format!("cluster mail: {e}"))?,
        );
        let m = mailbox.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dtp-mail-read".into())
                .spawn(move || read(&m, &in_tx))
                .map_err(|e| format!("cluster mail: {e}"))?,
        );
        Ok(ClusterMail {
            mailbox,
            outgoing: Some(out_tx),
            incoming: in_rx,
            threads,
        })
    }
}

impl ClusterMail {
    /// Wakes the control thread when a message arrives.
    pub fn attach_wake(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        *self
            .mailbox
            .wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(wake);
    }

    /// Sends a question to the gateway holding its resource; false when
    /// the queue is full (nothing was sent).
    pub fn ask(&self, ask: RemoteHandover) -> bool {
        self.queue(Outgoing::Ask(ask))
    }

    /// Sends an answer to gateway `to`; false when the queue is full.
    pub fn answer(&self, to: String, id: Uuid, answer: RemoteAnswer) -> bool {
        self.queue(Outgoing::Answer { to, id, answer })
    }

    fn queue(&self, message: Outgoing) -> bool {
        match self.outgoing.as_ref().map(|tx| tx.try_send(message)) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => false,
        }
    }

    /// The messages arrived since the last look.
    pub fn received(&self) -> Vec<Incoming> {
        self.incoming.try_iter().collect()
    }
}

impl Drop for ClusterMail {
    fn drop(&mut self) {
        self.mailbox.stop.store(true, Ordering::Release);
        // Closing the queue ends the sender; the reader sees `stop` within
        // one read timeout.
        self.outgoing = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The sender thread.
fn send(mailbox: &Mailbox, outgoing: &Receiver<Outgoing>, to_plane: &SyncSender<Incoming>) {
    let node = &mailbox.node;
    let me = node.settings.node_id.clone();
    let mut etcd: Option<Etcd> = None;
    while let Ok(message) = outgoing.recv() {
        let lease = Some(node.lease.load(Ordering::Acquire)).filter(|&l| l != 0);
        let client = match etcd.take().map_or_else(|| node.client(), Ok) {
            Ok(c) => etcd.insert(c),
            Err(e) => {
                refuse_here(mailbox, to_plane, &message, &e);
                continue;
            }
        };
        let sent = match &message {
            Outgoing::Ask(ask) => {
                holder_of(client, &node.settings.prefix, ask, &me).and_then(|holder| match holder {
                    Some(holder) => {
                        let wire = Wire::Ask {
                            from: me.clone(),
                            id: ask.id,
                            resource_id: ask.resource_id.clone(),
                            access_mode: ask.access_mode as u8,
                            target_fay_id: ask.target_fay_id.clone(),
                            target_credential: base64url_encode(&ask.target_credential),
                        };
                        put(
                            client,
                            &mailbox.prefix_of(&holder),
                            ask.id,
                            "ask",
                            &wire,
                            lease,
                        )
                    }
                    None => {
                        // Nobody else holds it (released meanwhile): the
                        // AuthRequest runs once more.
                        let answer = RemoteAnswer::Released;
                        mailbox.deliver(to_plane, Incoming::Answer { id: ask.id, answer });
                        Ok(())
                    }
                })
            }
            Outgoing::Answer { to, id, answer } => {
                let wire = match answer {
                    RemoteAnswer::Released => Wire::Answer {
                        id: *id,
                        released: true,
                        code: 0,
                        message: String::new(),
                    },
                    RemoteAnswer::Refused { code, message } => Wire::Answer {
                        id: *id,
                        released: false,
                        code: code.0,
                        message: message.clone(),
                    },
                };
                put(client, &mailbox.prefix_of(to), *id, "answer", &wire, lease)
            }
        };
        if let Err(e) = sent {
            etcd = None;
            refuse_here(mailbox, to_plane, &message, &e);
        }
    }
}

/// The node holding `ask`'s resource exclusively, if another one does.
fn holder_of(
    etcd: &mut Etcd,
    prefix: &str,
    ask: &RemoteHandover,
    me: &str,
) -> Result<Option<String>, Error> {
    let (_, occupants) = Occupancy::new(etcd, prefix).occupants(&ask.resource_id)?;
    Ok(occupants
        .into_iter()
        .map(|(_, o)| o)
        .find(|o| o.exclusive && o.reserved_until.is_none() && o.node != me)
        .map(|o| o.node))
}

fn put(
    etcd: &mut Etcd,
    mailbox: &str,
    id: Uuid,
    kind: &str,
    wire: &Wire,
    lease: Option<i64>,
) -> Result<(), Error> {
    let value = serde_json::to_vec(wire).map_err(|e| Error::InvalidRequest(e.to_string()))?;
    let key = format!("{mailbox}{id}-{kind}");
    etcd.put(key.as_bytes(), &value, lease).map(|_| ())
}

/// A message that could not be sent: a question is answered here with a
/// refusal (its AuthRequest gets it); a lost answer leaves the asker to
/// its timeout.
fn refuse_here(mailbox: &Mailbox, to_plane: &SyncSender<Incoming>, message: &Outgoing, e: &Error) {
    tracing::warn!(error = %e, "cluster mail not sent");
    if let Outgoing::Ask(ask) = message {
        let answer = RemoteAnswer::Refused {
            code: ErrorCode::E_RESOURCE_BUSY,
            message: format!(
                "the resource is held on another gateway, which could not be asked: {e}"
            ),
        };
        mailbox.deliver(to_plane, Incoming::Answer { id: ask.id, answer });
    }
}

/// The reader thread.
fn read(mailbox: &Mailbox, to_plane: &SyncSender<Incoming>) {
    let prefix = mailbox.prefix_of(&mailbox.node.settings.node_id);
    let end = prefix_end(prefix.as_bytes());
    while !mailbox.stop.load(Ordering::Acquire) {
        let Ok(mut etcd) = mailbox.node.client() else {
            std::thread::sleep(REWATCH_AFTER);
            continue;
        };
        // Watch first, then read what was there before: a message in both
        // is taken once (the delete decides).
        let watch = etcd.watch(prefix.as_bytes(), Some(&end), 0);
        if let Ok(range) = etcd.range(prefix.as_bytes(), Some(&end)) {
            for kv in range.kvs {
                take(mailbox, &mut etcd, to_plane, &kv);
            }
        }
        let Ok(watch) = watch else {
            std::thread::sleep(REWATCH_AFTER);
            continue;
        };
        for event in watch {
            if mailbox.stop.load(Ordering::Acquire) {
                return;
            }
            match event {
                Ok(e) if e.kind == EventKind::Put => take(mailbox, &mut etcd, to_plane, &e.kv),
                Ok(_) | Err(Error::Timeout { .. }) => {}
                Err(_) => break,
            }
        }
        std::thread::sleep(REWATCH_AFTER);
    }
}

/// Takes one message: hands it to the plane if this delete removed it.
fn take(mailbox: &Mailbox, etcd: &mut Etcd, to_plane: &SyncSender<Incoming>, kv: &KeyValue) {
    match etcd.delete(&kv.key) {
        Ok((1, _)) => {}
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cluster mail not taken");
            return;
        }
    }
    let message = serde_json::from_slice::<Wire>(&kv.value)
        .ok()
        .and_then(Wire::incoming);
    match message {
        Some(m) => mailbox.deliver(to_plane, m),
        None => tracing::warn!("cluster mail that is not a message, dropped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full queue holds the thread until the plane takes a message, or
    /// until the mailbox stops: a shutdown never waits on a plane behind.
    #[test]
    fn a_full_queue_waits_for_room_but_not_past_stop() {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel(1);
        assert!(hand_over(&tx, 1, &stop));
        let taker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let first = rx.recv().unwrap();
            (first, rx)
        });
        assert!(hand_over(&tx, 2, &stop), "room made by the plane");
        let (first, rx) = taker.join().unwrap();
        assert_eq!((first, rx.try_recv().ok()), (1, Some(2)));
        assert!(hand_over(&tx, 3, &stop));
        let stopper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                stop.store(true, Ordering::Release);
            })
        };
        assert!(!hand_over(&tx, 4, &stop), "given up at stop");
        stopper.join().unwrap();
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [3]);
        drop(rx);
        assert!(!hand_over(&tx, 5, &AtomicBool::new(false)), "no plane");
    }
}
