//! The backend's push subscription registry (SPEC RT-12, seed §8.3):
//! subscriptions bound to a principal's association epoch, idempotent
//! revoke, provider cleanup, bounded size.
//!
//! Each principal has one association state: `Active(epoch)` or
//! `Revoked(epoch)`. All its subscriptions belong to the active epoch;
//! a new epoch drops them (seed §8.3: logout/account switch rotates the
//! association, and old subscriptions must not receive the new account's
//! pushes). A revoked epoch is a tombstone: it cannot be activated again.
//!
//! Storage (seed §8.3: "encrypted storage and keyed fingerprint" instead of
//! the raw endpoint): each subscription is held sealed with AES-256-GCM
//! (endpoint and keys; the registration id is its associated data), and
//! the endpoint index holds a keyed fingerprint (128 bits of HMAC-SHA-256)
//! instead of the endpoint. Both keys derive from the storage key the
//! caller gives ([`Registry::with_storage_key`]); a subscription is opened
//! only when it is read ([`Registry::get`], [`Registry::live`]).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;

use super::b64;
use super::subscription::{PushSubscription, SubscriptionId};

mod restore;

/// An association epoch (seed §8.3: issued by the backend registration
/// authority after commit; exact-match, opaque). Valid epochs are
/// identifiers (`[A-Za-z0-9._:-]`, 1–128 bytes) so they fit a
/// WEB_PUSH_HINT_V1. `Debug` does not show it (seed §12.3: exact-match
/// bindings are not logged).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AssociationEpoch(String);

impl fmt::Debug for AssociationEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AssociationEpoch(..)")
    }
}

impl AssociationEpoch {
    /// A fresh epoch from 16 caller-drawn random bytes (sans-IO): their
    /// base64url, 22 characters.
    pub fn from_random(bytes: [u8; 16]) -> Self {
        Self(b64::encode(&bytes))
    }

    /// An epoch issued elsewhere; `None` unless it is an identifier.
    pub fn parse(s: &str) -> Option<Self> {
        dtp_codec::realtime::is_valid_id(s).then(|| Self(s.to_owned()))
    }

    /// The epoch as the hint's `associationEpoch` carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Ceilings of a [`Registry`] (SPEC RT-12 "bounded"; the values are the
/// deployment's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryConfig {
    /// Subscriptions in the whole registry.
    pub max_subscriptions: usize,
    /// Subscriptions of one principal (its browsers and devices).
    pub max_per_principal: usize,
    /// Principals with an association state (active or tombstoned).
    pub max_principals: usize,
    /// Earlier association epochs remembered per principal (superseded or
    /// revoked: tombstones, never active again). Beyond it a new epoch is
    /// refused ([`RegistryError::TooManyEpochs`]) rather than a tombstone
    /// forgotten.
    pub max_epochs_per_principal: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            max_subscriptions: 100_000,
            max_per_principal: 16,
            max_principals: 100_000,
            max_epochs_per_principal: 64,
        }
    }
}

/// Why the registry refused a change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The registry holds [`RegistryConfig::max_subscriptions`].
    #[error("registry full: {max} subscriptions")]
    Full {
        /// The ceiling.
        max: usize,
    },
    /// The principal holds [`RegistryConfig::max_per_principal`].
    #[error("principal already has {max} subscriptions")]
    PrincipalFull {
        /// The ceiling.
        max: usize,
    },
    /// The registry tracks [`RegistryConfig::max_principals`].
    #[error("registry tracks {max} principals")]
    TooManyPrincipals {
        /// The ceiling.
        max: usize,
    },
    /// The principal has used [`RegistryConfig::max_epochs_per_principal`]
    /// epochs: no more tombstones can be kept, so no new epoch is taken.
    #[error("principal has used {max} association epochs")]
    TooManyEpochs {
        /// The ceiling.
        max: usize,
    },
    /// `subscribe` named an epoch that is not the principal's active one
    /// (superseded, revoked, or never associated).
    #[error("association epoch is not the principal's active one")]
    StaleAssociation,
    /// `associate` named the principal's revoked epoch (a tombstone, seed
    /// §8.3: never ACTIVE again).
    #[error("association epoch was revoked")]
    RevokedEpoch,
}

