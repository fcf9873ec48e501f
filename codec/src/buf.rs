//! [`FrameBuf`]: one received frame's bytes, owned and mutable, for layers
//! that transform a frame in place (decryption) and then hand slices of it
//! on without a copy.

use std::ops::DerefMut;

use bytes::{Bytes, BytesMut};

/// One frame's wire bytes, exclusively owned: readable and writable in
/// place, then frozen into shared [`Bytes`] whose slices outlive the
/// buffer (a payload handed to an application).
///
/// Implemented by [`BytesMut`] (an assembly buffer in memory) and by the
/// transports' receive buffers (a frame still in the pool chunk the kernel
/// received it into: SPEC ENC-2's decryption in place, no copy).
pub trait FrameBuf: DerefMut<Target = [u8]> {
    /// Gives up exclusive access: the same memory as shared bytes.
    fn freeze(self) -> Bytes;
}

impl FrameBuf for BytesMut {
    fn freeze(self) -> Bytes {
        BytesMut::freeze(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_mut_is_modified_in_place_and_frozen_without_a_copy() {
        let mut b = BytesMut::from(&b"abc"[..]);
        let before = b.as_ptr();
        b[0] = b'x';
        let frozen = FrameBuf::freeze(b);
        assert_eq!(&frozen[..], b"xbc");
        assert_eq!(frozen.as_ptr(), before);
    }
}
