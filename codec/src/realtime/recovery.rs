//! How a stream recovers from a gap (SPEC RT-3, RT-6).

use std::fmt;
use std::str::FromStr;

/// A stream's registered recovery mode (SPEC RT-3): whether the server
/// issues replay cursors, and what a client does after a gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecoveryMode {
    /// Events carry a non-empty `resumeCursor`; a client resumes from it and
    /// the server replays what it retained (else `RESET_REQUIRED`).
    Cursor,
    /// No cursors (`resumeCursor: null`): a gap is healed by a snapshot.
    SnapshotOnly,
    /// No cursors (`resumeCursor: null`): a gap rebuilds the client session.
    SessionRebuild,
}

impl RecoveryMode {
    /// The wire spelling (`"CURSOR"`, `"SNAPSHOT_ONLY"`, `"SESSION_REBUILD"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cursor => "CURSOR",
            Self::SnapshotOnly => "SNAPSHOT_ONLY",
            Self::SessionRebuild => "SESSION_REBUILD",
        }
    }

    /// Whether events of this mode carry a resume cursor.
    pub const fn has_cursor(self) -> bool {
        matches!(self, Self::Cursor)
    }
}

impl fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A recovery mode spelled otherwise than on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownRecoveryMode;

impl fmt::Display for UnknownRecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown recovery mode")
    }
}

impl std::error::Error for UnknownRecoveryMode {}

impl FromStr for RecoveryMode {
    type Err = UnknownRecoveryMode;

    /// Exact wire spelling only (fail closed, SPEC RT-3).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "CURSOR" => Ok(Self::Cursor),
            "SNAPSHOT_ONLY" => Ok(Self::SnapshotOnly),
            "SESSION_REBUILD" => Ok(Self::SessionRebuild),
            _ => Err(UnknownRecoveryMode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_round_trips_and_is_exact() {
        for m in [
            RecoveryMode::Cursor,
            RecoveryMode::SnapshotOnly,
            RecoveryMode::SessionRebuild,
        ] {
            assert_eq!(m.as_str().parse::<RecoveryMode>(), Ok(m));
        }
        assert_eq!("cursor".parse::<RecoveryMode>(), Err(UnknownRecoveryMode));
        assert_eq!(" CURSOR".parse::<RecoveryMode>(), Err(UnknownRecoveryMode));
        assert!(RecoveryMode::Cursor.has_cursor());
        assert!(!RecoveryMode::SnapshotOnly.has_cursor());
    }
}
