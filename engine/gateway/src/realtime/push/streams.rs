//! Streams that send a Web Push hint for each publication (SPEC RT-12:
//! "a stream may also be configured to send a hint for each publication
//! to the subscriptions bound to it"). A registration binds itself to such
//! streams when it is made (`"streams": [...]`, each one its client may
//! read); every event committed to a bound stream then becomes one hint
//! per bound, active registration, with the stream's configured type,
//! intent, lifetime, urgency and topic. The hint names neither the stream
//! nor the event (seed §8.4: no free text): the page opens and refetches.

use std::collections::{BTreeSet, HashMap};

use dtp_realtime::push::{SubscriptionId, Urgency};

/// Streams one registration may be bound to, at most.
pub const MAX_BOUND_STREAMS: usize = 8;

/// One stream's hint (`[realtime.streams.push]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHint {
    /// The stream's id.
    pub stream: String,
    /// The hint's `notificationType` (one of the registered types).
    pub notification_type: String,
    /// The hint's `routeIntent` (one of the registered intents).
    pub route_intent: String,
    /// Its lifetime, seconds (1..=86400): `TTL` and `expiresAt`.
    pub ttl_secs: u32,
    /// Its `Urgency`.
    pub urgency: Urgency,
    /// Its `Topic`, if any: a push service keeps only the latest
    /// undelivered hint of one topic, so a burst of publications reaches
    /// an offline browser as one notification.
    pub topic: Option<String>,
}

/// Which registrations each stream sends to, and the reverse.
#[derive(Debug, Default)]
pub(super) struct Bindings {
    /// Stream → its registrations, in id order (a deterministic fan-out).
    by_stream: HashMap<Box<str>, BTreeSet<SubscriptionId>>,
    /// Registration → its streams.
    of: HashMap<SubscriptionId, Box<[Box<str>]>>,
}

impl Bindings {
    /// Binds `id` to exactly `streams` (replacing its earlier binding).
    pub(super) fn bind(&mut self, id: SubscriptionId, streams: Box<[Box<str>]>) {
        self.unbind(id);
        if streams.is_empty() {
            return;
        }
        for s in &streams {
            self.by_stream.entry(s.clone()).or_default().insert(id);
        }
        self.of.insert(id, streams);
    }

    /// Forgets `id`'s binding.
    pub(super) fn unbind(&mut self, id: SubscriptionId) {
        let Some(streams) = self.of.remove(&id) else {
            return;
        };
        for s in &streams {
            if let Some(ids) = self.by_stream.get_mut(s) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.by_stream.remove(s);
                }
            }
        }
    }

    /// The streams `id` is bound to.
    pub(super) fn streams(&self, id: SubscriptionId) -> &[Box<str>] {
        self.of.get(&id).map_or(&[], |s| s)
    }

    /// The registrations bound to `stream`, in id order.
    pub(super) fn bound(&self, stream: &str) -> Vec<SubscriptionId> {
        self.by_stream
            .get(stream)
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams(names: &[&str]) -> Box<[Box<str>]> {
        names.iter().map(|s| Box::<str>::from(*s)).collect()
    }

    #[test]
    fn a_binding_is_replaced_and_forgotten_in_both_directions() {
        let (a, b) = (SubscriptionId::from_raw(1), SubscriptionId::from_raw(2));
        let mut x = Bindings::default();
        x.bind(b, streams(&["alerts"]));
        x.bind(a, streams(&["alerts", "news"]));
        assert_eq!(x.bound("alerts"), [a, b]);
        assert_eq!(x.bound("news"), [a]);
        x.bind(a, streams(&["news"]));
        assert_eq!(x.bound("alerts"), [b]);
        assert_eq!(x.streams(a), &*streams(&["news"]));
        x.unbind(a);
        x.unbind(a);
        assert!(x.bound("news").is_empty());
        assert!(x.streams(a).is_empty());
        x.bind(b, streams(&[]));
        assert!(x.bound("alerts").is_empty());
        assert!(x.by_stream.is_empty() && x.of.is_empty());
    }
}
