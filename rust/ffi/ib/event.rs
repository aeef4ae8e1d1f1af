// SPDX-License-Identifier: GPL-2.0
//! Asynchronous events to the consumer (`ib_event` through the object's
//! `event_handler`): one helper for CQ, QP and SRQ events.

use super::super::sys;

/// The object an event is about.
#[derive(Clone, Copy)]
pub(super) enum Element {
    Cq(*mut sys::ib_cq),
    Qp(*mut sys::ib_qp),
    Srq(*mut sys::ib_srq),
}

/// Calls the element's `event_handler`, if set, with an event of type
/// `event`.
///
/// # Safety
///
/// The element must point to a live object of an rsiw device whose
/// handler fields the core set before the driver's create callback (they
/// do not change after). The caller may be in atomic context and may
/// hold the object's QP stream lock (`spin_lock_bh`, CQ overflow and SRQ
/// limit events come from completion and receive paths) or queue locks,
/// but never the lock of the object the event is about (the CQ's ring
/// lock, the SRQ's queue lock), which a handler may take by polling,
/// arming or posting; the consumer's handler must not sleep (the core's
/// event handlers, e.g. uverbs' async queue with `GFP_ATOMIC`, do not;
/// hardware drivers raise these from interrupts).
pub(super) unsafe fn raise(element: Element, event: sys::ib_event_type) {
    let mut ev = sys::ib_event {
        event,
        ..Default::default()
    };
    // SAFETY: per the contract each pointer is a live object; the fields
    // read are set before the object was handed to the driver.
    let (handler, ctx) = unsafe {
        match element {
            Element::Cq(cq) => {
                ev.device = (*cq).device;
                ev.element.cq = cq;
                ((*cq).event_handler, (*cq).cq_context)
            }
            Element::Qp(qp) => {
                ev.device = (*qp).device;
                ev.element.qp = qp;
                ((*qp).event_handler, (*qp).qp_context)
            }
            Element::Srq(srq) => {
                ev.device = (*srq).device;
                ev.element.srq = srq;
                ((*srq).event_handler, (*srq).srq_context)
            }
        }
    };
    if let Some(handler) = handler {
        // SAFETY: the consumer's handler with an event valid for the call.
        unsafe { handler(&mut ev, ctx) };
    }
}
