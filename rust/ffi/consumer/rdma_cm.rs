// SPDX-License-Identifier: GPL-2.0
//! rdma_cm as a kernel ULP uses it, for the end-to-end self-tests: ids with
//! an event queue a test waits on, QPs created through `rdma_create_qp`,
//! and device-neutral PDs, CQs, MRs and work requests (the same code drives
//! an rsiw device and Linux siw).

use core::{
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    error::to_result,
    ffi::{c_int, c_void},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    time::{delay::fsleep, Delta},
};

use crate::ffi::{ib::Driver, net::socket::SockAddr, sys};

// ---- events ---------------------------------------------------------

pub(crate) const ADDR_RESOLVED: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED;
pub(crate) const ROUTE_RESOLVED: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED;
pub(crate) const CONNECT_REQUEST: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST;
pub(crate) const REJECTED: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED;
pub(crate) const ESTABLISHED: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED;
pub(crate) const DISCONNECTED: u32 = sys::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED;

/// One rdma_cm event as the handler saw it.
pub(crate) struct CmEv {
    pub(crate) event: u32,
    pub(crate) status: i32,
    pub(crate) private_data: KVec<u8>,
    /// `param.conn.initiator_depth` / `responder_resources`.
    pub(crate) initiator_depth: u8,
    pub(crate) responder_resources: u8,
    /// CONNECT_REQUEST: the new id (events for it go to its own queue).
    pub(crate) conn: Option<CmId>,
}

/// Events of one id, in order.
#[pin_data]
pub(crate) struct EventQueue {
    #[pin]
    evs: Mutex<KVec<CmEv>>,
}

impl EventQueue {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(EventQueue { evs <- new_mutex!(KVec::new()) }),
            GFP_KERNEL,
        )
    }

    /// Takes the oldest event, waiting up to `ms` for one.
    pub(crate) fn next(&self, ms: u32) -> Option<CmEv> {
        for _ in 0..=ms {
            {
                let mut g = self.evs.lock();
                if !g.is_empty() {
                    return g.remove(0).ok();
                }
            }
            fsleep(Delta::from_millis(1));
        }
        None
    }

    /// The next event, which must be `event` (else an error, logged).
    pub(crate) fn expect(&self, event: u32, ms: u32) -> Result<CmEv> {
        match self.next(ms) {
            Some(e) if e.event == event => Ok(e),
            Some(e) => {
                pr_err!(
                    "rsiw kunit: rdma_cm event {} (status {}), expected {}\n",
                    e.event,
                    e.status,
                    event
                );
                Err(EPROTO)
            }
            None => {
                pr_err!("rsiw kunit: no rdma_cm event {} within {} ms\n", event, ms);
                Err(ETIMEDOUT)
            }
        }
    }
}

