//! Leases: shared reads and exclusive writes of a whole buffer (SPEC MEM-6).
//!
//! Owns the lease table and the state rules of the spec's table:
//!
//! | buffer state            | allowed                                   | refused                          |
//! |-------------------------|-------------------------------------------|----------------------------------|
//! | owned, no lease         | owner reads, writes, transfers, releases  | out-of-range access              |
//! | ≥ 1 read lease          | lessees and owner read; more read leases  | write, transfer, reuse, release  |
//! | one exclusive write lease | that writer writes (and reads) in range | every other read/write/transfer/release |
//! | released                | slot reissued with a new generation       | every old handle                 |
//!
//! Leases cover the whole buffer (first version). Requests hold leases of
//! the same table on their input (read) and output (write); those are ended
//! only by reclaiming the request's completion, never by a lessee.

use crate::error::{BusyReason, HandleKind, PoolError, Resource};
use crate::handle::{BufferHandle, Key, LeaseHandle};
use crate::range::check_range;
use crate::region::{Principal, Region};

/// SPEC MEM-6: what a lease allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseMode {
    /// Shared read of the valid bytes; any number may coexist.
    Read,
    /// Exclusive write within the reserved capacity; no other lease coexists.
    Write,
}

/// Who holds a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// An application or module, which ends the lease itself.
    Principal(Principal),
    /// An admitted request; ended when its completion is reclaimed.
    Request,
}

/// One lease record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lease {
    pub(crate) buffer: Key,
    pub(crate) mode: LeaseMode,
    pub(crate) holder: Holder,
}

/// A snapshot of one lease, for callers and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The leased buffer.
    pub buffer: BufferHandle,
    /// Read or write.
    pub mode: LeaseMode,
    /// The lessee; `None` for a lease an admitted request holds on its input
    /// or output (ended only by reclaiming the request).
    pub holder: Option<Principal>,
}

impl Region {
    /// SPEC MEM-6: the owner lends the whole buffer to `to`.
    ///
    /// A read lease needs the absence of a write lease; a write lease needs
    /// the absence of every lease. Fails with [`PoolError::WouldBlock`] when
    /// lease slots are exhausted; the buffer is unchanged on every error.
    pub fn grant_lease(
        &mut self,
        who: Principal,
        handle: BufferHandle,
        to: Principal,
        mode: LeaseMode,
    ) -> Result<LeaseHandle, PoolError> {
        let b = self.owned(handle, who)?;
        match mode {
            LeaseMode::Read if b.write_leased => {
                return Err(PoolError::Busy {
                    reason: BusyReason::WriteLeased,
                });
            }
            LeaseMode::Read => {}
            LeaseMode::Write => b.require_unleased()?,
        }
        self.leases
            .check_issue()
            .map_err(|e| e.into_pool_error(HandleKind::Lease, Resource::LeaseSlots, 1))?;
        let key = self.attach_lease(handle.key(), mode, Holder::Principal(to))?;
        Ok(LeaseHandle::from_parts(self.id, key.slot, key.generation))
    }

    /// A snapshot of the lease.
    pub fn lease_info(&self, lease: LeaseHandle) -> Result<LeaseInfo, PoolError> {
        let l = self.lease(lease)?;
        Ok(LeaseInfo {
            buffer: self.buffer_handle(l.buffer),
            mode: l.mode,
            holder: match l.holder {
                Holder::Principal(p) => Some(p),
                Holder::Request => None,
            },
        })
    }

    /// SPEC MEM-5/MEM-6: the lessee `who` reads `length` bytes at `offset` of the leased buffer,
    /// within its valid length. Both lease modes may read.
    pub fn read_leased(
        &self,
        lease: LeaseHandle,
        who: Principal,
        offset: u32,
        length: u32,
    ) -> Result<&[u8], PoolError> {
        let l = self.held_lease(lease, who)?;
        let b = self.buffers.get(l.buffer).ok_or(PoolError::StaleHandle {
            kind: HandleKind::Buffer,
        })?;
        check_range(offset, length, b.valid, 1)?;
        self.bytes(b.chunk, offset, length)
    }

