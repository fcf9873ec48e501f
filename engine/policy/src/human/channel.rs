//! SPEC HO-3c: the user-interface channels a pending decision is shown on.
//!
//! `external_panel` needs no push: the admin HTTP endpoint lists the queue
//! ([`PanelChannel`] only satisfies the trait). `system_dialog` (a dialog in
//! the terminal's desktop session) and `companion_app` (a push to the
//! owner's phone app) need an integration with a desktop session or a
//! companion-app service that a headless server does not have; an embedder
//! that has one implements [`HumanChannel`] for it. Until then a policy
//! naming those channels can only be answered through the panel or end in
//! its `default_action`.

use uuid::Uuid;

use super::PendingEntry;
use crate::config::UiChannel;

/// SPEC HO-3c: shows pending decisions to a person and takes them back.
/// Implementations do IO and run at the control thread's edge.
pub trait HumanChannel {
    /// The channel this implements.
    fn channel(&self) -> UiChannel;

    /// Shows a pending decision (source Fay, target Fay, resource, access
    /// mode, reason, deadline — never credential details).
    fn notify(&mut self, entry: &PendingEntry) -> Result<(), ChannelError>;

    /// Takes a decision off the screen (decided, expired or withdrawn).
    fn withdraw(&mut self, handover_id: Uuid);
}

/// A channel that could not show a decision.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// This build has no integration for the channel.
    #[error("ui channel {0:?} is not integrated on this terminal")]
    NotIntegrated(UiChannel),
    /// The integration failed.
    #[error("ui channel failed: {0}")]
    Failed(String),
}

/// SPEC HO-3c `external_panel`: the panel pulls from the queue, so there is
/// nothing to push.
#[derive(Clone, Copy, Debug, Default)]
pub struct PanelChannel;

impl HumanChannel for PanelChannel {
    fn channel(&self) -> UiChannel {
        UiChannel::ExternalPanel
    }

    fn notify(&mut self, _entry: &PendingEntry) -> Result<(), ChannelError> {
        Ok(())
    }

    fn withdraw(&mut self, _handover_id: Uuid) {}
}

/// What a [`RecordingChannel`] was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelEvent {
    /// `notify` with this entry.
    Notified(PendingEntry),
    /// `withdraw` of this handover.
    Withdrawn(Uuid),
}

/// A test double that records every call, and refuses notifications when
/// `fail_with` is set.
#[derive(Clone, Debug)]
pub struct RecordingChannel {
    /// The channel it pretends to be.
    pub channel: UiChannel,
    /// The calls, in order.
    pub events: Vec<ChannelEvent>,
    /// When set, `notify` fails with this error (and records nothing).
    pub fail_with: Option<ChannelError>,
}

impl RecordingChannel {
    /// A recorder for `channel` that accepts every notification.
    pub fn new(channel: UiChannel) -> Self {
        Self {
            channel,
            events: Vec::new(),
            fail_with: None,
        }
    }
}

impl HumanChannel for RecordingChannel {
    fn channel(&self) -> UiChannel {
        self.channel
    }

    fn notify(&mut self, entry: &PendingEntry) -> Result<(), ChannelError> {
        if let Some(e) = &self.fail_with {
            return Err(e.clone());
        }
        self.events.push(ChannelEvent::Notified(entry.clone()));
        Ok(())
    }

    fn withdraw(&mut self, handover_id: Uuid) {
        self.events.push(ChannelEvent::Withdrawn(handover_id));
    }
}
