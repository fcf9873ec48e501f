//! Realtime stream ledgers and the client subscription runtime (SPEC §4), sans-IO.