    /// SPEC MEM-5/MEM-6: the write lessee `who` writes `data` at `offset`,
    /// within the reserved capacity. The valid length does not change until
    /// [`Region::commit_leased`].
    pub fn write_leased(
        &mut self,
        lease: LeaseHandle,
        who: Principal,
        offset: u32,
        data: &[u8],
    ) -> Result<(), PoolError> {
        let l = *self.held_lease(lease, who)?;
        if l.mode != LeaseMode::Write {
            return Err(PoolError::WrongMode { held: l.mode });
        }
        self.write_bytes(l.buffer, offset, data)
    }

    /// SPEC MEM-5: the write lessee publishes `valid` bytes (a verified write
    /// completion): only growing, only over written bytes.
    pub fn commit_leased(
        &mut self,
        lease: LeaseHandle,
        who: Principal,
        valid: u32,
    ) -> Result<(), PoolError> {
        let l = *self.held_lease(lease, who)?;
        if l.mode != LeaseMode::Write {
            return Err(PoolError::WrongMode { held: l.mode });
        }
        self.publish(l.buffer, valid)
    }

    /// SPEC MEM-6: the lessee ends its lease. Bytes a write lessee wrote but
    /// did not commit stay unpublished.
    pub fn end_lease(&mut self, lease: LeaseHandle, who: Principal) -> Result<(), PoolError> {
        self.held_lease(lease, who)?;
        self.detach_lease(lease.key());
        Ok(())
    }

    // ---- helpers shared with the request module ----

    fn lease(&self, lease: LeaseHandle) -> Result<&Lease, PoolError> {
        self.check_region(lease.region(), LeaseHandle::KIND)?;
        self.leases.get(lease.key()).ok_or(PoolError::StaleHandle {
            kind: LeaseHandle::KIND,
        })
    }

    /// SPEC MEM-5: region, generation, then the requester's right to it.
    fn held_lease(&self, lease: LeaseHandle, who: Principal) -> Result<&Lease, PoolError> {
        let l = self.lease(lease)?;
        if l.holder != Holder::Principal(who) {
            return Err(PoolError::NotOwner {
                kind: HandleKind::Lease,
            });
        }
        Ok(l)
    }

    /// Records a lease whose admissibility the caller has checked, and
    /// updates the buffer's counters and the held-bytes figure (counted once
    /// per buffer however many readers share it, MEM-3).
    pub(crate) fn attach_lease(
        &mut self,
        buffer: Key,
        mode: LeaseMode,
        holder: Holder,
    ) -> Result<Key, PoolError> {
        let key = self
            .leases
            .insert(Lease {
                buffer,
                mode,
                holder,
            })
            .map_err(|e| e.into_pool_error(HandleKind::Lease, Resource::LeaseSlots, 1))?;
        let chunk_size = u64::from(self.backing.chunk_size());
        let Some(b) = self.buffers.get_mut(buffer) else {
            self.leases.remove(key);
            return Err(PoolError::StaleHandle {
                kind: HandleKind::Buffer,
            });
        };
        let was_leased = b.leased();
        match mode {
            LeaseMode::Read => b.read_leases += 1,
            LeaseMode::Write => b.write_leased = true,
        }
        if !was_leased {
            self.ledger.held_bytes += chunk_size;
        }
        self.touch();
        Ok(key)
    }