/// What [`Registry::associate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Associated {
    /// The epoch was already active: nothing changed (idempotent).
    Unchanged,
    /// The epoch is now active; the listed subscriptions of the previous
    /// epoch were removed.
    Rotated {
        /// Removed subscriptions, oldest first.
        removed: Vec<SubscriptionId>,
    },
}

/// What [`Registry::subscribe`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscribed {
    /// A new registration.
    Created(SubscriptionId),
    /// The endpoint was already the principal's: same ID, keys refreshed
    /// (idempotent upsert, seed §8.3).
    Existing(SubscriptionId),
    /// The endpoint belonged to another principal (account switch in the
    /// same browser): the old registration was removed, this is new.
    Rebound {
        /// The new registration.
        id: SubscriptionId,
        /// The removed registration of the other principal.
        removed: SubscriptionId,
    },
}

/// The result of a revoke or cleanup: both are success (SPEC RT-12,
/// seed §8.3: "duplicate/ALREADY_GONE = success").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revoked {
    /// It existed and is now removed.
    Removed,
    /// It did not exist (never, already revoked, or not the caller's):
    /// ALREADY_GONE.
    AlreadyGone,
}

/// Where a registration stands (SPEC RT-12; what `GET` of a registration
/// reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// Registered and sent to.
    Active,
    /// The push service answered 404/410 ([`Registry::remove`]): never sent
    /// to again.
    Gone,
    /// Revoked by its principal, by the revocation or rotation of its
    /// association, or replaced by another principal's registration of the
    /// same endpoint.
    Revoked,
}

impl RegistrationState {
    /// `ACTIVE`, `GONE` or `REVOKED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "ACTIVE",
            Self::Gone => "GONE",
            Self::Revoked => "REVOKED",
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
enum Association {
    Active(AssociationEpoch),
    Revoked(AssociationEpoch),
}

struct Principal {
    association: Association,
    /// Fingerprints of every earlier epoch (superseded or revoked),
    /// bounded by `max_epochs_per_principal`: tombstones (seed §8.3,
    /// REVOKED is terminal). Epochs come from the registration
    /// authority, not the client, so a 64-bit fingerprint's collisions
    /// are not an attacker's to choose.
    retired: Vec<u64>,
    /// Registration order.
    subscriptions: Vec<SubscriptionId>,
}

struct Entry<P> {
    principal: P,
    /// The subscription, sealed ([`Vault::seal`]).
    sealed: Vec<u8>,
    /// The endpoint's keyed fingerprint (its index key).
    fingerprint: Fingerprint,
}

/// A keyed fingerprint of an endpoint: 128 bits of HMAC-SHA-256.
type Fingerprint = [u8; 16];

/// The registry's storage keys: the endpoint index's MAC key and the
/// subscriptions' sealing key, and the count of seals (each seal's nonce).
struct Vault {
    index: ring::hmac::Key,
    seal: ring::aead::LessSafeKey,
    seals: u64,
}

impl Vault {
    fn new(key: &[u8; 32]) -> Self {
        let root = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
        let derive = |label: &[u8]| ring::hmac::sign(&root, label);
        let index = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            derive(b"dtp push registry index").as_ref(),
        );
        let seal_key = derive(b"dtp push registry seal");
        // A 32-byte key is what AES-256-GCM takes: this cannot fail.
        let unbound = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, seal_key.as_ref())
            .unwrap_or_else(|_| unreachable!("a 32-byte AES-256 key"));
        Self {
            index,
            seal: ring::aead::LessSafeKey::new(unbound),
            seals: 0,
        }
    }

    fn fingerprint(&self, endpoint: &str) -> Fingerprint {
        let tag = ring::hmac::sign(&self.index, endpoint.as_bytes());
        let mut f = [0u8; 16];
        f.copy_from_slice(&tag.as_ref()[..16]);
        f
    }

    /// `nonce counter (8) || AES-256-GCM(p256dh || auth || endpoint)`, the
    /// id as associated data. Every seal takes a fresh nonce.
    fn seal(&mut self, id: SubscriptionId, s: &PushSubscription) -> Vec<u8> {
        self.seals += 1;
        let counter = self.seals.to_le_bytes();
        let mut out = counter.to_vec();
        let mut body = Vec::with_capacity(81 + s.endpoint().len() + 16);
        body.extend_from_slice(s.keys().p256dh());
        body.extend_from_slice(s.keys().auth());
        body.extend_from_slice(s.endpoint().as_bytes());
        let aad = id.0.to_le_bytes();
        // Sealing fails only past ring's length bound (~64 GiB).
        let _ = self.seal.seal_in_place_append_tag(
            Self::nonce(counter),
            ring::aead::Aad::from(aad),
            &mut body,
        );
        out.extend_from_slice(&body);
        out
    }

    fn open(&self, id: SubscriptionId, sealed: &[u8]) -> Option<PushSubscription> {
        let (counter, body) = sealed.split_first_chunk::<8>()?;
        let mut body = body.to_vec();
        let aad = id.0.to_le_bytes();
        let plain = self
            .seal
            .open_in_place(Self::nonce(*counter), ring::aead::Aad::from(aad), &mut body)
            .ok()?;
        let (p256dh, rest) = plain.split_at_checked(65)?;
        let (auth, endpoint) = rest.split_at_checked(16)?;
        let keys = super::keys::ReceiverKeys::new(p256dh, auth).ok()?;
        PushSubscription::new(std::str::from_utf8(endpoint).ok()?, keys).ok()
    }

    fn nonce(counter: [u8; 8]) -> ring::aead::Nonce {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&counter);
        ring::aead::Nonce::assume_unique_for_key(n)
    }
}

