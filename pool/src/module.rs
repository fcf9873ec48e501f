//! Modules, their internal space, swaps, and stream contexts (SPEC MEM-3,
//! MEM-7, MEM-8).
//!
//! Owns the module and stream-context tables. A module (a codec, a crypto
//! backend, the IO driver) registers the internal bytes it may hold outside
//! pool buffers — windows, dictionaries, parser state, its libraries' own
//! allocations — and reports what it holds now; anything it cannot bound is
//! reported as external, which voids the region's ceiling claim. A swap
//! (replacing a module's program or state) is staged, so its swap-in space is
//! visible, and is refused as busy while the module has live work, leased
//! buffers or open contexts. A stream context allows at most one call in
//! flight. This module never touches buffer memory.

use crate::error::{BusyReason, HandleKind, PoolError, Resource};
use crate::handle::{ContextHandle, Key, ModuleHandle};
use crate::region::{Principal, Region};

/// What a module declares when it registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleSpec {
    /// SPEC MEM-3: the most module-internal bytes it will hold, charged
    /// against the region's module-internal budget.
    pub internal_bytes: u64,
    /// SPEC MEM-5: the alignment its ranges need (a power of two, at most
    /// 4096; 1 for plain bytes).
    pub alignment: u32,
}

impl ModuleSpec {
    /// A byte-aligned module reserving `internal_bytes`.
    pub const fn new(internal_bytes: u64) -> Self {
        Self {
            internal_bytes,
            alignment: 1,
        }
    }

    /// Sets the alignment the module's ranges need.
    pub const fn alignment(mut self, alignment: u32) -> Self {
        self.alignment = alignment;
        self
    }
}

/// SPEC MEM-3: one module's share of the region's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleReport {
    /// The module's current handle.
    pub handle: ModuleHandle,
    /// Module-internal bytes reserved in the budget.
    pub internal_reserved: u64,
    /// Module-internal bytes the module says it holds now.
    pub internal_used: u64,
    /// Bytes staged for a pending swap (swap-in space).
    pub swap_in: u64,
    /// Bytes it holds outside any budget (external/unmeasured).
    pub external: u64,
    /// Pool chunk bytes attributed to it (part of the backing, not added again).
    pub pool_bytes: u64,
    /// Admitted, unreclaimed requests.
    pub in_flight: u32,
    /// Open stream contexts.
    pub contexts: u32,
}

/// One registered module.
#[derive(Debug)]
pub(crate) struct Module {
    pub(crate) alignment: u32,
    pub(crate) internal_reserved: u64,
    pub(crate) internal_used: u64,
    pub(crate) staged: Option<u64>,
    pub(crate) external: u64,
    pub(crate) in_flight: u32,
    pub(crate) contexts: u32,
    pub(crate) buffers: u32,
    pub(crate) pool_bytes: u64,
}

/// One open stream context.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) owner: Principal,
    pub(crate) module: ModuleHandle,
    pub(crate) in_flight: Option<Key>,
}

impl Region {
    /// SPEC MEM-3: registers a module and reserves its internal bytes.
    pub fn register_module(&mut self, spec: ModuleSpec) -> Result<ModuleHandle, PoolError> {
        if !spec.alignment.is_power_of_two() || spec.alignment > 4096 {
            return Err(PoolError::InvalidRequest {
                reason: "module alignment must be a power of two up to 4096",
            });
        }
        self.modules
            .check_issue()
            .map_err(|e| e.into_pool_error(HandleKind::Module, Resource::ModuleSlots, 1))?;
        self.check_internal(spec.internal_bytes)?;
        let key = self
            .modules
            .insert(Module {
                alignment: spec.alignment,
                internal_reserved: spec.internal_bytes,
                internal_used: 0,
                staged: None,
                external: 0,
                in_flight: 0,
                contexts: 0,
                buffers: 0,
                pool_bytes: 0,
            })
            .map_err(|e| e.into_pool_error(HandleKind::Module, Resource::ModuleSlots, 1))?;
        self.module_internal_charged += spec.internal_bytes;
        Ok(ModuleHandle::from_parts(self.id, key.slot, key.generation))
    }

