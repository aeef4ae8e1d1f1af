// SPDX-License-Identifier: GPL-2.0
//! What the KUnit self-tests share: the `check!` macro and a connected QP
//! pair on `lo` without the CM.

use kernel::prelude::*;

use crate::{
    engine::{
        mpa::{
            negotiate::{Framing, RtrMode},
            startup::{PrivateData, StreamParams},
        },
        wire::mpa::Rtr,
    },
    ffi::{
        consumer::cq::KCq, consumer::device::Found, consumer::mr::KPd, consumer::qp::KQp,
        net::netdev::NetDevRef, net::socket::TcpSocket,
    },
    qp::QpState,
};

/// `assert!` outside a `#[test]` fn is core's and would BUG the kernel:
/// helpers report a failed check as an error, which fails the test.
macro_rules! check {
    ($c:expr) => {
        if !$c {
            kernel::pr_err!(
                "rsiw kunit: check failed ({}:{}): {}\n",
                file!(),
                line!(),
                stringify!($c)
            );
            return Err(EBADMSG);
        }
    };
}
pub(crate) use check;

/// The EMSS of a loopback pair: several FPDUs per large message.
pub(crate) const EMSS: usize = 1460;

/// What an MPA Rev 2 exchange with enhanced data (RFC 6581) settles
/// for one end, as a QP attached without the CM takes it.
pub(crate) fn negotiated(
    framing: Framing,
    ird: u16,
    ord: u16,
    rtr: Option<RtrMode>,
    initiator: bool,
) -> StreamParams {
    StreamParams {
        rev: 2,
        framing,
        enhanced: true,
        ird,
        ord,
        auto_ird_ord: false,
        peer: None,
        rtr,
        initiator,
        private_data: PrivateData::EMPTY,
    }
}

/// Stream parameters of a loopback pair: IRD/ORD 8, peer-to-peer with a
/// Write RTR.
pub(crate) fn stream_params(initiator: bool, crc: bool, markers: bool) -> StreamParams {
    let framing = Framing {
        crc,
        markers_tx: markers,
        markers_rx: markers,
    };
    negotiated(framing, 8, 8, Some(RtrMode::Zero(Rtr::Write)), initiator)
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
    with_pair_emss(name, crc, EMSS, setup, f)
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
        a.qp::<crate::device::Rsiw>()
            .attach(sa, &stream_params(true, crc, false), emss, &[])?;
        b.qp::<crate::device::Rsiw>()
            .attach(sb, &stream_params(false, crc, false), emss, &[])?;
        f(&Pair {
            a: &a,
            cq_a: &cq_a,
            b: &b,
            cq_b: &cq_b,
            lkey: pd.local_dma_lkey(),
            rkey: pd.unsafe_global_rkey(),
        })
    })();
    dev.unregister();
    r
}