/// The handler every test id has; `context` is an `Arc<EventQueue>`
/// (`Arc::into_raw`), owned by the id's [`CmId`].
///
/// # Safety
///
/// Only rdma_cm calls this, as the event handler of the ids this file
/// creates, with a live id and event and `context` as set at creation.
unsafe extern "C" fn on_event(id: *mut sys::rdma_cm_id, ev: *mut sys::rdma_cm_event) -> c_int {
    // SAFETY: rdma_cm calls this with a live id and event, in process
    // context, under the id's handler mutex; `context` is a queue that
    // lives until the id is destroyed.
    let (q, ev) = unsafe { (&*(*id).context.cast::<EventQueue>(), &*ev) };
    // SAFETY: the conn member is the one rdma_cm fills for connection
    // events; for others it is zeroed or unused (we copy plain bytes).
    let conn = unsafe { ev.param.conn };
    let mut private_data = KVec::new();
    if !conn.private_data.is_null() && conn.private_data_len > 0 {
        // SAFETY: rdma_cm's contract: `private_data_len` readable bytes.
        let pd = unsafe {
            core::slice::from_raw_parts(
                conn.private_data.cast::<u8>(),
                usize::from(conn.private_data_len),
            )
        };
        let _ = private_data.extend_from_slice(pd, GFP_KERNEL);
    }
    // Room first: once a new id is adopted, nothing may fail.
    let mut g = q.evs.lock();
    if g.reserve(1, GFP_KERNEL).is_err() {
        // Non-zero: rdma_cm destroys a new id; others just lose this.
        return ENOMEM.to_errno();
    }
    let mut new = None;
    if ev.event == CONNECT_REQUEST {
        // A new id with the listener's context: give it its own queue
        // now, before any other event of it can run (we hold its
        // handler mutex).
        let Ok(nq) = EventQueue::new() else {
            return ENOMEM.to_errno();
        };
        let raw = Arc::into_raw(nq);
        // SAFETY: the new id is ours from here; its queue is released
        // by the `CmId` drop.
        unsafe { (*id).context = raw.cast_mut().cast() };
        new = Some(CmId { id, queue: raw });
    }
    let e = CmEv {
        event: ev.event,
        status: ev.status,
        private_data,
        initiator_depth: conn.initiator_depth,
        responder_resources: conn.responder_resources,
        conn: new,
    };
    // Cannot fail: room was reserved.
    let _ = g.push(e, GFP_KERNEL);
    0
}

// ---- ids --------------------------------------------------------------

/// An `rdma_cm_id` (TCP port space, RC) with its event queue; its QP,
/// if created, is destroyed with it.
pub(crate) struct CmId {
    id: *mut sys::rdma_cm_id,
    queue: *const EventQueue,
}

// SAFETY: rdma_cm ids may be used from any process context.
unsafe impl Send for CmId {}
// SAFETY: as above; the queue is `Sync`.
unsafe impl Sync for CmId {}

fn errp<T>(p: *mut T) -> Result<*mut T> {
    if p.is_null() {
        Err(ENOMEM)
    } else if (p as usize) > usize::MAX - 4095 {
        Err(Error::from_errno(p as isize as c_int))
    } else {
        Ok(p)
    }
}

impl CmId {
    /// `rdma_create_id(&init_net, ..., RDMA_PS_TCP, IB_QPT_RC)`.
    pub(crate) fn new() -> Result<Self> {
        let q = Arc::into_raw(EventQueue::new()?);
        // SAFETY: `init_net` is static; the handler and its context
        // live until `rdma_destroy_id` returns (drop).
        let id = unsafe {
            sys::rsiw_rdma_create_id(&raw mut sys::init_net, Some(on_event), q.cast_mut().cast())
        };
        match errp(id) {
            Ok(id) => Ok(Self { id, queue: q }),
            Err(e) => {
                // SAFETY: from `Arc::into_raw` above, not used by anyone.
                drop(unsafe { Arc::from_raw(q) });
                Err(e)
            }
        }
    }

    pub(crate) fn events(&self) -> &EventQueue {
        // SAFETY: the queue lives as long as `self`.
        unsafe { &*self.queue }
    }

    /// The RDMA device the id is bound to (null before).
    pub(crate) fn device(&self) -> *mut sys::ib_device {
        // SAFETY: the id is alive.
        unsafe { (*self.id).device }
    }

    pub(crate) fn qp(&self) -> QpRef {
        // SAFETY: the id is alive.
        QpRef(unsafe { (*self.id).qp })
    }

    pub(crate) fn bind(&self, addr: SockAddr) -> Result {
        let (mut raw, _) = addr.to_raw();
        // SAFETY: the id is alive; the address is copied.
        to_result(unsafe { sys::rdma_bind_addr(self.id, (&raw mut raw).cast()) })
    }

    /// `rdma_set_afonly` (before bind).
    pub(crate) fn set_afonly(&self, on: bool) -> Result {
        // SAFETY: the id is alive.
        to_result(unsafe { sys::rdma_set_afonly(self.id, c_int::from(on)) })
    }

