//! Rebuilding a [`Registry`] from a durable store (SPEC RT-12: a
//! registration outlives a restart): the store keeps each registration
//! sealed under the key of the run that wrote it ([`Registry::sealed`]);
//! a new run opens it ([`Registry::open_with`]) and restores it under its
//! own id ([`Registry::restore`]), with how ended registrations ended
//! ([`Registry::restore_ended`]) and the next id ([`Registry::next_id`]),
//! so an id is never issued twice.

use std::hash::Hash;

use super::{
    Association, Entry, RegistrationState, Registry, RegistryError, SubscriptionId, Vault,
};
use crate::push::PushSubscription;

impl<P: Clone + Eq + Hash> Registry<P> {
    /// Opens a record [`Registry::sealed`] returned in a registry whose
    /// storage key was `key`.
    pub fn open_with(
        key: &[u8; 32],
        id: SubscriptionId,
        sealed: &[u8],
    ) -> Option<PushSubscription> {
        Vault::new(key).open(id, sealed)
    }

    /// Live registration `id`'s sealed record (no endpoint or key in the
    /// clear: what a store may keep).
    pub fn sealed(&self, id: SubscriptionId) -> Option<&[u8]> {
        self.entries.get(&id).map(|e| e.sealed.as_slice())
    }

    /// The id the next registration takes.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Ids below `next` are never issued again.
    pub fn reserve_ids(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// Puts registration `id` back for `principal`, whose active epoch must
    /// be restored first ([`Registry::associate`]), within the ceilings; an
    /// id or endpoint already held is refused
    /// ([`RegistryError::StaleAssociation`] for a principal with no active
    /// epoch).
    pub fn restore(
        &mut self,
        principal: &P,
        id: SubscriptionId,
        subscription: &PushSubscription,
    ) -> Result<(), RegistryError> {
        let Some(state) = self.principals.get(principal) else {
            return Err(RegistryError::StaleAssociation);
        };
        if !matches!(state.association, Association::Active(_)) {
            return Err(RegistryError::StaleAssociation);
        }
        if state.subscriptions.len() >= self.config.max_per_principal {
            return Err(RegistryError::PrincipalFull {
                max: self.config.max_per_principal,
            });
        }
        if self.entries.len() >= self.config.max_subscriptions {
            return Err(RegistryError::Full {
                max: self.config.max_subscriptions,
            });
        }
        let fingerprint = self.vault.fingerprint(subscription.endpoint());
        if self.entries.contains_key(&id) || self.by_endpoint.contains_key(&fingerprint) {
            return Err(RegistryError::StaleAssociation);
        }
        let sealed = self.vault.seal(id, subscription);
        self.by_endpoint.insert(fingerprint, id);
        self.entries.insert(
            id,
            Entry {
                principal: principal.clone(),
                sealed,
                fingerprint,
            },
        );
        if let Some(state) = self.principals.get_mut(principal) {
            state.subscriptions.push(id);
        }
        self.reserve_ids(id.0 + 1);
        Ok(())
    }

    /// Remembers that registration `id` ended as `state` (for `GET`), as
    /// ended registrations are: the latest ones, bounded.
    pub fn restore_ended(&mut self, id: SubscriptionId, state: RegistrationState) {
        if self.entries.contains_key(&id) || self.ended.contains_key(&id) {
            return;
        }
        if self.ended_order.len() >= self.config.max_subscriptions.max(1)
            && let Some(oldest) = self.ended_order.pop_front()
        {
            self.ended.remove(&oldest);
        }
        self.ended.insert(id, state);
        self.ended_order.push_back(id);
        self.reserve_ids(id.0 + 1);
    }

    /// How the remembered ended registrations ended, oldest first.
    pub fn ended(&self) -> impl Iterator<Item = (SubscriptionId, RegistrationState)> + '_ {
        self.ended_order
            .iter()
            .filter_map(|id| Some((*id, *self.ended.get(id)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::{AssociationEpoch, RegistryConfig, Subscribed};

    fn sub(endpoint: &str) -> PushSubscription {
        let secret = crate::push::ReceiverSecret::new(&[0x42; 32], [7; 16]).unwrap();
        PushSubscription::new(endpoint, secret.keys().clone()).unwrap()
    }

    /// A registration written by one run opens in the next only under the
    /// first run's key, keeps its id, and ids are never issued twice.
    #[test]
    fn a_registry_is_rebuilt_under_a_new_key_with_the_same_ids() {
        let epoch = AssociationEpoch::parse("a.one").unwrap();
        let mut old = Registry::<u8>::with_storage_key(RegistryConfig::default(), [1; 32]);
        old.associate(&7, epoch.clone()).unwrap();
        let Ok(Subscribed::Created(a)) = old.subscribe(&7, &epoch, sub("https://p.example/a"))
        else {
            panic!("not created");
        };
        let Ok(Subscribed::Created(b)) = old.subscribe(&7, &epoch, sub("https://p.example/b"))
        else {
            panic!("not created");
        };
        old.remove(b);
        let sealed = old.sealed(a).unwrap().to_vec();
        assert_eq!(Registry::<u8>::open_with(&[2; 32], a, &sealed), None);
        let opened = Registry::<u8>::open_with(&[1; 32], a, &sealed).unwrap();
        assert_eq!(opened, sub("https://p.example/a"));

        let mut new = Registry::<u8>::with_storage_key(RegistryConfig::default(), [3; 32]);
        assert_eq!(
            new.restore(&7, a, &opened),
            Err(RegistryError::StaleAssociation)
        );
        new.associate(&7, epoch.clone()).unwrap();
        new.restore(&7, a, &opened).unwrap();
        assert!(
            new.restore(&7, a, &opened).is_err(),
            "an id is restored once"
        );
        new.restore_ended(b, RegistrationState::Gone);
        assert_eq!(new.state(a), Some(RegistrationState::Active));
        assert_eq!(new.state(b), Some(RegistrationState::Gone));
        assert_eq!(
            new.ended().collect::<Vec<_>>(),
            [(b, RegistrationState::Gone)]
        );
        assert_eq!(new.get(a), Some(opened));
        assert_ne!(
            new.sealed(a).unwrap(),
            sealed.as_slice(),
            "sealed again under the new key"
        );
        // The same endpoint again is the restored registration.
        assert_eq!(
            new.subscribe(&7, &epoch, sub("https://p.example/a")),
            Ok(Subscribed::Existing(a))
        );
        let Ok(Subscribed::Created(c)) = new.subscribe(&7, &epoch, sub("https://p.example/c"))
        else {
            panic!("not created");
        };
        assert!(c.get() > b.get(), "no id issued twice");
    }
}
