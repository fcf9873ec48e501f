//! The subscription registry: association epochs, idempotent revoke,
//! cleanup, ceilings; and the subscription's endpoint rules.

use proptest::prelude::*;

use super::*;

const P256DH: &str =
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

fn sub(n: u32) -> PushSubscription {
    let endpoint = format!("https://push.example.net/push/{n}");
    PushSubscription::from_parts(&endpoint, P256DH, AUTH).unwrap()
}

fn epoch(n: u8) -> AssociationEpoch {
    AssociationEpoch::from_random([n; 16])
}

fn config(total: usize, per: usize, principals: usize) -> RegistryConfig {
    RegistryConfig {
        max_subscriptions: total,
        max_per_principal: per,
        max_principals: principals,
        max_epochs_per_principal: 4,
    }
}

fn live(r: &Registry<&'static str>, p: &'static str) -> Vec<u64> {
    r.live(&p).map(|(id, _)| id.get()).collect()
}

#[test]
fn epochs_are_identifiers() {
    assert_eq!(epoch(0).as_str(), "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(
        AssociationEpoch::parse("ae:7").map(|e| e.as_str().to_owned()),
        Some("ae:7".into())
    );
    assert_eq!(AssociationEpoch::parse(""), None);
    assert_eq!(AssociationEpoch::parse("a b"), None);
    assert_eq!(format!("{:?}", epoch(0)), "AssociationEpoch(..)");
    let mut r = Registry::new(config(1, 1, 1));
    r.associate(&"alice", epoch(0)).unwrap();
    assert_eq!(
        format!("{r:?}"),
        "Registry { config: RegistryConfig { max_subscriptions: 1, max_per_principal: 1, \
         max_principals: 1, max_epochs_per_principal: 4 }, principals: 1, subscriptions: 0, .. }"
    );
}

#[test]
fn subscribe_needs_the_active_epoch() {
    let mut r = Registry::new(RegistryConfig::default());
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(1)),
        Err(RegistryError::StaleAssociation)
    );
    assert_eq!(
        r.associate(&"alice", epoch(1)),
        Ok(Associated::Rotated { removed: vec![] })
    );
    assert_eq!(
        r.subscribe(&"alice", &epoch(2), sub(1)),
        Err(RegistryError::StaleAssociation)
    );
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(1)),
        Ok(Subscribed::Created(SubscriptionId(1)))
    );
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(2)),
        Ok(Subscribed::Created(SubscriptionId(2)))
    );
    assert_eq!(live(&r, "alice"), [1, 2]);
    assert_eq!(r.active_epoch(&"alice"), Some(&epoch(1)));
    assert_eq!(
        r.get(SubscriptionId(2))
            .map(|s| s.endpoint().to_owned())
            .as_deref(),
        Some("https://push.example.net/push/2")
    );
    assert_eq!(r.len(), 2);
}

#[test]
fn a_new_epoch_drops_the_old_subscriptions() {
    let mut r = Registry::new(RegistryConfig::default());
    r.associate(&"alice", epoch(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(2)).unwrap();
    assert_eq!(r.associate(&"alice", epoch(1)), Ok(Associated::Unchanged));
    assert_eq!(
        r.associate(&"alice", epoch(2)),
        Ok(Associated::Rotated {
            removed: vec![SubscriptionId(1), SubscriptionId(2)]
        })
    );
    assert_eq!(live(&r, "alice"), Vec::<u64>::new());
    assert!(r.is_empty());
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(1)),
        Err(RegistryError::StaleAssociation)
    );
    // The endpoint index was cleared too: the same endpoint registers anew.
    assert_eq!(
        r.subscribe(&"alice", &epoch(2), sub(1)),
        Ok(Subscribed::Created(SubscriptionId(3)))
    );
}

