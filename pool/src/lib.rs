//! Per-core budgeted memory (SPEC §5). Being written.
