//! Ranges inside buffers and their overflow-free checks (SPEC MEM-5).
//!
//! Owns the arithmetic of `(handle, offset, length)`: the bound check in the
//! order the spec fixes and the alignment check. It knows nothing about
//! owners or leases; the region decides which bound applies (valid length for
//! reads, reserved capacity for writes) before calling in here.

use crate::error::PoolError;
use crate::handle::BufferHandle;

/// SPEC MEM-5: a range is `(handle, offset: u32, length: u32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Range {
    /// The buffer.
    pub handle: BufferHandle,
    /// Start of the range inside the buffer.
    pub offset: u32,
    /// Length of the range in bytes.
    pub length: u32,
}

impl Range {
    /// A range of `length` bytes at `offset` of `handle`.
    pub const fn new(handle: BufferHandle, offset: u32, length: u32) -> Self {
        Self {
            handle,
            offset,
            length,
        }
    }
}

/// SPEC MEM-5: checks `offset <= bound` first and then
/// `length <= bound - offset`, so no addition can overflow; then that
/// `offset` is a multiple of `align` (1 for plain bytes).
///
/// `align` must be a power of two; anything else is refused as misaligned.
pub fn check_range(offset: u32, length: u32, bound: u32, align: u32) -> Result<(), PoolError> {
    if offset > bound || length > bound - offset {
        return Err(PoolError::OutOfRange {
            offset,
            length,
            bound,
        });
    }
    if !align.is_power_of_two() || offset & (align - 1) != 0 {
        return Err(PoolError::Misaligned { offset, align });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_is_checked_without_overflow() {
        assert!(check_range(0, 0, 0, 1).is_ok());
        assert!(check_range(10, 0, 10, 1).is_ok());
        assert!(check_range(4, 6, 10, 1).is_ok());
        assert!(check_range(4, 7, 10, 1).is_err());
        assert!(check_range(11, 0, 10, 1).is_err());
        // offset + length would wrap a u32: still refused.
        assert!(check_range(u32::MAX, u32::MAX, u32::MAX, 1).is_err());
        assert!(check_range(1, u32::MAX, u32::MAX, 1).is_err());
        assert!(check_range(0, u32::MAX, u32::MAX, 1).is_ok());
    }

    #[test]
    fn alignment_default_one_and_powers_of_two() {
        assert!(check_range(3, 1, 10, 1).is_ok());
        assert_eq!(
            check_range(3, 1, 10, 4),
            Err(PoolError::Misaligned {
                offset: 3,
                align: 4
            })
        );
        assert!(check_range(8, 1, 10, 4).is_ok());
        assert!(check_range(0, 1, 10, 0).is_err());
        assert!(check_range(0, 1, 10, 3).is_err());
    }
}
