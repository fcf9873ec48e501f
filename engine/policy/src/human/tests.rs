use super::*;
use crate::config::UiChannel;
use crate::input::sample;

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn view() -> DecisionView {
    DecisionView::of(&sample::input())
}

#[test]
fn view_shows_the_five_fields_and_nothing_else() {
    let mut q = PendingDecisions::new(8);
    q.add(id(1), view(), 30_000, DefaultAction::Reject).unwrap();
    let json = serde_json::to_value(q.list()).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{
            "handover_id": id(1).to_string(),
            "source_fay_id": "fay-a",
            "target_fay_id": "fay-b",
            "resource_id": "cam-1",
            "access_mode": "write",
            "reason": "operator shift change",
            "deadline_ms": 30_000,
            "default_action": "reject",
        }])
    );
}

#[test]
fn a_person_decides_once() {
    let mut q = PendingDecisions::new(8);
    q.add(id(1), view(), 30_000, DefaultAction::Reject).unwrap();
    q.add(id(2), view(), 31_000, DefaultAction::Reject).unwrap();
    let out = q.decide(id(1), HumanChoice::Allow, 10_000).unwrap();
    assert_eq!(out.verdict, Verdict::Allow);
    assert_eq!(out.decided_by, DecidedBy::Human);
    assert_eq!(
        q.decide(id(1), HumanChoice::Reject, 10_001),
        Err(HumanError::AlreadyDecided(id(1)))
    );
    let out = q.decide(id(2), HumanChoice::Reject, 10_002).unwrap();
    assert!(matches!(out.verdict, Verdict::Reject { .. }));
    assert!(q.is_empty());
}

#[test]
fn unknown_ids_are_errors() {
    let mut q = PendingDecisions::new(8);
    assert_eq!(
        q.decide(id(9), HumanChoice::Allow, 0),
        Err(HumanError::Unknown(id(9)))
    );
    assert!(!q.withdraw(id(9)));
    assert_eq!(q.get(&id(9)), None);
}

#[test]
fn deadline_passes_to_the_default_action() {
    let mut q = PendingDecisions::new(8);
    q.add(id(1), view(), 30_000, DefaultAction::Reject).unwrap();
    q.add(id(2), view(), 20_000, DefaultAction::Allow).unwrap();
    q.add(id(3), view(), 40_000, DefaultAction::Allow).unwrap();
    assert_eq!(q.next_deadline(), Some(20_000));
    assert!(q.expire(19_999).is_empty());

    let out = q.expire(30_000);
    let got: Vec<(Uuid, bool, DecidedBy)> = out
        .iter()
        .map(|o| (o.handover_id, o.verdict.is_allow(), o.decided_by))
        .collect();
    assert_eq!(
        got,
        vec![
            (id(2), true, DecidedBy::Timeout),
            (id(1), false, DecidedBy::Timeout)
        ]
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q.next_deadline(), Some(40_000));
    // A late click on an expired one is refused.
    assert_eq!(
        q.decide(id(1), HumanChoice::Allow, 30_001),
        Err(HumanError::AlreadyDecided(id(1)))
    );
}

#[test]
fn a_decision_at_the_deadline_is_too_late() {
    let mut q = PendingDecisions::new(8);
    q.add(id(1), view(), 30_000, DefaultAction::Allow).unwrap();
    assert_eq!(
        q.decide(id(1), HumanChoice::Reject, 30_000),
        Err(HumanError::Expired(id(1)))
    );
    // Still pending until expire() applies the default.
    assert_eq!(q.len(), 1);
    let out = q.expire(30_000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].verdict, Verdict::Allow);
}

#[test]
fn withdraw_removes_and_blocks_later_decisions() {
    let mut q = PendingDecisions::new(8);
    q.add(id(1), view(), 30_000, DefaultAction::Reject).unwrap();
    assert!(q.withdraw(id(1)));
    assert!(q.is_empty());
    assert_eq!(
        q.decide(id(1), HumanChoice::Allow, 1),
        Err(HumanError::AlreadyDecided(id(1)))
    );
    assert!(q.expire(u64::MAX).is_empty());
}

#[test]
fn duplicates_and_overflow_are_refused() {
    let mut q = PendingDecisions::new(2);
    q.add(id(1), view(), 1, DefaultAction::Reject).unwrap();
    assert_eq!(
        q.add(id(1), view(), 2, DefaultAction::Reject).unwrap_err(),
        HumanError::Duplicate(id(1))
    );
    q.add(id(2), view(), 1, DefaultAction::Reject).unwrap();
    assert_eq!(
        q.add(id(3), view(), 1, DefaultAction::Reject).unwrap_err(),
        HumanError::Full(2)
    );
    // A resolved id cannot be queued again either (retries use a new id, HO-8).
    q.decide(id(2), HumanChoice::Allow, 0).unwrap();
    assert_eq!(
        q.add(id(2), view(), 5, DefaultAction::Reject).unwrap_err(),
        HumanError::Duplicate(id(2))
    );
}

#[test]
fn decided_memory_is_bounded() {
    let mut q = PendingDecisions::new(1);
    for n in 0..(DECIDED_MEMORY as u128 + 1) {
        q.add(id(n), view(), 10, DefaultAction::Reject).unwrap();
        q.decide(id(n), HumanChoice::Allow, 0).unwrap();
    }
    // The oldest id fell out of memory: it is now just unknown.
    assert_eq!(
        q.decide(id(0), HumanChoice::Allow, 0),
        Err(HumanError::Unknown(id(0)))
    );
    assert_eq!(
        q.decide(id(1), HumanChoice::Allow, 0),
        Err(HumanError::AlreadyDecided(id(1)))
    );
}

#[test]
fn channels_are_driven_beside_the_queue() {
    let mut q = PendingDecisions::new(8);
    let mut ch = RecordingChannel::new(UiChannel::SystemDialog);
    assert_eq!(ch.channel(), UiChannel::SystemDialog);
    let entry = q
        .add(id(1), view(), 30_000, DefaultAction::Reject)
        .unwrap()
        .clone();
    ch.notify(&entry).unwrap();
    q.decide(id(1), HumanChoice::Allow, 5).unwrap();
    ch.withdraw(id(1));
    assert_eq!(
        ch.events,
        vec![
            ChannelEvent::Notified(entry.clone()),
            ChannelEvent::Withdrawn(id(1))
        ]
    );

    ch.fail_with = Some(ChannelError::NotIntegrated(UiChannel::SystemDialog));
    assert_eq!(
        ch.notify(&entry),
        Err(ChannelError::NotIntegrated(UiChannel::SystemDialog))
    );
    assert_eq!(ch.events.len(), 2);

    let mut panel = PanelChannel;
    assert_eq!(panel.channel(), UiChannel::ExternalPanel);
    assert_eq!(panel.notify(&entry), Ok(()));
}

#[test]
fn panel_choices_deserialise_strictly() {
    assert_eq!(
        serde_json::from_str::<HumanChoice>("\"allow\"").unwrap(),
        HumanChoice::Allow
    );
    assert_eq!(
        serde_json::from_str::<HumanChoice>("\"reject\"").unwrap(),
        HumanChoice::Reject
    );
    assert!(serde_json::from_str::<HumanChoice>("\"maybe\"").is_err());
}