    pub(crate) fn listen(&self, backlog: i32) -> Result {
        // SAFETY: the id is alive.
        to_result(unsafe { sys::rdma_listen(self.id, backlog) })
    }

    /// The local address (after bind/listen: the port chosen).
    pub(crate) fn local_addr(&self) -> Option<SockAddr> {
        // SAFETY: the id is alive; `src_addr` is a sockaddr_storage.
        unsafe { SockAddr::from_raw((&raw const (*self.id).route.addr.src_addr).cast()) }
    }

    /// The peer's address (after resolve; a CONNECT_REQUEST's id: where
    /// the request came from).
    pub(crate) fn remote_addr(&self) -> Option<SockAddr> {
        // SAFETY: the id is alive; `dst_addr` is a sockaddr_storage.
        unsafe { SockAddr::from_raw((&raw const (*self.id).route.addr.dst_addr).cast()) }
    }

    /// `rdma_resolve_addr` + ADDR_RESOLVED, `rdma_resolve_route` +
    /// ROUTE_RESOLVED.
    pub(crate) fn resolve(&self, src: Option<SockAddr>, dst: SockAddr, ms: u32) -> Result {
        let mut s = src.map(|a| a.to_raw().0);
        let (d, _) = dst.to_raw();
        let sp = s
            .as_mut()
            .map_or(ptr::null_mut(), |s| ptr::from_mut(s).cast());
        // SAFETY: the id is alive; the addresses are copied.
        to_result(unsafe {
            sys::rdma_resolve_addr(self.id, sp, (&raw const d).cast(), ms as usize)
        })?;
        self.events().expect(ADDR_RESOLVED, ms + 1000)?;
        // SAFETY: as above.
        to_result(unsafe { sys::rdma_resolve_route(self.id, ms as usize) })?;
        self.events().expect(ROUTE_RESOLVED, ms + 1000)?;
        Ok(())
    }

    /// `rdma_create_qp` on `pd` with `scq`/`rcq`; QP events counted in
    /// `qp_events`.
    pub(crate) fn create_qp(
        &self,
        pd: &Pd,
        scq: &Cq,
        rcq: &Cq,
        wr: u32,
        qp_events: &QpEvents,
    ) -> Result {
        let mut attr = sys::ib_qp_init_attr {
            event_handler: Some(on_qp_event),
            qp_context: ptr::from_ref(qp_events).cast_mut().cast(),
            send_cq: scq.0,
            recv_cq: rcq.0,
            cap: sys::ib_qp_cap {
                max_send_wr: wr,
                max_recv_wr: wr,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
                ..Default::default()
            },
            qp_type: sys::ib_qp_type_IB_QPT_RC,
            sq_sig_type: sys::ib_sig_type_IB_SIGNAL_REQ_WR,
            ..Default::default()
        };
        // SAFETY: id, PD and CQs alive; `qp_events` outlives the QP
        // (the caller's contract, kept by `CmPair`'s field order).
        to_result(unsafe { sys::rdma_create_qp(self.id, pd.0, &mut attr) })
    }

    fn conn_param(pd: &[u8], rr: u8, id: u8) -> sys::rdma_conn_param {
        sys::rdma_conn_param {
            private_data: pd.as_ptr().cast(),
            private_data_len: pd.len().min(255) as u8,
            responder_resources: rr,
            initiator_depth: id,
            retry_count: 7,
            rnr_retry_count: 7,
            ..Default::default()
        }
    }

    /// `rdma_connect` with private data and (responder_resources,
    /// initiator_depth).
    pub(crate) fn connect(&self, pd: &[u8], rr: u8, id: u8) -> Result {
        let mut p = Self::conn_param(pd, rr, id);
        // SAFETY: the id is alive; the parameters are copied.
        to_result(unsafe { sys::rdma_connect(self.id, &mut p) })
    }