    /// SPEC MEM-8: unregisters a module; busy while it has work in flight,
    /// open contexts, or attributed buffers.
    pub fn unregister_module(&mut self, module: ModuleHandle) -> Result<(), PoolError> {
        let m = self.module(module)?;
        Self::require_idle(m)?;
        if m.buffers > 0 {
            return Err(PoolError::Busy {
                reason: BusyReason::ModuleBuffers,
            });
        }
        let Some(m) = self.modules.remove(module.key()) else {
            return Err(PoolError::StaleHandle {
                kind: HandleKind::Module,
            });
        };
        self.module_internal_charged -= m.internal_reserved + m.staged.unwrap_or(0);
        self.ledger.module_used -= m.internal_used;
        self.ledger.swap_in -= m.staged.unwrap_or(0);
        self.ledger.external_modules -= m.external;
        Ok(())
    }

    /// SPEC MEM-3: the module reports the internal bytes it holds now (codec
    /// windows, parser state, library allocations); at most its reservation.
    pub fn set_module_internal(
        &mut self,
        module: ModuleHandle,
        used: u64,
    ) -> Result<(), PoolError> {
        let reserved = self.module(module)?.internal_reserved;
        if used > reserved {
            return Err(PoolError::Limit {
                resource: Resource::ModuleInternalBytes,
                requested: used,
                limit: reserved,
            });
        }
        let m = self.module_mut(module)?;
        let old = core::mem::replace(&mut m.internal_used, used);
        self.ledger.module_used = self.ledger.module_used - old + used;
        self.touch();
        Ok(())
    }

    /// SPEC MEM-3: the module reports bytes it holds outside any budget
    /// (untracked host or library allocations). Any non-zero external figure
    /// voids the region's ceiling claim in [`Region::report`].
    pub fn set_module_external(
        &mut self,
        module: ModuleHandle,
        bytes: u64,
    ) -> Result<(), PoolError> {
        let m = self.module_mut(module)?;
        let old = core::mem::replace(&mut m.external, bytes);
        self.ledger.external_modules = self.ledger.external_modules - old + bytes;
        Ok(())
    }

    /// SPEC MEM-3: the runtime reports host/OS allocations of this region
    /// that no module owns (external/unmeasured).
    pub fn set_external(&mut self, bytes: u64) {
        self.ledger.external_region = bytes;
    }

    /// SPEC MEM-3: the runtime reports the process RSS it measured. It is
    /// shown beside the accounted figures, never added to them: reserved
    /// capacity is not RSS.
    pub fn observe_rss(&mut self, bytes: u64) {
        self.ledger.observed_rss = Some(bytes);
    }

    /// SPEC MEM-3/MEM-8: stages a swap: reserves `bytes` of swap-in space for
    /// the module's next program/state while the current one still exists.
    pub fn stage_swap(&mut self, module: ModuleHandle, bytes: u64) -> Result<(), PoolError> {
        if self.module(module)?.staged.is_some() {
            return Err(PoolError::Busy {
                reason: BusyReason::SwapStaged,
            });
        }
        self.check_internal(bytes)?;
        self.module_mut(module)?.staged = Some(bytes);
        self.module_internal_charged += bytes;
        self.ledger.swap_in += bytes;
        self.touch();
        Ok(())
    }

    /// Drops a staged swap and its swap-in space.
    pub fn abort_swap(&mut self, module: ModuleHandle) -> Result<(), PoolError> {
        let staged = self.module_mut(module)?.staged.take().unwrap_or(0);
        self.module_internal_charged -= staged;
        self.ledger.swap_in -= staged;
        Ok(())
    }

    /// SPEC MEM-8: completes a staged swap. Refused with [`PoolError::Busy`]
    /// while the module has requests in flight, open stream contexts, or
    /// leased buffers — drain and close first; nothing is forced. On success
    /// the old handle is stale, the staged space becomes the reservation and
    /// the old internal space is given back.
    pub fn commit_swap(&mut self, module: ModuleHandle) -> Result<ModuleHandle, PoolError> {
        let m = self.module(module)?;
        let Some(staged) = m.staged else {
            return Err(PoolError::InvalidRequest {
                reason: "no swap is staged for this module",
            });
        };
        Self::require_idle(m)?;
        let slot = module.slot();
        if self
            .buffers
            .iter()
            .any(|(_, b)| b.module_slot == Some(slot) && b.leased())
        {
            return Err(PoolError::Busy {
                reason: BusyReason::ModuleBuffers,
            });
        }
        let key = match self.modules.reissue(module.key()) {
            Some(Ok(key)) => key,
            Some(Err(())) => {
                return Err(PoolError::GenerationExhausted {
                    kind: HandleKind::Module,
                });
            }
            None => {
                return Err(PoolError::StaleHandle {
                    kind: HandleKind::Module,
                });
            }
        };
        let new = ModuleHandle::from_parts(self.id, key.slot, key.generation);
        let m = self.module_mut(new)?;
        let old_reserved = core::mem::replace(&mut m.internal_reserved, staged);
        let old_used = core::mem::replace(&mut m.internal_used, 0);
        m.staged = None;
        self.module_internal_charged -= old_reserved;
        self.ledger.module_used -= old_used;
        self.ledger.swap_in -= staged;
        Ok(new)
    }

