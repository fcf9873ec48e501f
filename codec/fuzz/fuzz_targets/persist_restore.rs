//! Arbitrary bytes into the restorers of `dtp_proto`'s persisted forms
//! (SPEC SES-3: a stored suspended session is untrusted input; FRM-5's rule
//! — no input panics, every length bounded — applies to it too).
//!
//! Byte 0 chooses the machine (agreement snapshot, resume sender, resume
//! receiver, DAG, engine state) and the ceilings (default or tiny); the
//! rest is its persisted form. The oracles:
//! - nothing panics;
//! - what restores writes back exactly the bytes it was read from (the
//!   readers accept one encoding per value, and drop nothing they read).
//!
//! The whole `SuspendedSession` envelope (`dtp-engine`) is not fuzzed here:
//! it adds a magic, a checksum and the codec's own `decode_frame` (fuzzed
//! by `decode_frame`) around these parts, and this workspace stays free of
//! the engine's dependencies; its truncation and bit-flip tests are in
//! `engine/tests/dtp_persist.rs`.

#![no_main]

use std::time::{Duration, Instant};

use dtp_proto::agreement::{AgreementConfig, AgreementSnapshot};
use dtp_proto::dag::{DagConfig, DagManager};
use dtp_proto::fsm::EngineFsm;
use dtp_proto::persist::{PersistError, Reader, Writer};
use dtp_proto::resume::{AckPolicy, ResumeReceiver, ResumeSender, SenderConfig};
use libfuzzer_sys::fuzz_target;

fn tiny_agreements() -> AgreementConfig {
    AgreementConfig {
        max_active_agreements: 2,
        max_outstanding_requests: 1,
        max_pending_incoming: 1,
        max_queued_transmits: 4,
        max_queued_events: 4,
        max_terms: 2,
        request_timeout: Duration::from_secs(1),
    }
}

fn tiny_sender() -> SenderConfig {
    SenderConfig {
        max_fragments: 3,
        max_bytes: 64,
        low_water_fragments: 1,
        low_water_bytes: 32,
    }
}

fn tiny_dag() -> DagConfig {
    DagConfig {
        max_pending: 4,
        max_pending_bytes: 64,
        max_relations: 3,
        resolved_window: 4,
    }
}

/// Restores with `read`; on success, `write` must give back exactly the
/// bytes consumed.
fn check<T>(
    data: &[u8],
    read: impl Fn(&mut Reader<'_>) -> Result<T, PersistError>,
    write: impl Fn(&T, &mut Writer),
) {
    let mut r = Reader::new(data);
    if let Ok(value) = read(&mut r) {
        let used = r.offset();
        assert!(used <= data.len());
        let mut w = Writer::new();
        write(&value, &mut w);
        assert_eq!(w.as_slice(), &data[..used], "re-persisted bytes differ");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let tiny = selector & 0x80 != 0;
    let now = Instant::now();
    match selector & 0x07 {
        0 => {
            let config = if tiny {
                tiny_agreements()
            } else {
                AgreementConfig::default()
            };
            let max_string = if tiny { 8 } else { 4096 };
            check(
                rest,
                |r| AgreementSnapshot::restore_persisted(r, &config, max_string),
                |s, w| s.persist(w),
            );
        }
        1 => {
            let config = if tiny {
                tiny_sender()
            } else {
                SenderConfig::default()
            };
            check(
                rest,
                |r| {
                    ResumeSender::restore_persisted(r, config, |r, _, len| {
                        Ok(r.bytes("item", len)?.to_vec())
                    })
                },
                |s, w| s.persist(w, |item, w| w.bytes(item)),
            );
        }
        2 => check(
            rest,
            |r| ResumeReceiver::restore_persisted(r, AckPolicy::default(), now),
            |s, w| s.persist(w),
        ),
        3 => {
            let config = if tiny {
                tiny_dag()
            } else {
                DagConfig::default()
            };
            check(
                rest,
                |r| DagManager::restore_persisted(r, config, |r, _, _| r.u64("item")),
                |d, w| d.persist(w, |item, w| w.u64(*item)),
            );
        }
        _ => check(rest, EngineFsm::restore_persisted, |f, w| f.persist(w)),
    }
});
