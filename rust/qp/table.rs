// SPDX-License-Identifier: GPL-2.0
//! QP numbers to QPs, for the iw_cm's `iw_get_qp`.

use super::*;

/// QP numbers to QPs, for the iw_cm's `iw_get_qp`.
///
/// Every Rust `XArray` shares one lockdep class (they are initialised at
/// one C call site), and the STag table's is taken from softirq under an
/// irq-safe lock: so this one is too, with atomic allocation, to keep the
/// class's usage consistent.
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    pub(super) lock: SpinLockIrq<()>,
    #[pin]
    pub(super) xa: kernel::xarray::XArray<Arc<Qp>>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(QpTable {
            lock <- new_spinlock_irq!((), "rsiw_qp_table"),
            xa <- kernel::xarray::XArray::new(kernel::xarray::AllocKind::Alloc),
        })
    }

    pub(crate) fn insert(&self, qpn: u32, qp: Arc<Qp>) -> Result {
        let _irq = self.lock.lock();
        let mut xa = self.xa.lock();
        if xa.get(qpn as usize).is_some() {
            return Err(EBUSY);
        }
        xa.store(qpn as usize, qp, GFP_ATOMIC).map_err(|_| ENOMEM)?;
        Ok(())
    }

    // The XArray guard is a named local declared after `_irq` so that it
    // drops first: a temporary in a block's tail expression would outlive
    // `_irq` (edition 2021), releasing the irq-safe lock, and re-enabling
    // interrupts, with the XArray lock still held (lockdep caught it).

    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<Qp>> {
        let _irq = self.lock.lock();
        let xa = self.xa.lock();
        let qp = xa.get(qpn as usize).map(Arc::from);
        drop(xa);
        qp
    }

    pub(crate) fn remove(&self, qpn: u32) -> Option<Arc<Qp>> {
        let _irq = self.lock.lock();
        let mut xa = self.xa.lock();
        let removed = xa.remove(qpn as usize);
        drop(xa);
        drop(_irq);
        // The last reference may go here: outside the locks.
        removed
    }
}
