//! The admin commands of [`super::PlaneHandle`], run on the control thread
//! at the plane's tick, each followed by the outputs it caused.

use dtp_terminal::{OsAccess, UnixMs};

use super::TerminalPlane;
use super::handle::{Command, Ended, PlaneError, answer};
use super::observe::PlaneMetrics;
use crate::app::Decisions;

impl<A: OsAccess + Clone + Send + 'static> TerminalPlane<A> {
    /// Runs the queued commands, at most a queue's worth per tick; true
    /// when more are waiting.
    pub(super) fn run_commands(&mut self, now: UnixMs, out: &mut Decisions) -> bool {
        for _ in 0..self.admin_queue {
            let Ok(command) = self.commands.try_recv() else {
                return false;
            };
            PlaneMetrics::bump(&self.metrics.admin_commands);
            self.run_command(command, now);
            self.pump(now, out);
        }
        true
    }

    fn run_command(&mut self, command: Command, now: UnixMs) {
        let t = &mut self.terminal;
        match command {
            Command::Sessions(r) => answer(r, Ok(t.sessions())),
            Command::Resources(r) => answer(r, Ok(t.resources())),
            Command::PendingHandovers(r) => answer(r, Ok(t.pending_handovers())),
            Command::PendingDecisions(r) => answer(r, Ok(self.policies.pending())),
            Command::Decide(handover_id, allow, r) => {
                let result = match self.policies.decide(handover_id, allow, now) {
                    Ok((outcome, decision)) => t
                        .policy_decided(handover_id, decision, now)
                        .map(|()| outcome)
                        .map_err(PlaneError::from),
                    Err(e) => Err(e.into()),
                };
                if result.is_ok() {
                    self.emit(|| super::streams::decision_closed(handover_id));
                }
                answer(r, result);
            }
            Command::ForceTerminate(id, r) => {
                answer(r, t.force_terminate(id, now).map_err(PlaneError::from));
            }
            Command::SetResourceAvailable(resource, available, r) => {
                let result = t.set_resource_available(&resource, available, now);
                if result.is_ok() {
                    self.emit(|| super::streams::resource_availability(&resource, available));
                }
                answer(r, ended(result));
            }
            Command::AdminHandover(request, r) => {
                let result = t.admin_handover(*request, now);
                answer(r, result.map(Into::into).map_err(PlaneError::from));
            }
            Command::Revoke(descriptor_id, r) => answer(r, ended(t.revoke(descriptor_id, now))),
            Command::ClearReconciliation(resource, r) => {
                let result = t.clear_reconciliation(&resource, now);
                answer(r, result.map_err(PlaneError::from));
            }
        }
    }
}

fn ended(result: Result<usize, dtp_terminal::Refusal>) -> Result<Ended, PlaneError> {
    result
        .map(|sessions_ended| Ended { sessions_ended })
        .map_err(PlaneError::from)
}
