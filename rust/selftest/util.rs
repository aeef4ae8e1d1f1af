// SPDX-License-Identifier: GPL-2.0
//! What the KUnit self-tests share: the `check!` macro and a connected QP
//! pair on `lo` without the CM.

use kernel::prelude::*;

use crate::{
    engine::{mpa::negotiate::{Framing, RtrMode}, wire::mpa::Rtr},
    ffi::{
        consumer::cq::KCq,
        consumer::device::Found,
        consumer::mr::KPd,
        net::netdev::NetDevRef,
        consumer::qp::KQp,
        net::socket::TcpSocket,
    },
    qp::{QpState, StreamParams},
};

/// `assert!` outside a `#[test]` fn is core's and would BUG the kernel:
/// helpers report a failed check as an error, which fails the test.
macro_rules! check {
    ($c:expr) => {
        if !$c {
            kernel::pr_err!("rsiw kunit: check failed ({}:{}): {}\n", file!(), line!(), stringify!($c));
            return Err(EBADMSG);
        }
    };
}
pub(crate) use check;

/// Stream parameters of a loopback pair: EMSS 1460 (several FPDUs per
/// large message), IRD/ORD 8, peer-to-peer with a Write RTR.
pub(crate) fn stream_params(initiator: bool, crc: bool, markers: bool) -> StreamParams {
    StreamParams {
        framing: Framing { crc, markers_tx: markers, markers_rx: markers },
        ird: 8,
        ord: 8,
        rtr: Some(RtrMode::Zero(Rtr::Write)),
        initiator,
        emss: 1460,
    }
}

/// A connected QP pair: A (initiator) and B, each with its own CQ, the
/// PD's local DMA lkey and global rkey.
pub(crate) struct Pair<'a> {
    pub(crate) a: &'a KQp,
    pub(crate) cq_a: &'a KCq,
    pub(crate) b: &'a KQp,
    pub(crate) cq_b: &'a KCq,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// Creates device `name` on `lo`, a connected pair with `crc`, runs
/// `setup` on the QPs before they connect, then `f`; tears everything
/// down whatever `f` returns.
pub(crate) fn with_pair(
    name: &'static CStr,
    crc: bool,
    setup: impl FnOnce(&KQp, &KQp),
    f: impl FnOnce(&Pair<'_>) -> Result,
) -> Result {
    with_pair_emss(name, crc, 1460, setup, f)
}

/// As [`with_pair`] with FPDUs sized for an EMSS of `emss`.
pub(crate) fn with_pair_emss(
    name: &'static CStr,
    crc: bool,
    emss: usize,
    setup: impl FnOnce(&KQp, &KQp),
    f: impl FnOnce(&Pair<'_>) -> Result,
) -> Result {
    let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
    crate::device::verbs::create(name, &lo, false)?;
    let dev = Found::by_netdev(&lo).ok_or(ENODEV)?;
    let r = (|| {
        let pd = KPd::alloc(&dev, true)?;
        let (cq_a, cq_b) = (KCq::create(&dev, 64)?, KCq::create(&dev, 64)?);
        let a = KQp::create(&pd, &cq_a, &cq_a, 16)?;
        let b = KQp::create(&pd, &cq_b, &cq_b, 16)?;
        a.modify(QpState::Init)?;
        b.modify(QpState::Init)?;
        setup(&a, &b);
        let (sa, sb) = TcpSocket::loopback_pair()?;
        a.qp::<crate::device::Rsiw>().attach(sa, StreamParams { emss, ..stream_params(true, crc, false) }, &[])?;
        b.qp::<crate::device::Rsiw>().attach(sb, StreamParams { emss, ..stream_params(false, crc, false) }, &[])?;
        f(&Pair { a: &a, cq_a: &cq_a, b: &b, cq_b: &cq_b, lkey: pd.local_dma_lkey(), rkey: pd.unsafe_global_rkey() })
    })();
    dev.unregister();
    r
}
