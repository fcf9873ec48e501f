//! Web Push (SPEC RT-12), sans-IO.