    /// `rdma_accept` (with the handler lock, as outside a handler).
    pub(crate) fn accept(&self, pd: &[u8], rr: u8, id: u8) -> Result {
        let mut p = Self::conn_param(pd, rr, id);
        // SAFETY: the id is alive; rdma_accept wants the handler mutex.
        to_result(unsafe {
            sys::rdma_lock_handler(self.id);
            let r = sys::rdma_accept(self.id, &mut p);
            sys::rdma_unlock_handler(self.id);
            r
        })
    }

    pub(crate) fn reject(&self, pd: &[u8]) -> Result {
        // SAFETY: the id is alive; the data is copied.
        to_result(unsafe {
            sys::rdma_lock_handler(self.id);
            let r = sys::rdma_reject(self.id, pd.as_ptr().cast(), pd.len().min(255) as u8, 0);
            sys::rdma_unlock_handler(self.id);
            r
        })
    }

    pub(crate) fn disconnect(&self) -> Result {
        // SAFETY: the id is alive.
        to_result(unsafe { sys::rdma_disconnect(self.id) })
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the id is alive and ours; after `rdma_destroy_id` no
        // handler runs, so the queue can go.
        unsafe {
            if !(*self.id).qp.is_null() {
                sys::rdma_destroy_qp(self.id);
            }
            sys::rdma_destroy_id(self.id);
            drop(Arc::from_raw(self.queue));
        }
    }
}

/// Whether `netdev` has an RDMA device of the in-tree `driver` (e.g.
/// [`DRIVER_SIW`]).
pub(crate) fn device_on(netdev: &crate::ffi::net::netdev::NetDevRef, driver: u32) -> bool {
    // SAFETY: the net_device is held; a found device is put at once.
    unsafe {
        let d = sys::ib_device_get_by_netdev(netdev.as_raw(), driver);
        if d.is_null() {
            return false;
        }
        sys::ib_device_put(d);
        true
    }
}

pub(crate) const DRIVER_SIW: u32 = sys::rdma_driver_id_RDMA_DRIVER_SIW;

// ---- QP events ----------------------------------------------------------

/// Asynchronous QP events seen.
#[derive(Default)]
pub(crate) struct QpEvents {
    pub(crate) fatal: AtomicU32,
    pub(crate) other: AtomicU32,
}

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
unsafe extern "C" fn on_qp_event(ev: *mut sys::ib_event, ctx: *mut c_void) {
    // SAFETY: `ctx` is the `QpEvents` given at creation, alive while
    // the QP is; `ev` is valid for the call.
    let (seen, ev) = unsafe { (&*ctx.cast::<QpEvents>(), &*ev) };
    if ev.event == sys::ib_event_type_IB_EVENT_QP_FATAL {
        seen.fatal.fetch_add(1, Ordering::Relaxed);
    } else {
        seen.other.fetch_add(1, Ordering::Relaxed);
    }
}

// ---- PD, CQ, MR -----------------------------------------------------------

/// A PD with the unsafe global rkey (remote access to any kernel VA:
/// for tests only).
pub(crate) struct Pd(*mut sys::ib_pd);

impl Pd {
    pub(crate) fn alloc(dev: *mut sys::ib_device) -> Result<Self> {
        Self::alloc_flags(dev, sys::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY)
    }

    /// A PD without the global rkey, as a ULP allocates it: remote
    /// access only through MRs it registers ([`FrMr`]). (The core logs
    /// a warning for every global-rkey PD: at scale, thousands.)
    pub(crate) fn alloc_local(dev: *mut sys::ib_device) -> Result<Self> {
        Self::alloc_flags(dev, 0)
    }

