//! Helpers shared by the pool's integration tests: a fake backend that
//! accesses submitted spans the way a kernel or worker would.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![allow(dead_code, reason = "each test file uses a different subset")]

use dtp_pool::{RawSpan, Submission};

/// Writes `data` at the start of a submission's output span, as a backend
/// would before posting its completion.
pub(crate) fn backend_write(submission: &Submission, data: &[u8]) {
    let out: RawSpan = submission.output.expect("request has an output");
    assert!(
        data.len() <= out.len() as usize,
        "backend must stay in its span"
    );
    // SAFETY: the region handed this output span to the backend at submit time;
    // until the completion is posted nothing else reads or writes it (the
    // buffer is write-leased), and `data.len() <= out.len()` keeps the write
    // inside the span.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out.as_mut_ptr(), data.len()) };
}

/// Reads a submission's whole input span, as a backend would.
pub(crate) fn backend_read(submission: &Submission) -> Vec<u8> {
    let inp: RawSpan = submission.input.expect("request has an input");
    let mut v = vec![0; inp.len() as usize];
    // SAFETY: the input span is read-leased to the request: nobody writes it
    // until the completion is reclaimed, and `v` has exactly its length.
    unsafe { std::ptr::copy_nonoverlapping(inp.as_ptr(), v.as_mut_ptr(), v.len()) };
    v
}
