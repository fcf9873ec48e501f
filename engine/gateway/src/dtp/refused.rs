//! Refused CAP handshakes, counted by code for the gateway's `/metrics`
//! (`dtp_cap_refused_total{code="2005"}`): how an operator sees that Fays
//! are being turned away — a revoked credential, an untrusted issuer, a
//! wrong key — without reading logs.
//!
//! **Owns**: one process-wide counter per CAP code (2001–2006). A process
//! runs one gateway, and the exporter reads these without any wiring
//! through the shards; the counters only ever grow. **Never touches**:
//! the handshake (`cap.rs`), the log line (the gateway writes it), key
//! material (a code is all that is kept).

use std::sync::atomic::{AtomicU64, Ordering};

use dtp_codec::ErrorCode;

/// The codes a terminal refuses a handshake with (CAP_FAILED … UNKNOWN_ISSUER).
const FIRST: u16 = ErrorCode::CAP_FAILED.0;
const COUNT: usize = (ErrorCode::UNKNOWN_ISSUER.0 - FIRST + 1) as usize;

/// Refused handshakes by code (see the module docs).
#[derive(Debug)]
pub struct CapRefusals {
    counts: [AtomicU64; COUNT],
}

static CAP_REFUSALS: CapRefusals = CapRefusals {
    counts: [const { AtomicU64::new(0) }; COUNT],
};

/// This process's refused-handshake counters.
pub fn cap_refusals() -> &'static CapRefusals {
    &CAP_REFUSALS
}

impl CapRefusals {
    /// Counts one handshake refused with `code` (a code outside the CAP
    /// range counts as CAP_FAILED: the handshake failed all the same).
    pub fn record(&self, code: ErrorCode) {
        let i = code
            .0
            .checked_sub(FIRST)
            .map(usize::from)
            .filter(|&i| i < COUNT)
            .unwrap_or(0);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Every CAP code and how many handshakes it refused so far.
    pub fn snapshot(&self) -> Vec<(ErrorCode, u64)> {
        self.counts
            .iter()
            .zip(FIRST..)
            .map(|(n, code)| (ErrorCode(code), n.load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_count_under_their_code() {
        let r = CapRefusals {
            counts: [const { AtomicU64::new(0) }; COUNT],
        };
        r.record(ErrorCode::CREDENTIAL_REVOKED);
        r.record(ErrorCode::CREDENTIAL_REVOKED);
        r.record(ErrorCode::INTERNAL);
        let s = r.snapshot();
        assert_eq!(s.len(), 6);
        assert_eq!(s[0], (ErrorCode::CAP_FAILED, 1));
        assert_eq!(s[4], (ErrorCode::CREDENTIAL_REVOKED, 2));
        assert_eq!(s[5], (ErrorCode::UNKNOWN_ISSUER, 0));
    }
}
