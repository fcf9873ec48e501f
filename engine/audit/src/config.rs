//! How the writer syncs and rotates: plain data, chosen by the operator.

use std::num::{NonZeroU64, NonZeroUsize};

/// SPEC TS-12, HO-10: when the writer calls `fdatasync`. What each choice
/// keeps after a crash is in the crate docs ("Durability").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fsync {
    /// After every record, before `append` returns: the default for an audit log.
    #[default]
    EveryRecord,
    /// At most once per this many milliseconds of the caller's time: when an
    /// append or the writer's `handle_timeout` finds the oldest unsynced
    /// record this old, and on `flush()` and drop.
    Interval(u64),
    /// Only on an explicit `flush()`; otherwise the OS writes back when it likes.
    Never,
}

/// SPEC TS-12, HO-10: size-based rotation. Before a record would take the
/// current file past `max_bytes`, it is renamed `<name>.1` (older ones
/// shifting to `<name>.2` …), and only `<name>.1` … `<name>.<keep>` are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// The size a file may reach; a single larger record still gets a file of its own.
    pub max_bytes: NonZeroU64,
    /// How many rotated files to keep; at least one, so `seq` can always
    /// continue from `<name>.1` after a reopen.
    pub keep: NonZeroUsize,
}

/// SPEC TS-12, HO-10: how the audit writer (`dtp_gateway::plane::AuditLog`) behaves; the default syncs
/// every record and never rotates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditConfig {
    /// The durability policy.
    pub fsync: Fsync,
    /// Size-based rotation, off when `None`.
    pub rotation: Option<Rotation>,
}
