// SPDX-License-Identifier: GPL-2.0
//! The registry of live connection endpoints (ceps), by id.

use super::*;

// ---- registry -----------------------------------------------------------

/// Every live listener and cep, for lookups by id (`provider_data`) and
/// for teardown. Module-global, behind [`lock`].
pub(crate) struct Registry {
    pub(super) ceps: KVec<Arc<Cep>>,
    pub(super) listeners: KVec<Arc<Listener>>,
    /// Loopback sockets of wildcard listeners (`crate::cm::wildcard`).
    pub(crate) catchers: KVec<Arc<crate::cm::wildcard::Catcher>>,
}

impl Registry {
    pub(crate) const fn new() -> Self {
        Self {
            ceps: KVec::new(),
            listeners: KVec::new(),
            catchers: KVec::new(),
        }
    }
}

crate::ffi::runtime::global_mutex! {
    pub(crate) mod lock: Registry = Registry::new();
}

pub(crate) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn find_cep(id: u64) -> Option<Arc<Cep>> {
    lock::with(|r| r.ceps.iter().find(|c| c.id == id).cloned())
        .ok()
        .flatten()
}

pub(crate) fn unregister_cep(id: u64) {
    let _ = lock::with(|r| r.ceps.retain(|c| c.id != id));
}

#[cfg(rsiw_kunit)]
/// Live ceps (tests: nothing leaks).
pub(crate) fn live_ceps() -> usize {
    lock::with(|r| r.ceps.len()).unwrap_or(0)
}

/// Module teardown: closes every listener and every cep still in the CM
/// (connections in negotiation are reported failed to `iw_cm`).
pub(crate) fn shutdown() {
    let taken = lock::with(|r| {
        (
            core::mem::take(&mut r.listeners),
            core::mem::take(&mut r.ceps),
            core::mem::take(&mut r.catchers),
        )
    });
    if let Ok((listeners, ceps, catchers)) = taken {
        crate::cm::wildcard::shutdown(catchers);
        for l in listeners.iter() {
            l.close();
        }
        for c in ceps.iter() {
            c.close(Some(-(ECONNRESET.to_errno().abs())));
        }
    }
}