/// A stable 64-bit fingerprint of an epoch, for the tombstone list.
fn fingerprint(epoch: &AssociationEpoch) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    h.write(epoch.0.as_bytes());
    h.finish()
}

/// The subscription registry (SPEC RT-12): subscriptions bound to a
/// principal's active association epoch, bounded by [`RegistryConfig`].
/// `P` identifies a principal (an account, or an account on a device).
/// `Debug` shows counts only.
pub struct Registry<P> {
    config: RegistryConfig,
    next_id: u64,
    principals: HashMap<P, Principal>,
    entries: HashMap<SubscriptionId, Entry<P>>,
    /// Keyed endpoint fingerprint → registration.
    by_endpoint: HashMap<Fingerprint, SubscriptionId>,
    vault: Vault,
    /// How ended registrations ended, the latest
    /// [`RegistryConfig::max_subscriptions`] of them (oldest first in
    /// `ended_order`).
    ended: HashMap<SubscriptionId, RegistrationState>,
    ended_order: VecDeque<SubscriptionId>,
}

impl<P: Clone + Eq + Hash> Registry<P> {
    /// An empty registry with these ceilings, its storage keys derived
    /// from an all-zero key (tests; a deployment uses
    /// [`Registry::with_storage_key`]).
    pub fn new(config: RegistryConfig) -> Self {
        Self::with_storage_key(config, [0; 32])
    }

    /// An empty registry with these ceilings whose sealing and index keys
    /// derive from `key` (random, drawn by the caller: sans-IO).
    pub fn with_storage_key(config: RegistryConfig, key: [u8; 32]) -> Self {
        Self {
            vault: Vault::new(&key),
            config,
            next_id: 1,
            principals: HashMap::new(),
            entries: HashMap::new(),
            by_endpoint: HashMap::new(),
            ended: HashMap::new(),
            ended_order: VecDeque::new(),
        }
    }

    /// Makes `epoch` the principal's active association (SPEC RT-12): a new
    /// epoch removes every subscription of the previous one; the active
    /// epoch again is a no-op; any earlier epoch — revoked or superseded —
    /// is a tombstone and refused (seed §8.3: a new ACTIVE needs a fresh
    /// epoch).
    pub fn associate(
        &mut self,
        principal: &P,
        epoch: AssociationEpoch,
    ) -> Result<Associated, RegistryError> {
        let Some(state) = self.principals.get_mut(principal) else {
            if self.principals.len() >= self.config.max_principals {
                return Err(RegistryError::TooManyPrincipals {
                    max: self.config.max_principals,
                });
            }
            let state = Principal {
                association: Association::Active(epoch),
                retired: Vec::new(),
                subscriptions: Vec::new(),
            };
            self.principals.insert(principal.clone(), state);
            return Ok(Associated::Rotated {
                removed: Vec::new(),
            });
        };
        let previous = match &state.association {
            Association::Active(current) if *current == epoch => return Ok(Associated::Unchanged),
            Association::Revoked(tomb) if *tomb == epoch => {
                return Err(RegistryError::RevokedEpoch);
            }
            Association::Active(e) | Association::Revoked(e) => fingerprint(e),
        };
        if state.retired.contains(&fingerprint(&epoch)) {
            return Err(RegistryError::RevokedEpoch);
        }
        let max = self.config.max_epochs_per_principal;
        if state.retired.len() >= max {
            return Err(RegistryError::TooManyEpochs { max });
        }
        state.retired.push(previous);
        state.association = Association::Active(epoch);
        let removed = std::mem::take(&mut state.subscriptions);
        for id in &removed {
            self.drop_entry(*id, RegistrationState::Revoked);
        }
        Ok(Associated::Rotated { removed })
    }