    /// Removes a lease and updates the buffer's counters.
    pub(crate) fn detach_lease(&mut self, key: Key) {
        let Some(l) = self.leases.remove(key) else {
            return;
        };
        let chunk_size = u64::from(self.backing.chunk_size());
        if let Some(b) = self.buffers.get_mut(l.buffer) {
            match l.mode {
                LeaseMode::Read => b.read_leases = b.read_leases.saturating_sub(1),
                LeaseMode::Write => b.write_leased = false,
            }
            if !b.leased() {
                self.ledger.held_bytes -= chunk_size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Class, RegionConfig};
    use crate::range::Range;
    use crate::region::BufferSpec;

    const OWNER: Principal = Principal::new(1);
    const READER: Principal = Principal::new(2);
    const WRITER: Principal = Principal::new(3);

    fn filled() -> (Region, BufferHandle) {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let h = r
            .acquire(OWNER, BufferSpec::new(Class::Scratch, 64))
            .unwrap();
        r.write(OWNER, h, 0, b"data").unwrap();
        r.commit(OWNER, h, 4).unwrap();
        (r, h)
    }

    #[test]
    fn read_leases_share_and_block_write_transfer_release() {
        let (mut r, h) = filled();
        let a = r.grant_lease(OWNER, h, READER, LeaseMode::Read).unwrap();
        let b = r.grant_lease(OWNER, h, WRITER, LeaseMode::Read).unwrap();
        assert_eq!(r.read_leased(a, READER, 0, 4).unwrap(), b"data");
        assert_eq!(r.read(OWNER, Range::new(h, 0, 4)).unwrap(), b"data");
        let busy = Err(PoolError::Busy {
            reason: BusyReason::ReadLeased,
        });
        assert_eq!(r.write(OWNER, h, 0, b"x"), busy);
        assert_eq!(r.transfer(OWNER, h, READER), busy);
        assert_eq!(r.release(OWNER, h), busy);
        assert_eq!(
            r.grant_lease(OWNER, h, WRITER, LeaseMode::Write)
                .map(|_| ()),
            busy
        );
        assert_eq!(r.buffer_info(h).unwrap().owner, OWNER, "ownership kept");
        r.end_lease(a, READER).unwrap();
        r.end_lease(b, WRITER).unwrap();
        r.release(OWNER, h).unwrap();
    }

    #[test]
    fn write_lease_is_exclusive_and_publishes_only_commits() {
        let (mut r, h) = filled();
        let w = r.grant_lease(OWNER, h, WRITER, LeaseMode::Write).unwrap();
        let busy = Err(PoolError::Busy {
            reason: BusyReason::WriteLeased,
        });
        assert_eq!(r.read(OWNER, Range::new(h, 0, 4)).map(|_| ()), busy);
        assert_eq!(
            r.grant_lease(OWNER, h, READER, LeaseMode::Read).map(|_| ()),
            busy
        );
        assert_eq!(r.release(OWNER, h), busy);
        r.write_leased(w, WRITER, 4, b"more").unwrap();
        r.write_leased(w, WRITER, 8, b"tail").unwrap();
        r.commit_leased(w, WRITER, 8).unwrap();
        r.end_lease(w, WRITER).unwrap();
        assert_eq!(r.read(OWNER, Range::new(h, 0, 8)).unwrap(), b"datamore");
        assert!(
            r.read(OWNER, Range::new(h, 0, 9)).is_err(),
            "uncommitted tail stays hidden"
        );
    }

    #[test]
    fn lease_rights_are_checked() {
        let (mut r, h) = filled();
        let a = r.grant_lease(OWNER, h, READER, LeaseMode::Read).unwrap();
        assert!(matches!(
            r.read_leased(a, WRITER, 0, 1),
            Err(PoolError::NotOwner { .. })
        ));
        assert_eq!(
            r.write_leased(a, READER, 0, b"x"),
            Err(PoolError::WrongMode {
                held: LeaseMode::Read
            })
        );
        assert!(
            r.grant_lease(READER, h, WRITER, LeaseMode::Read).is_err(),
            "only the owner lends"
        );
        r.end_lease(a, READER).unwrap();
        assert!(matches!(
            r.end_lease(a, READER),
            Err(PoolError::StaleHandle { .. })
        ));
    }
}