    fn alloc_flags(dev: *mut sys::ib_device, flags: u32) -> Result<Self> {
        if dev.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: a device rdma_cm holds for the id using it.
        let pd = unsafe { sys::__ib_alloc_pd(dev, flags, c"rsiw_kunit_cm".as_char_ptr()) };
        Ok(Self(errp(pd)?))
    }

    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: alive.
        unsafe { (*self.0).local_dma_lkey }
    }

    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: alive.
        unsafe { (*self.0).unsafe_global_rkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc`, not used after.
        unsafe { sys::ib_dealloc_pd_user(self.0, ptr::null_mut()) };
    }
}

/// A CQ polled directly; `comp` counts completion notifications.
pub(crate) struct Cq(*mut sys::ib_cq, Pin<KBox<AtomicU32>>);

/// # Safety
///
/// Only the RDMA core calls this, as the handler this file registers,
/// with the context pointer given at registration and its other
/// pointers valid for the call.
unsafe extern "C" fn on_comp(_cq: *mut sys::ib_cq, ctx: *mut c_void) {
    // SAFETY: `ctx` is the counter of the `Cq`, alive while the CQ is.
    unsafe { &*ctx.cast::<AtomicU32>() }.fetch_add(1, Ordering::Relaxed);
}

/// One work completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wc {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    pub(crate) wc_flags: i32,
    /// `ex` as stored (imm_data big endian, or the invalidated rkey).
    pub(crate) ex: u32,
}

impl Cq {
    pub(crate) fn create(dev: *mut sys::ib_device, cqe: u32) -> Result<Self> {
        let seen = KBox::pin(AtomicU32::new(0), GFP_KERNEL)?;
        let attr = sys::ib_cq_init_attr {
            cqe,
            ..Default::default()
        };
        let ctx = ptr::from_ref::<AtomicU32>(&seen).cast_mut().cast();
        // SAFETY: the device is held by the id using it; handler and
        // context outlive the CQ (destroyed in drop first).
        let cq = unsafe {
            sys::__ib_create_cq(
                dev,
                Some(on_comp),
                None,
                ctx,
                &attr,
                c"rsiw_kunit_cm".as_char_ptr(),
            )
        };
        Ok(Self(errp(cq)?, seen))
    }

    pub(crate) fn notifications(&self) -> u32 {
        self.1.load(Ordering::Relaxed)
    }

    /// Arms the CQ: for solicited completions only, or for any.
    pub(crate) fn arm(&self, solicited: bool) -> Result {
        let f = if solicited {
            sys::ib_cq_notify_flags_IB_CQ_SOLICITED
        } else {
            sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP
        };
        // SAFETY: alive.
        let r = unsafe { sys::rsiw_ib_req_notify_cq(self.0, f) };
        to_result(r.min(0))
    }

    /// Polls for one completion for up to `ms`.
    pub(crate) fn poll(&self, ms: u32) -> Option<Wc> {
        for _ in 0..=ms {
            let mut wc = [sys::ib_wc::default(); 1];
            // SAFETY: alive; room for one entry.
            if unsafe { sys::rsiw_ib_poll_cq(self.0, 1, wc.as_mut_ptr()) } == 1 {
                let w = &wc[0];
                // SAFETY: plain unions the driver wrote.
                return Some(unsafe {
                    Wc {
                        wr_id: w.__bindgen_anon_1.wr_id,
                        status: w.status,
                        opcode: w.opcode,
                        byte_len: w.byte_len,
                        wc_flags: w.wc_flags,
                        ex: w.ex.invalidate_rkey,
                    }
                });
            }
            fsleep(Delta::from_millis(1));
        }
        None
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created in `create`, not used after.
        unsafe { sys::ib_destroy_cq_user(self.0, ptr::null_mut()) };
    }
}

/// A fast-register MR over one kernel buffer, registered through the
/// QP (`IB_WR_REG_MR`).
pub(crate) struct FrMr(*mut sys::ib_mr);

impl FrMr {
    /// Allocates the MR and maps `buf` (page-aligned) into it.
    pub(crate) fn map(pd: &Pd, buf: &mut [u8]) -> Result<Self> {
        let pages = buf.len().div_ceil(4096) as u32;
        // SAFETY: the PD is alive.
        let mr = Self(errp(unsafe {
            sys::ib_alloc_mr(pd.0, sys::ib_mr_type_IB_MR_TYPE_MEM_REG, pages)
        })?);
        let mut sg = sys::scatterlist::default();
        // SAFETY: `sg` and `buf` valid for the call; MR alive.
        unsafe {
            let dev = (*pd.0).device;
            sys::rsiw_sg_init_one(&mut sg, buf.as_mut_ptr().cast(), buf.len() as u32);
            if sys::rsiw_ib_dma_map_sg(dev, &mut sg, 1) != 1 {
                return Err(EIO);
            }
            let n = sys::ib_map_mr_sg(mr.0, &mut sg, 1, ptr::null_mut(), 4096);
            sys::rsiw_ib_dma_unmap_sg(dev, &mut sg, 1);
            if n != 1 {
                return Err(EIO);
            }
        }
        Ok(mr)
    }

    /// (lkey, rkey, iova)
    pub(crate) fn keys(&self) -> (u32, u32, u64) {
        // SAFETY: alive.
        unsafe { ((*self.0).lkey, (*self.0).rkey, (*self.0).iova) }
    }
}

impl Drop for FrMr {
    fn drop(&mut self) {
        // SAFETY: allocated in `map`, not used after.
        unsafe { sys::ib_dereg_mr_user(self.0, ptr::null_mut()) };
    }
}

// ---- work requests ----------------------------------------------------------

/// A local data segment (kernel VA, length, lkey).
#[derive(Clone, Copy)]
pub(crate) struct Seg {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

impl Seg {
    pub(crate) fn of(buf: &[u8], lkey: u32) -> Self {
        Self {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u32,
            lkey,
        }
    }
}

/// What to post: opcode and its extra fields.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    Send,
    SendSolicited,
    SendInline,
    SendInv {
        rkey: u32,
    },
    Write {
        rkey: u32,
        addr: u64,
    },
    WriteImm {
        rkey: u32,
        addr: u64,
        imm: u32,
    },
    Read {
        rkey: u32,
        addr: u64,
    },
    /// RDMA Read whose sink (the segment's lkey) is invalidated at completion.
    ReadInv {
        rkey: u32,
        addr: u64,
    },
}

/// The QP of an id (not owned: destroyed with the id).
#[derive(Clone, Copy)]
pub(crate) struct QpRef(*mut sys::ib_qp);

pub(crate) const WC_SUCCESS: u32 = sys::ib_wc_status_IB_WC_SUCCESS;
pub(crate) const WC_WR_FLUSH_ERR: u32 = sys::ib_wc_status_IB_WC_WR_FLUSH_ERR;
pub(crate) const WC_REM_OP_ERR: u32 = sys::ib_wc_status_IB_WC_REM_OP_ERR;
pub(crate) const WC_REM_ACCESS_ERR: u32 = sys::ib_wc_status_IB_WC_REM_ACCESS_ERR;
pub(crate) const WC_FETCH_ADD: u32 = sys::ib_wc_opcode_IB_WC_FETCH_ADD;
pub(crate) const WC_COMP_SWAP: u32 = sys::ib_wc_opcode_IB_WC_COMP_SWAP;
pub(crate) const WC_FLUSH: u32 = sys::ib_wc_opcode_IB_WC_FLUSH;
pub(crate) const ACCESS_REMOTE_ATOMIC: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
pub(crate) const ACCESS_FLUSH_GLOBAL: u32 = sys::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
pub(crate) const WC_SEND: u32 = sys::ib_wc_opcode_IB_WC_SEND;
pub(crate) const WC_RECV: u32 = sys::ib_wc_opcode_IB_WC_RECV;
pub(crate) const WC_RECV_IMM: u32 = sys::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM;
pub(crate) const WC_WRITE: u32 = sys::ib_wc_opcode_IB_WC_RDMA_WRITE;
pub(crate) const WC_READ: u32 = sys::ib_wc_opcode_IB_WC_RDMA_READ;
pub(crate) const WC_REG_MR: u32 = sys::ib_wc_opcode_IB_WC_REG_MR;
pub(crate) const WITH_IMM: i32 = sys::ib_wc_flags_IB_WC_WITH_IMM as i32;
pub(crate) const WITH_INVALIDATE: i32 = sys::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32;

impl QpRef {
    /// The rsiw QP behind it (`None` for another driver's).
    pub(crate) fn rsiw<D: Driver>(&self) -> Option<Arc<D::Qp>> {
        // SAFETY: the QP and its device are alive while the id is; a
        // QP of a device with rsiw's driver id is an rsiw QP.
        unsafe {
            let ours = !self.0.is_null()
                && (*(*self.0).device).ops.driver_id == crate::ffi::ib::device::DRIVER_ID;
            ours.then(|| crate::ffi::ib::qp::qp_of::<D>(self.0))
        }
    }

    /// Posts one signaled send WR through the core (`ib_post_send`).
    pub(crate) fn post(&self, wr_id: u64, op: Op, seg: Option<Seg>) -> Result {
        self.post_with(wr_id, op, seg, true)
    }

    /// [`Self::post`], signaled or not (as the kernel's rdma_rw posts all
    /// but the last WR of a chain).
    pub(crate) fn post_with(&self, wr_id: u64, op: Op, seg: Option<Seg>, signaled: bool) -> Result {
        if self.0.is_null() {
            return Err(EINVAL);
        }
        let mut sge = seg
            .map(|s| sys::ib_sge {
                addr: s.addr,
                length: s.len,
                lkey: s.lkey,
            })
            .unwrap_or_default();
        let mut wr = sys::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        if seg.is_some() {
            wr.wr.sg_list = &mut sge;
            wr.wr.num_sge = 1;
        }
        let mut flags = if signaled {
            sys::ib_send_flags_IB_SEND_SIGNALED
        } else {
            0
        };
        let (opcode, rdma) = match op {
            Op::Send => (sys::ib_wr_opcode_IB_WR_SEND, None),
            Op::SendSolicited => {
                flags |= sys::ib_send_flags_IB_SEND_SOLICITED;
                (sys::ib_wr_opcode_IB_WR_SEND, None)
            }
            Op::SendInline => {
                flags |= sys::ib_send_flags_IB_SEND_INLINE;
                (sys::ib_wr_opcode_IB_WR_SEND, None)
            }
            Op::SendInv { rkey } => {
                wr.wr.ex.invalidate_rkey = rkey;
                (sys::ib_wr_opcode_IB_WR_SEND_WITH_INV, None)
            }
            Op::Write { rkey, addr } => (sys::ib_wr_opcode_IB_WR_RDMA_WRITE, Some((rkey, addr))),
            Op::WriteImm { rkey, addr, imm } => {
                wr.wr.ex.imm_data = imm.to_be();
                (
                    sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
                    Some((rkey, addr)),
                )
            }
            Op::Read { rkey, addr } => (sys::ib_wr_opcode_IB_WR_RDMA_READ, Some((rkey, addr))),
            Op::ReadInv { rkey, addr } => (
                sys::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
                Some((rkey, addr)),
            ),
        };
        wr.wr.opcode = opcode;
        wr.wr.send_flags = flags;
        if let Some((rkey, addr)) = rdma {
            wr.rkey = rkey;
            wr.remote_addr = addr;
        }
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: the QP is alive; WR and SGE live across the call and
        // inline data is readable kernel memory.
        to_result(unsafe { sys::rsiw_ib_post_send(self.0, &wr.wr, &mut bad) })
    }

    pub(crate) fn post_recv(&self, wr_id: u64, seg: Seg) -> Result {
        if self.0.is_null() {
            return Err(EINVAL);
        }
        let mut sge = sys::ib_sge {
            addr: seg.addr,
            length: seg.len,
            lkey: seg.lkey,
        };
        let mut wr = sys::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *const sys::ib_recv_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { sys::rsiw_ib_post_recv(self.0, &wr, &mut bad) })
    }

    /// An RFC 7306 atomic (`IB_WR_ATOMIC_FETCH_AND_ADD` with `swap`
    /// `None`, `IB_WR_ATOMIC_CMP_AND_SWP` with `Some(swap)`): the
    /// original value lands in `seg` (8 octets).
    pub(crate) fn post_atomic(
        &self,
        wr_id: u64,
        rkey: u32,
        addr: u64,
        compare_add: u64,
        swap: Option<u64>,
        seg: Seg,
    ) -> Result {
        if self.0.is_null() {
            return Err(EINVAL);
        }
        let mut sge = sys::ib_sge {
            addr: seg.addr,
            length: seg.len,
            lkey: seg.lkey,
        };
        let mut wr = sys::ib_atomic_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        wr.wr.num_sge = 1;
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
        wr.wr.opcode = match swap {
            None => sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
            Some(_) => sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
        };
        wr.compare_add = compare_add;
        wr.swap = swap.unwrap_or(0);
        wr.rkey = rkey;
        wr.remote_addr = addr;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { sys::rsiw_ib_post_send(self.0, &wr.wr, &mut bad) })
    }

    /// `IB_WR_FLUSH` of `len` octets at `rkey`/`addr` (rsiw's kernel
    /// convention, rxe's: an `ib_rdma_wr`, the length in the SGE).
    pub(crate) fn post_flush(&self, wr_id: u64, rkey: u32, addr: u64, len: u32) -> Result {
        if self.0.is_null() {
            return Err(EINVAL);
        }
        let mut sge = sys::ib_sge {
            addr: 0,
            length: len,
            lkey: 0,
        };
        let mut wr = sys::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        wr.wr.num_sge = 1;
        wr.wr.opcode = sys::ib_wr_opcode_IB_WR_FLUSH;
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
        wr.rkey = rkey;
        wr.remote_addr = addr;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: as for `post`.
        to_result(unsafe { sys::rsiw_ib_post_send(self.0, &wr.wr, &mut bad) })
    }

    /// `IB_WR_REG_MR`: registers `mr` with new key byte `key` and
    /// local write + remote read/write access (signaled).
    pub(crate) fn post_reg_mr(&self, wr_id: u64, mr: &FrMr, key: u8) -> Result {
        self.post_reg_mr_access(wr_id, mr, key, 0)
    }

    /// As [`Self::post_reg_mr`], with `extra` access flags (e.g.
    /// [`ACCESS_REMOTE_ATOMIC`], [`ACCESS_FLUSH_GLOBAL`]).
    pub(crate) fn post_reg_mr_access(&self, wr_id: u64, mr: &FrMr, key: u8, extra: u32) -> Result {
        self.post_reg_mr_with(wr_id, mr, key, extra, true)
    }

    /// [`Self::post_reg_mr_access`], signaled or not.
    pub(crate) fn post_reg_mr_with(
        &self,
        wr_id: u64,
        mr: &FrMr,
        key: u8,
        extra: u32,
        signaled: bool,
    ) -> Result {
        // SAFETY: the MR is alive; the consumer owns its key fields
        // (`ib_update_fast_reg_key`).
        let rkey = unsafe {
            let m = &mut *mr.0;
            m.lkey = (m.lkey & 0xFFFF_FF00) | u32::from(key);
            m.rkey = (m.rkey & 0xFFFF_FF00) | u32::from(key);
            m.rkey
        };
        let mut wr = sys::ib_reg_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.opcode = sys::ib_wr_opcode_IB_WR_REG_MR;
        wr.wr.send_flags = if signaled {
            sys::ib_send_flags_IB_SEND_SIGNALED
        } else {
            0
        };
        wr.mr = mr.0;
        wr.key = rkey;
        wr.access = (sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | sys::ib_access_flags_IB_ACCESS_REMOTE_READ
            | sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE
            | extra) as c_int;
        let mut bad: *const sys::ib_send_wr = ptr::null();
        // SAFETY: QP and MR alive.
        to_result(unsafe { sys::rsiw_ib_post_send(self.0, &wr.wr, &mut bad) })
    }
}
