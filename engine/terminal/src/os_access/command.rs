//! The sans-IO half of OS access control by running configured programs:
//! the argv templates, their check, and their expansion for one grant.
//!
//! The process itself is started, waited on and killed past the timeout by
//! the runtime side (`dtp_gateway::plane::CommandAccess`, a deferred
//! [`super::OsAccess`] built on [`CommandTemplates`], run on the plane's OS
//! workers); this crate spawns nothing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{AccessGrant, OsError};

/// The placeholders an argument may contain.
const PLACEHOLDERS: [&str; 4] = ["resource_id", "access_mode", "session_id", "fay_id"];

/// SPEC TS-4: the argv templates of a command-running [`super::OsAccess`].
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
    /// The longest a command may run before it is killed (ms, default
    /// 2000). A killed command fails its step and, since it may have done
    /// part of its work, marks the resource for reconciliation (SPEC TS-4).
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

/// SPEC TS-4: checked [`CommandAccessConfig`] templates, ready to expand
/// for a grant. The runtime's `CommandAccess` runs what they expand to:
/// exit status 0 is success; any other status or a failure to start is a
/// failure (the program must then have changed nothing, per the
/// [`super::OsAccess`] contract); running past [`CommandTemplates::timeout`]
/// gets it killed, an unknown outcome ([`super::OsError::Indeterminate`]).
#[derive(Clone, Debug)]
pub struct CommandTemplates {
    config: CommandAccessConfig,
}

impl CommandTemplates {
    /// Checks the templates.
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
        Ok(CommandTemplates { config })
    }

    /// The checked configuration.
    pub fn config(&self) -> &CommandAccessConfig {
        &self.config
    }

    /// The longest a command may run before it is killed.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.timeout_ms)
    }

    /// The grant command for `grant`: program first, then its arguments.
    pub fn grant_argv(&self, grant: &AccessGrant) -> Result<Vec<String>, OsError> {
        argv(&self.config.grant, grant)
    }

    /// The revoke command for `grant`: program first, then its arguments.
    pub fn revoke_argv(&self, grant: &AccessGrant) -> Result<Vec<String>, OsError> {
        argv(&self.config.revoke, grant)
    }
}

/// Expands every element of `template` for `grant`; the result is never
/// empty.
fn argv(template: &[String], grant: &AccessGrant) -> Result<Vec<String>, OsError> {
    let session = grant.session_id.to_string();
    let value = |name: &str| match name {
        "resource_id" => Some(&*grant.resource_id),
        "access_mode" => Some(grant.access_mode.name()),
        "session_id" => Some(session.as_str()),
        "fay_id" => Some(&*grant.holder),
        _ => None,
    };
    let args: Vec<String> = template
        .iter()
        .map(|a| expand(a, &value))
        .collect::<Option<_>>()
        .ok_or_else(|| OsError::Failed("bad placeholder".into()))?;
    if args.is_empty() {
        return Err(OsError::Failed("empty command".into()));
    }
    Ok(args)
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
            CommandTemplates::new(cfg(vec![])).unwrap_err(),
            CommandConfigError::Empty("grant")
        );
        assert!(matches!(
            CommandTemplates::new(cfg(vec!["echo".into(), "{resource}".into()])).unwrap_err(),
            CommandConfigError::BadPlaceholder { which: "grant", .. }
        ));
    }

    #[test]
    fn each_grant_expands_its_own_template() {
        let t = CommandTemplates::new(CommandAccessConfig {
            grant: vec!["g".into(), "{resource_id}:{access_mode}:{fay_id}".into()],
            revoke: vec!["r".into(), "{session_id}".into()],
            timeout_ms: 1_500,
        })
        .unwrap();
        assert_eq!(
            t.grant_argv(&grant()).unwrap(),
            ["g", "cam:write:{resource_id}"]
        );
        assert_eq!(
            t.revoke_argv(&grant()).unwrap(),
            ["r", "00000000-0000-0000-0000-000000000007"]
        );
        assert_eq!(t.timeout(), Duration::from_millis(1_500));
    }
}
