//! [`CommandAccess`]: OS access control by running configured programs.
//!
//! This is the one file of the crate that touches the OS (it spawns
//! processes and waits on them with a deadline); everything else is sans-IO.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{AccessGrant, OsAccess, OsError};

/// The placeholders an argument may contain.
const PLACEHOLDERS: [&str; 4] = ["resource_id", "access_mode", "session_id", "fay_id"];

/// How long to sleep between two checks of a running command.
const POLL: Duration = Duration::from_millis(2);

/// SPEC TS-4: the argv templates of a [`CommandAccess`].
///
/// Each template is a program and its arguments. In every element,
/// `{resource_id}`, `{access_mode}` (`read`, `write`, `execute`,
/// `configure`), `{session_id}` and `{fay_id}` (the holder, `human:<id>` for
/// the human user) are replaced in one pass, so a value that itself looks
/// like a placeholder is never expanded again; `{{` and `}}` are literal
/// braces. No shell runs: values cannot inject commands — but they may start
/// with `-`, so a program that parses options should be given `--` first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandAccessConfig {
    /// Run to grant access.
    pub grant: Vec<String>,
    /// Run to revoke it.
    pub revoke: Vec<String>,
    /// The longest a command may run before it is killed and counted as a
    /// failure (ms, default 2000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    2_000
}

/// Why a [`CommandAccessConfig`] is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandConfigError {
    /// A template has no program.
    #[error("the {0} command is empty")]
    Empty(&'static str),
    /// A placeholder is unknown or a brace is unbalanced.
    #[error(
        "the {which} command has a bad placeholder in {arg:?} (known: {{resource_id}} {{access_mode}} {{session_id}} {{fay_id}})"
    )]
    BadPlaceholder {
        /// `grant` or `revoke`.
        which: &'static str,
        /// The argument.
        arg: String,
    },
}

/// SPEC TS-4: an [`OsAccess`] that runs one program per grant or revoke.
/// Exit status 0 is success; any other status, a failure to start, or
/// running past the timeout is a failure (the program must then have changed
/// nothing, per the [`OsAccess`] contract). Its standard streams are closed.
#[derive(Clone, Debug)]
pub struct CommandAccess {
    config: CommandAccessConfig,
}

impl CommandAccess {
    /// Checks the templates and builds the access control.
    pub fn new(config: CommandAccessConfig) -> Result<Self, CommandConfigError> {
        for (which, argv) in [("grant", &config.grant), ("revoke", &config.revoke)] {
            if argv.is_empty() {
                return Err(CommandConfigError::Empty(which));
            }
            for arg in argv {
                if expand(arg, &|_| Some("")).is_none() {
                    return Err(CommandConfigError::BadPlaceholder {
                        which,
                        arg: arg.clone(),
                    });
                }
            }
        }
        Ok(CommandAccess { config })
    }

    fn run(&self, argv: &[String], grant: &AccessGrant) -> Result<(), OsError> {
        let session = grant.session_id.to_string();
        let value = |name: &str| match name {
            "resource_id" => Some(grant.resource_id.as_str()),
            "access_mode" => Some(grant.access_mode.name()),
            "session_id" => Some(session.as_str()),
            "fay_id" => Some(grant.holder.as_str()),
            _ => None,
        };
        let args: Vec<String> = argv
            .iter()
            .map(|a| expand(a, &value))
            .collect::<Option<_>>()
            .ok_or_else(|| OsError("bad placeholder".into()))?;
        let (program, rest) = args
            .split_first()
            .ok_or_else(|| OsError("empty command".into()))?;
        let mut child = Command::new(program)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| OsError(format!("cannot start {program}: {e}")))?;
        let deadline = Instant::now() + Duration::from_millis(self.config.timeout_ms);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(OsError(format!("{program} failed: {status}"))),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(OsError(format!(
                        "{program} ran past {} ms and was killed",
                        self.config.timeout_ms
                    )));
                }
                Ok(None) => thread::sleep(POLL),
                Err(e) => return Err(OsError(format!("waiting for {program}: {e}"))),
            }
        }
    }
}

impl OsAccess for CommandAccess {
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.run(&self.config.grant, grant)
    }

    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.run(&self.config.revoke, grant)
    }
}

/// Expands the placeholders of `template` in one pass; `None` on an unknown
/// placeholder or an unbalanced brace.
fn expand<'a>(template: &str, value: &dyn Fn(&str) -> Option<&'a str>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(open) = tail.strip_prefix('{') {
            let close = open.find('}')?;
            let name = &open[..close];
            if !PLACEHOLDERS.contains(&name) {
                return None;
            }
            out.push_str(value(name)?);
            rest = &open[close + 1..];
        } else {
            return None; // a lone '}'
        }
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use dtp_codec::{AccessMode, SessionId};

    use super::*;

    fn grant() -> AccessGrant {
        AccessGrant {
            session_id: SessionId::from_u128(7),
            resource_id: "cam".into(),
            access_mode: AccessMode::Write,
            holder: "{resource_id}".into(),
        }
    }

    fn access(grant: &[&str], revoke: &[&str]) -> CommandAccess {
        CommandAccess::new(CommandAccessConfig {
            grant: grant.iter().map(|s| s.to_string()).collect(),
            revoke: revoke.iter().map(|s| s.to_string()).collect(),
            timeout_ms: 2_000,
        })
        .unwrap()
    }

    #[test]
    fn expansion_is_one_pass_and_escapes_braces() {
        let v = |n: &str| match n {
            "fay_id" => Some("{session_id}"),
            "session_id" => Some("S"),
            _ => Some("x"),
        };
        assert_eq!(expand("a{fay_id}b", &v).unwrap(), "a{session_id}b");
        assert_eq!(expand("{{{session_id}}}", &v).unwrap(), "{S}");
        assert_eq!(expand("{nope}", &v), None);
        assert_eq!(expand("{session_id", &v), None);
        assert_eq!(expand("a}b", &v), None);
    }

    #[test]
    fn bad_templates_are_refused() {
        let cfg = |g: Vec<String>| CommandAccessConfig {
            grant: g,
            revoke: vec!["true".into()],
            timeout_ms: 10,
        };
        assert_eq!(
            CommandAccess::new(cfg(vec![])).unwrap_err(),
            CommandConfigError::Empty("grant")
        );
        assert!(matches!(
            CommandAccess::new(cfg(vec!["echo".into(), "{resource}".into()])).unwrap_err(),
            CommandConfigError::BadPlaceholder { which: "grant", .. }
        ));
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
        );
        assert_eq!(a.grant(&grant()), Ok(()));
        assert_eq!(a.revoke(&grant()), Ok(()));
        let mut b = access(&["false"], &["test", "{resource_id}", "=", "other"]);
        assert!(b.grant(&grant()).unwrap_err().0.contains("failed"));
        assert!(b.revoke(&grant()).is_err());
    }

    #[test]
    fn a_missing_program_and_a_slow_one_fail() {
        let mut a = access(&["dtp-terminal-no-such-program"], &["sleep", "5"]);
        assert!(a.grant(&grant()).unwrap_err().0.contains("cannot start"));
        a.config.timeout_ms = 50;
        assert!(a.revoke(&grant()).unwrap_err().0.contains("killed"));
    }
}
