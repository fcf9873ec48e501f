//! SPEC SEQ-4: agreement-id inheritance on a stream (FORMAT.md §5.3).
//!
//! A data frame may omit its agreement id; it then belongs to the agreement
//! named by the most recent data frame on the same stream of the same
//! connection that carried one. This module keeps that per-connection state,
//! bounded in the number of streams.

use std::collections::HashMap;

use crate::error::ErrorCode;
use crate::frame::AgreementId;

/// The per-connection map from stream to its current agreement.
///
/// Made anew for every connection (a resumed session starts empty, so the
/// first data frame on each stream after a reconnect names its agreement).
#[derive(Clone, Debug)]
pub struct AgreementContext {
    current: HashMap<u32, AgreementId>,
    max_streams: usize,
}

/// Why a data frame's agreement cannot be resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InheritError {
    /// The frame omits its agreement id and no earlier frame on its stream named one.
    NothingToInherit {
        /// The stream.
        stream_id: u32,
    },
    /// Naming an agreement on one more stream would exceed the bound.
    TooManyStreams {
        /// The bound.
        max: usize,
    },
}

impl InheritError {
    /// The code a receiver reports in its close frame.
    pub fn code(self) -> ErrorCode {
        match self {
            Self::NothingToInherit { .. } => ErrorCode::UNKNOWN_AGREEMENT,
            Self::TooManyStreams { .. } => ErrorCode::LIMIT_EXCEEDED,
        }
    }
}

impl std::fmt::Display for InheritError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NothingToInherit { stream_id } => write!(
                f,
                "data frame on stream {stream_id} omits its agreement id but no earlier frame on that stream named one"
            ),
            Self::TooManyStreams { max } => write!(f, "more than {max} streams carry agreements"),
        }
    }
}

impl std::error::Error for InheritError {}

impl AgreementContext {
    /// An empty context tracking at most `max_streams` streams.
    pub fn new(max_streams: usize) -> Self {
        Self {
            current: HashMap::new(),
            max_streams,
        }
    }

    /// SPEC SEQ-4: the agreement a data frame on `stream_id` belongs to.
    /// A frame that names its agreement makes it the stream's current one.
    pub fn resolve(
        &mut self,
        stream_id: u32,
        named: Option<AgreementId>,
    ) -> Result<AgreementId, InheritError> {
        match named {
            Some(id) => {
                if self.current.len() >= self.max_streams && !self.current.contains_key(&stream_id)
                {
                    return Err(InheritError::TooManyStreams {
                        max: self.max_streams,
                    });
                }
                self.current.insert(stream_id, id);
                Ok(id)
            }
            None => self
                .current
                .get(&stream_id)
                .copied()
                .ok_or(InheritError::NothingToInherit { stream_id }),
        }
    }

    /// Forgets an agreement that ended: frames that would inherit it are refused.
    pub fn forget(&mut self, agreement: AgreementId) {
        self.current.retain(|_, a| *a != agreement);
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn seq4_inherits_the_last_named_agreement_on_the_same_stream() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut ctx = AgreementContext::new(8);
        assert_eq!(
            ctx.resolve(1, None),
            Err(InheritError::NothingToInherit { stream_id: 1 })
        );
        assert_eq!(ctx.resolve(1, Some(a)), Ok(a));
        assert_eq!(ctx.resolve(1, None), Ok(a));
        assert_eq!(
            ctx.resolve(2, None),
            Err(InheritError::NothingToInherit { stream_id: 2 })
        );
        assert_eq!(ctx.resolve(2, Some(b)), Ok(b));
        assert_eq!(ctx.resolve(1, Some(b)), Ok(b));
        assert_eq!(ctx.resolve(1, None), Ok(b));
        ctx.forget(b);
        assert!(ctx.resolve(1, None).is_err());
        assert!(ctx.resolve(2, None).is_err());
    }

    #[test]
    fn the_number_of_streams_is_bounded() {
        let a = Uuid::from_u128(1);
        let mut ctx = AgreementContext::new(2);
        ctx.resolve(1, Some(a)).unwrap();
        ctx.resolve(2, Some(a)).unwrap();
        assert_eq!(
            ctx.resolve(3, Some(a)),
            Err(InheritError::TooManyStreams { max: 2 })
        );
        assert_eq!(
            ctx.resolve(3, Some(a)).unwrap_err().code(),
            ErrorCode::LIMIT_EXCEEDED
        );
        // An already tracked stream may switch agreements at the bound.
        assert_eq!(
            ctx.resolve(2, Some(Uuid::from_u128(9))),
            Ok(Uuid::from_u128(9))
        );
    }
}