    /// SPEC MEM-3: one module's share of the region's memory.
    pub fn module_report(&self, module: ModuleHandle) -> Result<ModuleReport, PoolError> {
        let m = self.module(module)?;
        Ok(ModuleReport {
            handle: module,
            internal_reserved: m.internal_reserved,
            internal_used: m.internal_used,
            swap_in: m.staged.unwrap_or(0),
            external: m.external,
            pool_bytes: m.pool_bytes,
            in_flight: m.in_flight,
            contexts: m.contexts,
        })
    }

    /// SPEC MEM-1/MEM-7: opens a stream context of `module` owned by `who`.
    pub fn open_context(
        &mut self,
        who: Principal,
        module: ModuleHandle,
    ) -> Result<ContextHandle, PoolError> {
        self.module(module)?;
        let key = self
            .contexts
            .insert(Context {
                owner: who,
                module,
                in_flight: None,
            })
            .map_err(|e| e.into_pool_error(HandleKind::Context, Resource::ContextSlots, 1))?;
        if let Some(m) = self.modules.get_mut_by_slot(module.slot()) {
            m.contexts += 1;
        }
        Ok(ContextHandle::from_parts(self.id, key.slot, key.generation))
    }

    /// SPEC MEM-7/MEM-8: closes a stream context; busy while its call is in
    /// flight (a context is never torn down under a backend).
    pub fn close_context(
        &mut self,
        who: Principal,
        context: ContextHandle,
    ) -> Result<(), PoolError> {
        let c = self.context(context)?;
        if c.owner != who {
            return Err(PoolError::NotOwner {
                kind: HandleKind::Context,
            });
        }
        if c.in_flight.is_some() {
            return Err(PoolError::Busy {
                reason: BusyReason::ContextInFlight,
            });
        }
        if let Some(c) = self.contexts.remove(context.key())
            && let Some(m) = self.modules.get_mut_by_slot(c.module.slot())
        {
            m.contexts -= 1;
        }
        Ok(())
    }

    // ---- helpers ----

    pub(crate) fn module(&self, module: ModuleHandle) -> Result<&Module, PoolError> {
        self.check_region(module.region(), ModuleHandle::KIND)?;
        self.modules
            .get(module.key())
            .ok_or(PoolError::StaleHandle {
                kind: ModuleHandle::KIND,
            })
    }

    fn module_mut(&mut self, module: ModuleHandle) -> Result<&mut Module, PoolError> {
        self.check_region(module.region(), ModuleHandle::KIND)?;
        self.modules
            .get_mut(module.key())
            .ok_or(PoolError::StaleHandle {
                kind: ModuleHandle::KIND,
            })
    }

    pub(crate) fn context(&self, context: ContextHandle) -> Result<&Context, PoolError> {
        self.check_region(context.region(), ContextHandle::KIND)?;
        self.contexts
            .get(context.key())
            .ok_or(PoolError::StaleHandle {
                kind: ContextHandle::KIND,
            })
    }

    fn require_idle(m: &Module) -> Result<(), PoolError> {
        if m.in_flight > 0 {
            Err(PoolError::Busy {
                reason: BusyReason::LiveWork,
            })
        } else if m.contexts > 0 {
            Err(PoolError::Busy {
                reason: BusyReason::OpenContexts,
            })
        } else {
            Ok(())
        }
    }