    /// Registers `subscription` for `principal` under its active `epoch`
    /// (SPEC RT-12). Re-registering the principal's endpoint returns its ID;
    /// an endpoint of another principal moves to this one.
    pub fn subscribe(
        &mut self,
        principal: &P,
        epoch: &AssociationEpoch,
        subscription: PushSubscription,
    ) -> Result<Subscribed, RegistryError> {
        let active = self.principals.get(principal).is_some_and(
            |s| matches!(&s.association, Association::Active(current) if current == epoch),
        );
        if !active {
            return Err(RegistryError::StaleAssociation);
        }
        let fingerprint = self.vault.fingerprint(subscription.endpoint());
        let previous = self.by_endpoint.get(&fingerprint).copied();
        let rebind = match previous.and_then(|id| Some((id, self.entries.get_mut(&id)?))) {
            Some((id, entry)) if entry.principal == *principal => {
                entry.sealed = self.vault.seal(id, &subscription);
                return Ok(Subscribed::Existing(id));
            }
            Some((id, _)) => Some(id),
            None => None,
        };
        let own = self
            .principals
            .get(principal)
            .map_or(0, |s| s.subscriptions.len());
        if own >= self.config.max_per_principal {
            return Err(RegistryError::PrincipalFull {
                max: self.config.max_per_principal,
            });
        }
        if rebind.is_none() && self.entries.len() >= self.config.max_subscriptions {
            return Err(RegistryError::Full {
                max: self.config.max_subscriptions,
            });
        }
        if let Some(old) = rebind {
            self.end(old, RegistrationState::Revoked);
        }
        let id = SubscriptionId(self.next_id);
        self.next_id += 1;
        self.by_endpoint.insert(fingerprint, id);
        let sealed = self.vault.seal(id, &subscription);
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
        Ok(match rebind {
            Some(removed) => Subscribed::Rebound { id, removed },
            None => Subscribed::Created(id),
        })
    }

    /// The principal revokes one registration (SPEC RT-12): idempotent; an
    /// unknown ID, or one that is not this principal's, is ALREADY_GONE and
    /// changes nothing.
    pub fn revoke(&mut self, principal: &P, id: SubscriptionId) -> Revoked {
        match self.entries.get(&id) {
            Some(entry) if entry.principal == *principal => {
                self.end(id, RegistrationState::Revoked)
            }
            _ => Revoked::AlreadyGone,
        }
    }

    /// Revokes the principal's association `epoch` (logout, seed §8.3):
    /// every subscription goes and the epoch becomes a tombstone. A
    /// superseded, already revoked or unknown epoch is ALREADY_GONE.
    pub fn revoke_association(&mut self, principal: &P, epoch: &AssociationEpoch) -> Revoked {
        let Some(state) = self.principals.get_mut(principal) else {
            return Revoked::AlreadyGone;
        };
        if !matches!(&state.association, Association::Active(current) if current == epoch) {
            return Revoked::AlreadyGone;
        }
        state.association = Association::Revoked(epoch.clone());
        for id in std::mem::take(&mut state.subscriptions) {
            self.drop_entry(id, RegistrationState::Revoked);
        }
        Revoked::Removed
    }

    /// Server-side removal without an owner check: the provider answered
    /// 404/410 ([`Outcome::Gone`](super::Outcome::Gone), seed §8.3 cleanup).
    /// The registration then reads [`RegistrationState::Gone`].
    pub fn remove(&mut self, id: SubscriptionId) -> Revoked {
        self.end(id, RegistrationState::Gone)
    }

    /// Where registration `id` stands: active, or how it ended (for the
    /// latest [`RegistryConfig::max_subscriptions`] ended ones); `None` for
    /// an ID never issued or ended too long ago.
    pub fn state(&self, id: SubscriptionId) -> Option<RegistrationState> {
        if self.entries.contains_key(&id) {
            return Some(RegistrationState::Active);
        }
        self.ended.get(&id).copied()
    }

