// SPDX-License-Identifier: GPL-2.0
//! The iw_cm provider: rsiw's implementation of the RDMA core's iw_cm
//! trait over the CM above (listen, connect, accept, reject), the held
//! `iw_cm_id` as an event target, and the CM's module-lifetime state.

use kernel::{prelude::*, sync::Arc};

use super::{CmConfig, CmEvent, CmEventTarget, CmQp, ConnParams};
use crate::{
    device::{Device, IbDevice, Rsiw},
    ffi::{
        ib::{CmId, IwCmOps},
        net::socket::{ListenOpts, Net, SockAddr},
        runtime::Workqueues,
    },
};

impl CmEventTarget for CmId {
    fn deliver(&self, ev: &CmEvent<'_>) -> Result {
        CmId::deliver(self, ev)
    }
}

/// An `iw_cm_id` as the CM's event target.
fn target(id: CmId) -> Result<Arc<dyn CmEventTarget>> {
    Ok(Arc::new(id, GFP_ATOMIC)?)
}

/// The CM settings of a device: its limits, then its tuning.
fn config(dev: &Device) -> CmConfig {
    let cfg = CmConfig {
        counters: Some(dev.counters().clone()),
        ..CmConfig::for_device(&dev.attrs().limits)
    };
    dev.cm_tuning().apply(cfg)
}

/// The QP `qpn` of `dev` as the CM's hand-off target (the device's QP
/// table, as `iw_get_qp` sees it), if the caller of the connect or accept
/// `id` came with owns it: `EINVAL` for no such QP, `EACCES` for another
/// process's QP or, from a process, a kernel ULP's (QP numbers are
/// sequential, so any QP in INIT/RTR could be taken over by number).
fn find_qp(dev: &Device, qpn: u32, id: &CmId) -> Result<Arc<dyn CmQp>> {
    let qp: Arc<crate::qp::Qp> = dev.qps().get(qpn).ok_or(EINVAL)?;
    if !id.caller_owns(qp.links()) {
        return Err(EACCES);
    }
    // The connection grants the peer RDMA Write and Read, as the iw_cm's
    // own QP attributes say (`iw_cm_init_qp_attr`) and as iWARP RNICs
    // enable them when they connect: rdma_cm moves a QP to INIT with no
    // remote rights before the iw_cm is involved, and a process's QP gets
    // no later `IB_QP_ACCESS_FLAGS`. A consumer restricts them after.
    qp.grant_connection_rights();
    Ok(qp)
}

#[vtable]
impl IwCmOps for Rsiw {
    fn create_listen(
        dev: &IbDevice,
        addr: SockAddr,
        backlog: i32,
        v6only: bool,
        id: CmId,
    ) -> Result<usize> {
        let nd = dev.netdev().ok_or(ENODEV)?;
        let opts = ListenOpts {
            // A wildcard listener of this device hears this device only.
            bound_dev_if: addr.is_wildcard().then(|| nd.ifindex()),
            v6only,
        };
        let lid = super::listen(
            Net::of(&nd),
            addr,
            backlog,
            opts,
            config(dev.data()),
            target(id)?,
        )?;
        Ok(lid as usize)
    }

    fn destroy_listen(listener: usize) {
        super::destroy_listener(listener as u64);
    }

    fn connect(
        dev: &IbDevice,
        local: SockAddr,
        remote: SockAddr,
        params: &ConnParams<'_>,
        qpn: u32,
        id: CmId,
    ) -> Result {
        let nd = dev.netdev().ok_or(ENODEV)?;
        let qp = find_qp(dev.data(), qpn, &id)?;
        super::connect(
            Net::of(&nd),
            local,
            remote,
            config(dev.data()),
            params,
            qp,
            target(id)?,
        )?;
        Ok(())
    }

    fn accept(
        dev: &IbDevice,
        conn: usize,
        params: &ConnParams<'_>,
        qpn: u32,
        id: Result<CmId>,
    ) -> Result {
        let cep = conn as u64;
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                super::abort(cep);
                return Err(e);
            }
        };
        let qp = match find_qp(dev.data(), qpn, &id) {
            Ok(qp) => qp,
            Err(e) => {
                super::abort(cep);
                return Err(e);
            }
        };
        let t = match target(id) {
            Ok(t) => t,
            Err(e) => {
                super::abort(cep);
                return Err(e);
            }
        };
        super::accept(cep, params, &*qp, t)
    }

    fn reject(conn: usize, private_data: &[u8]) -> Result {
        super::reject(conn as u64, private_data)
    }
}

/// The CM's module-lifetime state: its registry and the workqueues (the
/// CM's and the QPs' transmit work). Dropped at module unload after every
/// device is gone (so after every QP, whose teardown waits for its TX
/// work): closes what is left in the CM, then the workqueues go.
pub(crate) struct Runtime {
    _queues: Workqueues,
}

impl Runtime {
    pub(crate) fn new() -> Result<Self> {
        super::registry::lock::init();
        Ok(Self {
            _queues: Workqueues::new()?,
        })
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Sockets unhooked and timers cancelled: nothing queues work after
        // this (the work items of closed ceps/listeners return at once).
        super::shutdown();
    }
}