    /// Whether `bytes` more module-internal bytes fit the budget.
    fn check_internal(&self, bytes: u64) -> Result<(), PoolError> {
        let limit = self.config.module_internal_bytes;
        if bytes > limit {
            return Err(PoolError::Limit {
                resource: Resource::ModuleInternalBytes,
                requested: bytes,
                limit,
            });
        }
        if self.module_internal_charged > limit - bytes {
            return Err(PoolError::WouldBlock {
                resource: Resource::ModuleInternalBytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Class, RegionConfig};
    use crate::region::BufferSpec;

    const APP: Principal = Principal::new(1);

    fn region(internal: u64) -> Region {
        Region::new(RegionConfig {
            module_internal_bytes: internal,
            ..RegionConfig::new(64, 2)
        })
        .unwrap()
    }

    #[test]
    fn internal_reservations_respect_the_budget() {
        let mut r = region(100);
        assert!(matches!(
            r.register_module(ModuleSpec::new(101)),
            Err(PoolError::Limit {
                resource: Resource::ModuleInternalBytes,
                ..
            })
        ));
        let a = r.register_module(ModuleSpec::new(60)).unwrap();
        assert_eq!(
            r.register_module(ModuleSpec::new(41)),
            Err(PoolError::WouldBlock {
                resource: Resource::ModuleInternalBytes
            })
        );
        assert_eq!(
            r.stage_swap(a, 41),
            Err(PoolError::WouldBlock {
                resource: Resource::ModuleInternalBytes
            })
        );
        r.unregister_module(a).unwrap();
        r.register_module(ModuleSpec::new(100)).unwrap();
    }

    #[test]
    fn swap_makes_old_handle_stale_and_moves_reservation() {
        let mut r = region(100);
        let a = r.register_module(ModuleSpec::new(30)).unwrap();
        r.set_module_internal(a, 20).unwrap();
        assert!(matches!(
            r.commit_swap(a),
            Err(PoolError::InvalidRequest { .. })
        ));
        r.stage_swap(a, 50).unwrap();
        assert_eq!(
            r.stage_swap(a, 1),
            Err(PoolError::Busy {
                reason: BusyReason::SwapStaged
            })
        );
        assert_eq!(r.report().swap_in, 50);
        let b = r.commit_swap(a).unwrap();
        assert_eq!((b.slot(), b.generation()), (a.slot(), a.generation() + 1));
        assert!(matches!(
            r.module_report(a),
            Err(PoolError::StaleHandle { .. })
        ));
        let rep = r.module_report(b).unwrap();
        assert_eq!(
            (rep.internal_reserved, rep.internal_used, rep.swap_in),
            (50, 0, 0)
        );
        assert_eq!(r.report().module_internal_reserved, 50);
        r.register_module(ModuleSpec::new(50)).unwrap();
    }

    #[test]
    fn open_contexts_and_attributed_buffers_keep_a_module_busy() {
        let mut r = region(0);
        let m = r.register_module(ModuleSpec::new(0)).unwrap();
        let ctx = r.open_context(APP, m).unwrap();
        assert_eq!(
            r.unregister_module(m),
            Err(PoolError::Busy {
                reason: BusyReason::OpenContexts
            })
        );
        assert!(matches!(
            r.close_context(Principal::new(2), ctx),
            Err(PoolError::NotOwner { .. })
        ));
        r.close_context(APP, ctx).unwrap();
        let h = r
            .acquire(APP, BufferSpec::new(Class::StreamContext, 64).for_module(m))
            .unwrap();
        assert_eq!(r.module_report(m).unwrap().pool_bytes, 64);
        assert_eq!(r.report().module_pool_bytes, 64);
        assert_eq!(
            r.unregister_module(m),
            Err(PoolError::Busy {
                reason: BusyReason::ModuleBuffers
            })
        );
        let l = r.grant_lease(APP, h, APP, crate::LeaseMode::Read).unwrap();
        r.stage_swap(m, 0).unwrap();
        assert_eq!(
            r.commit_swap(m),
            Err(PoolError::Busy {
                reason: BusyReason::ModuleBuffers
            })
        );
        r.end_lease(l, APP).unwrap();
        let m2 = r.commit_swap(m).unwrap();
        r.release(APP, h).unwrap();
        assert_eq!(r.module_report(m2).unwrap().pool_bytes, 0);
        r.unregister_module(m2).unwrap();
        assert!(matches!(
            r.register_module(ModuleSpec::new(0).alignment(3)),
            Err(PoolError::InvalidRequest { .. })
        ));
    }
}
