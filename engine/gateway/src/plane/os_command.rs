//! SPEC TS-4: [`CommandAccess`], OS access control by running configured
//! programs — the process half of `dtp_terminal`'s [`CommandTemplates`].
//!
//! This is IO: it spawns a process and polls it against a deadline. It is a
//! *deferred* [`OsAccess`]: the terminal never calls it on the control
//! thread; the plane's OS workers (module `os_workers`) run each operation
//! and hand the answer back. The templates, their check and their
//! expansion stay sans-IO in `dtp_terminal`.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use dtp_terminal::{
    AccessGrant, CommandAccessConfig, CommandConfigError, CommandTemplates, OsAccess, OsError,
};

/// How long to sleep between two checks of a running command.
const POLL: Duration = Duration::from_millis(2);

/// SPEC TS-4: an [`OsAccess`] that runs one program per grant or revoke,
/// on the plane's OS workers (it is deferred). Exit status 0 is success;
/// any other status or a failure to start is [`OsError::Failed`] (the
/// program must then have changed nothing, per the [`OsAccess`] contract);
/// running past the timeout gets it killed and is
/// [`OsError::Indeterminate`] — a killed program may have done part of its
/// work, so the terminal marks the resource for reconciliation. Its
/// standard streams are closed.
#[derive(Clone, Debug)]
pub struct CommandAccess {
    templates: CommandTemplates,
}

impl CommandAccess {
    /// Checks the templates and builds the access control.
    pub fn new(config: CommandAccessConfig) -> Result<Self, CommandConfigError> {
        Ok(CommandAccess {
            templates: CommandTemplates::new(config)?,
        })
    }

    fn run(&self, args: &[String]) -> Result<(), OsError> {
        let (program, rest) = args
            .split_first()
            .ok_or_else(|| OsError::Failed("empty command".into()))?;
        let mut child = Command::new(program)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| OsError::Failed(format!("cannot start {program}: {e}")))?;
        let timeout_ms = self.templates.config().timeout_ms;
        let deadline = Instant::now() + self.templates.timeout();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(OsError::Failed(format!("{program} failed: {status}")));
                }
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(OsError::Indeterminate(format!(
                        "{program} ran past {timeout_ms} ms and was killed"
                    )));
                }
                Ok(None) => thread::sleep(POLL),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(OsError::Indeterminate(format!(
                        "waiting for {program}: {e}"
                    )));
                }
            }
        }
    }
}

impl OsAccess for CommandAccess {
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.run(&self.templates.grant_argv(grant)?)
    }

    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.run(&self.templates.revoke_argv(grant)?)
    }

    /// Always: a process may take seconds (DESIGN §3).
    fn deferred(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use dtp_codec::{AccessMode, SessionId};
    use dtp_terminal::Terminal;

    use super::*;

    fn grant() -> AccessGrant {
        AccessGrant {
            session_id: SessionId::from_u128(7),
            resource_id: "cam".into(),
            access_mode: AccessMode::Write,
            holder: "{resource_id}".into(),
        }
    }

    fn access(grant: &[&str], revoke: &[&str], timeout_ms: u64) -> CommandAccess {
        CommandAccess::new(CommandAccessConfig {
            grant: grant.iter().map(|s| s.to_string()).collect(),
            revoke: revoke.iter().map(|s| s.to_string()).collect(),
            timeout_ms,
        })
        .unwrap()
    }

    /// The control thread owns the terminal: it must be `Send`.
    #[test]
    fn a_terminal_with_command_access_is_send() {
        fn send<T: Send>() {}
        send::<Terminal<CommandAccess>>();
    }

    #[test]
    fn bad_templates_are_refused() {
        let refused = CommandAccess::new(CommandAccessConfig {
            grant: vec![],
            revoke: vec!["true".into()],
            timeout_ms: 10,
        });
        assert_eq!(refused.unwrap_err(), CommandConfigError::Empty("grant"));
    }

    #[test]
    fn exit_status_decides_and_placeholders_reach_the_program() {
        // `test A = B` exits 0 only when the expansion produced exactly that.
        let mut a = access(
            &[
                "test",
                "{resource_id}:{access_mode}:{fay_id}",
                "=",
                "cam:write:{{resource_id}}",
            ],
            &[
                "test",
                "{session_id}",
                "=",
                "00000000-0000-0000-0000-000000000007",
            ],
            2_000,
        );
        assert_eq!(a.grant(&grant()), Ok(()));
        assert_eq!(a.revoke(&grant()), Ok(()));
        let mut b = access(&["false"], &["test", "{resource_id}", "=", "other"], 2_000);
        let failed = b.grant(&grant()).unwrap_err();
        assert!(
            matches!(&failed, OsError::Failed(m) if m.contains("failed")),
            "{failed}"
        );
        assert!(a.deferred());
        assert!(b.revoke(&grant()).is_err());
    }

    #[test]
    fn a_missing_program_and_a_slow_one_fail() {
        let mut a = access(&["dtp-terminal-no-such-program"], &["sleep", "5"], 50);
        // Not started: nothing changed. Killed: nobody knows (SPEC TS-4).
        let missing = a.grant(&grant()).unwrap_err();
        assert!(matches!(&missing, OsError::Failed(m) if m.contains("cannot start")));
        let killed = a.revoke(&grant()).unwrap_err();
        assert!(matches!(&killed, OsError::Indeterminate(m) if m.contains("killed")));
    }
}