    fn end(&mut self, id: SubscriptionId, why: RegistrationState) -> Revoked {
        let Some(entry) = self.drop_entry(id, why) else {
            return Revoked::AlreadyGone;
        };
        if let Some(state) = self.principals.get_mut(&entry.principal) {
            state.subscriptions.retain(|s| *s != id);
        }
        Revoked::Removed
    }

    /// The principal's live subscriptions, in registration order (SPEC
    /// RT-12): those of its active epoch; none after a revoke.
    /// Each is opened from its sealed record as it is read.
    pub fn live(&self, principal: &P) -> impl Iterator<Item = (SubscriptionId, PushSubscription)> {
        self.principals
            .get(principal)
            .map(|s| s.subscriptions.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|id| Some((*id, self.get(*id)?)))
    }

    /// The registrations of `principal`, without opening them.
    pub fn live_ids(&self, principal: &P) -> &[SubscriptionId] {
        self.principals
            .get(principal)
            .map(|s| s.subscriptions.as_slice())
            .unwrap_or_default()
    }

    /// The owner of live registration `id`.
    pub fn owner(&self, id: SubscriptionId) -> Option<&P> {
        self.entries.get(&id).map(|e| &e.principal)
    }

    /// The principal's active epoch, if it has one.
    pub fn active_epoch(&self, principal: &P) -> Option<&AssociationEpoch> {
        match &self.principals.get(principal)?.association {
            Association::Active(epoch) => Some(epoch),
            Association::Revoked(_) => None,
        }
    }

    /// One live registration, opened from its sealed record.
    pub fn get(&self, id: SubscriptionId) -> Option<PushSubscription> {
        let entry = self.entries.get(&id)?;
        self.vault.open(id, &entry.sealed)
    }

    /// Registrations held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no registration is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes the entry and its endpoint index, not the principal's list,
    /// and remembers how it ended.
    fn drop_entry(&mut self, id: SubscriptionId, why: RegistrationState) -> Option<Entry<P>> {
        let entry = self.entries.remove(&id)?;
        self.by_endpoint.remove(&entry.fingerprint);
        if self.ended_order.len() >= self.config.max_subscriptions.max(1)
            && let Some(oldest) = self.ended_order.pop_front()
        {
            self.ended.remove(&oldest);
        }
        self.ended.insert(id, why);
        self.ended_order.push_back(id);
        Some(entry)
    }
}

impl<P> fmt::Debug for Registry<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("config", &self.config)
            .field("principals", &self.principals.len())
            .field("subscriptions", &self.entries.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod vault_tests {
    use super::*;

    fn sub(endpoint: &str) -> PushSubscription {
        let secret = crate::push::ReceiverSecret::new(&[0x42; 32], [7; 16]).unwrap();
        PushSubscription::new(endpoint, secret.keys().clone()).unwrap()
    }

    /// Seed §8.3: the record holds neither the endpoint nor the keys in
    /// the clear, opens only under its own id, and the index is keyed.
    #[test]
    fn records_are_sealed_and_the_index_is_keyed() {
        let s = sub("https://push.example.net/push/abc");
        let mut vault = Vault::new(&[1; 32]);
        let sealed = vault.seal(SubscriptionId(5), &s);
        let has = |needle: &[u8]| sealed.windows(needle.len()).any(|w| w == needle);
        assert!(!has(b"push.example.net"));
        assert!(!has(s.keys().auth()));
        assert!(!has(&s.keys().p256dh()[..16]));
        assert_eq!(vault.open(SubscriptionId(5), &sealed), Some(s.clone()));
        assert_eq!(vault.open(SubscriptionId(6), &sealed), None);
        let mut tampered = sealed.clone();
        if let Some(b) = tampered.last_mut() {
            *b ^= 1;
        }
        assert_eq!(vault.open(SubscriptionId(5), &tampered), None);
        // A second seal of the same record takes a new nonce.
        assert_ne!(vault.seal(SubscriptionId(5), &s), sealed);
        let other = Vault::new(&[2; 32]);
        assert_ne!(
            vault.fingerprint(s.endpoint()),
            other.fingerprint(s.endpoint())
        );
    }
}