#[test]
fn re_registration_is_idempotent_and_account_switch_rebinds() {
    let mut r = Registry::new(RegistryConfig::default());
    r.associate(&"alice", epoch(1)).unwrap();
    r.associate(&"bob", epoch(2)).unwrap();
    let id = SubscriptionId(1);
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(1)),
        Ok(Subscribed::Created(id))
    );
    let rotated = PushSubscription::from_parts(
        "https://push.example.net/push/1",
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
        AUTH,
    )
    .unwrap();
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), rotated.clone()),
        Ok(Subscribed::Existing(id))
    );
    assert_eq!(r.get(id), Some(rotated));
    assert_eq!(
        r.subscribe(&"bob", &epoch(2), sub(1)),
        Ok(Subscribed::Rebound {
            id: SubscriptionId(2),
            removed: id
        })
    );
    assert_eq!(live(&r, "alice"), Vec::<u64>::new());
    assert_eq!(live(&r, "bob"), [2]);
    assert_eq!(r.len(), 1);
}

#[test]
fn revoke_is_idempotent_and_owner_bound() {
    let mut r = Registry::new(RegistryConfig::default());
    r.associate(&"alice", epoch(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    let id = SubscriptionId(1);
    assert_eq!(r.revoke(&"mallory", id), Revoked::AlreadyGone);
    assert_eq!(live(&r, "alice"), [1]);
    assert_eq!(r.revoke(&"alice", id), Revoked::Removed);
    assert_eq!(r.revoke(&"alice", id), Revoked::AlreadyGone);
    assert_eq!(r.revoke(&"alice", SubscriptionId(99)), Revoked::AlreadyGone);
    assert_eq!(live(&r, "alice"), Vec::<u64>::new());
}

#[test]
fn revoked_association_is_a_tombstone() {
    let mut r = Registry::new(RegistryConfig::default());
    r.associate(&"alice", epoch(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    assert_eq!(
        r.revoke_association(&"alice", &epoch(2)),
        Revoked::AlreadyGone
    );
    assert_eq!(
        r.revoke_association(&"bob", &epoch(1)),
        Revoked::AlreadyGone
    );
    assert_eq!(r.revoke_association(&"alice", &epoch(1)), Revoked::Removed);
    assert_eq!(
        r.revoke_association(&"alice", &epoch(1)),
        Revoked::AlreadyGone
    );
    assert!(r.is_empty());
    assert_eq!(r.active_epoch(&"alice"), None);
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(1)),
        Err(RegistryError::StaleAssociation)
    );
    assert_eq!(
        r.associate(&"alice", epoch(1)),
        Err(RegistryError::RevokedEpoch)
    );
    assert_eq!(
        r.associate(&"alice", epoch(3)),
        Ok(Associated::Rotated { removed: vec![] })
    );
    assert_eq!(r.active_epoch(&"alice"), Some(&epoch(3)));
}

/// Seed §8.3: REVOKED is terminal, and so is SUPERSEDED. Revoking E1, then
/// associating E2, then E1 again must not bring E1 back; nor may an epoch
/// an account switch left behind.
#[test]
fn every_earlier_epoch_stays_a_tombstone() {
    let mut r = Registry::new(config(10, 10, 10));
    r.associate(&"alice", epoch(1)).unwrap();
    assert_eq!(r.revoke_association(&"alice", &epoch(1)), Revoked::Removed);
    r.associate(&"alice", epoch(2)).unwrap();
    assert_eq!(
        r.associate(&"alice", epoch(1)),
        Err(RegistryError::RevokedEpoch)
    );
    r.associate(&"alice", epoch(3)).unwrap();
    assert_eq!(
        r.associate(&"alice", epoch(2)),
        Err(RegistryError::RevokedEpoch),
        "a superseded epoch is not active again"
    );
    assert_eq!(r.active_epoch(&"alice"), Some(&epoch(3)));
    // Bounded: a fifth earlier epoch cannot be remembered, so none is taken.
    r.associate(&"alice", epoch(4)).unwrap();
    r.associate(&"alice", epoch(5)).unwrap();
    assert_eq!(
        r.associate(&"alice", epoch(6)),
        Err(RegistryError::TooManyEpochs { max: 4 })
    );
    assert_eq!(r.active_epoch(&"alice"), Some(&epoch(5)));
    // Another principal has its own epochs.
    assert!(r.associate(&"bob", epoch(1)).is_ok());
}

#[test]
fn provider_cleanup_removes_without_owner() {
    let mut r = Registry::new(RegistryConfig::default());
    r.associate(&"alice", epoch(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(2)).unwrap();
    assert_eq!(r.remove(SubscriptionId(1)), Revoked::Removed);
    assert_eq!(r.remove(SubscriptionId(1)), Revoked::AlreadyGone);
    assert_eq!(live(&r, "alice"), [2]);
    assert_eq!(r.state(SubscriptionId(1)), Some(RegistrationState::Gone));
    assert_eq!(r.state(SubscriptionId(2)), Some(RegistrationState::Active));
    assert_eq!(r.state(SubscriptionId(3)), None);
    // A principal's revoke after the provider's cleanup changes nothing.
    assert_eq!(r.revoke(&"alice", SubscriptionId(1)), Revoked::AlreadyGone);
    assert_eq!(r.state(SubscriptionId(1)), Some(RegistrationState::Gone));
}

#[test]
fn every_ending_is_remembered_with_its_cause_and_bounded() {
    let mut r = Registry::new(config(2, 2, 4));
    r.associate(&"alice", epoch(1)).unwrap();
    r.associate(&"bob", epoch(2)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    r.revoke(&"alice", SubscriptionId(1));
    assert_eq!(r.state(SubscriptionId(1)), Some(RegistrationState::Revoked));
    r.subscribe(&"alice", &epoch(1), sub(2)).unwrap();
    // Another principal takes the endpoint: the old registration is revoked.
    r.subscribe(&"bob", &epoch(2), sub(2)).unwrap();
    assert_eq!(r.state(SubscriptionId(2)), Some(RegistrationState::Revoked));
    r.revoke_association(&"bob", &epoch(2));
    assert_eq!(r.state(SubscriptionId(3)), Some(RegistrationState::Revoked));
    assert_eq!(RegistrationState::Gone.as_str(), "GONE");
    // Only the latest `max_subscriptions` (2) endings are kept.
    assert_eq!(r.state(SubscriptionId(1)), None);
}

#[test]
fn ceilings_refuse_beyond() {
    let mut r = Registry::new(config(3, 2, 2));
    r.associate(&"alice", epoch(1)).unwrap();
    r.associate(&"bob", epoch(2)).unwrap();
    assert_eq!(
        r.associate(&"carol", epoch(3)),
        Err(RegistryError::TooManyPrincipals { max: 2 })
    );
    r.subscribe(&"alice", &epoch(1), sub(1)).unwrap();
    r.subscribe(&"alice", &epoch(1), sub(2)).unwrap();
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(3)),
        Err(RegistryError::PrincipalFull { max: 2 })
    );
    // Re-registering an existing endpoint is not growth.
    assert_eq!(
        r.subscribe(&"alice", &epoch(1), sub(2)),
        Ok(Subscribed::Existing(SubscriptionId(2)))
    );
    r.subscribe(&"bob", &epoch(2), sub(3)).unwrap();
    assert_eq!(
        r.subscribe(&"bob", &epoch(2), sub(4)),
        Err(RegistryError::Full { max: 3 })
    );
    // A rebind at the total ceiling moves a registration, it does not add one.
    assert_eq!(
        r.subscribe(&"bob", &epoch(2), sub(1)),
        Ok(Subscribed::Rebound {
            id: SubscriptionId(4),
            removed: SubscriptionId(1)
        })
    );
    assert_eq!(r.len(), 3);
    assert_eq!(
        r.subscribe(&"bob", &epoch(2), sub(2)),
        Err(RegistryError::PrincipalFull { max: 2 })
    );
}

#[test]
fn endpoints_must_be_https_urls() {
    for ok in [
        "https://fcm.googleapis.com/fcm/send/abc:DEF-123",
        "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
        "https://push.example.net:8443/p?x=1",
        "https://push.example.net",
    ] {
        let s = PushSubscription::from_parts(ok, P256DH, AUTH).unwrap();
        assert_eq!(s.endpoint(), ok);
    }
    let s =
        PushSubscription::from_parts("https://push.example.net:8443/p?x=1", P256DH, AUTH).unwrap();
    assert_eq!(s.audience(), "https://push.example.net:8443");
    let long = format!("https://push.example.net/{}", "a".repeat(MAX_ENDPOINT_LEN));
    for bad in [
        "http://push.example.net/p",
        "https://push.example.net/p#frag",
        "https://push.example.net/a b",
        "https://user@push.example.net/p",
        "https:///p",
        "push.example.net/p",
        long.as_str(),
    ] {
        assert_eq!(
            PushSubscription::from_parts(bad, P256DH, AUTH),
            Err(SubscriptionError::InvalidEndpoint),
            "{bad}"
        );
    }
    assert_eq!(
        PushSubscription::from_parts("https://push.example.net/p", "AA", AUTH),
        Err(SubscriptionError::Key(KeyError::InvalidPoint))
    );
    assert_eq!(format!("{:?}", sub(1)), "PushSubscription { .. }");
}

#[derive(Clone, Debug)]
enum Op {
    Associate(u8, u8),
    Subscribe(u8, u8, u8),
    Revoke(u8, u64),
    RevokeAssociation(u8, u8),
    Remove(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8, 0..4u8).prop_map(|(p, e)| Op::Associate(p, e)),
        (0..3u8, 0..4u8, 0..6u8).prop_map(|(p, e, s)| Op::Subscribe(p, e, s)),
        (0..3u8, 0..12u64).prop_map(|(p, i)| Op::Revoke(p, i)),
        (0..3u8, 0..4u8).prop_map(|(p, e)| Op::RevokeAssociation(p, e)),
        (0..12u64).prop_map(Op::Remove),
    ]
}

proptest! {
    /// Invariants under any operation sequence: ceilings hold, every live
    /// subscription is reachable by ID, and endpoints are unique.
    #[test]
    fn invariants_hold(ops in proptest::collection::vec(op(), 0..60)) {
        let mut r: Registry<u8> = Registry::new(config(5, 3, 3));
        for op in ops {
            match op {
                Op::Associate(p, e) => { let _ = r.associate(&p, epoch(e)); }
                Op::Subscribe(p, e, s) => { let _ = r.subscribe(&p, &epoch(e), sub(u32::from(s))); }
                Op::Revoke(p, i) => { let _ = r.revoke(&p, SubscriptionId(i)); }
                Op::RevokeAssociation(p, e) => { let _ = r.revoke_association(&p, &epoch(e)); }
                Op::Remove(i) => { let _ = r.remove(SubscriptionId(i)); }
            }
            prop_assert!(r.len() <= 5);
            let mut total = 0;
            let mut endpoints = std::collections::HashSet::new();
            for p in 0..3u8 {
                let mine: Vec<_> = r.live(&p).collect();
                prop_assert!(mine.len() <= 3);
                prop_assert!(mine.is_empty() || r.active_epoch(&p).is_some());
                for (id, s) in mine {
                    prop_assert!(endpoints.insert(s.endpoint().to_owned()));
                    prop_assert_eq!(r.get(id), Some(s));
                    total += 1;
                }
            }
            prop_assert_eq!(total, r.len());
        }
    }

    #[test]
    fn subscription_parsing_never_panics(e in "\\PC{0,80}", p in "\\PC{0,90}", a in "\\PC{0,24}") {
        let _ = PushSubscription::from_parts(&e, &p, &a);
        let _ = AssociationEpoch::parse(&e);
    }
}
