// SPDX-License-Identifier: GPL-2.0
//! rsiw: a software iWARP RNIC. Turns any net_device into an RDMA device
//! of node type RNIC that speaks MPA/DDP/RDMAP over in-kernel TCP.
//!
//! Layout (Documentation/design.md draws it): `ffi/` is the bottom layer,
//! the only place with raw bindings and `unsafe`, naming no driver type;
//! above it, one folder per concept in safe Rust — `device`, `mem` (MRs,
//! atomics, Commit), `cq`, `qp` (SQ, RQ, SRQ, stream, TX), `cm` — each
//! implementing its `ffi::ib` trait; the wire protocol is the pure
//! `engine` shared with the host tools; `selftest` holds the KUnit suites.

use kernel::prelude::*;

mod cm;
mod cq;
mod device;
mod ffi;
mod mem;
mod qp;
mod ring;
#[cfg(rsiw_kunit)]
mod selftest;

/// The sans-IO protocol engine, compiled from the same sources as the host
/// crate `rsiw-engine` (rust/engine).
#[expect(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "the host crate's public API: parts and re-exports only the host tools use, `pub` items that are crate-private here"
)]
#[path = "engine/src/lib.rs"]
mod engine;
// The engine's own paths are `crate::wire`, `crate::error`, ...: make them
// resolve here as they do in the host crate, where the engine is the root.
use engine::*;

/// `module!` with rsiw's parameters; the KUnit-only ones are passed in by
/// the test build (`module!` takes no `#[cfg]` on a parameter, but one on
/// the invocation works: the production module has none of them).
macro_rules! rsiw_module {
    ($($kunit_params:tt)*) => {
        module! {
            type: RsiwModule,
            name: "rsiw",
            authors: ["rsiw developers"],
            description: "Software iWARP RDMA device (RNIC) over any netdev, in Rust",
            license: "GPL",
            alias: ["rdma-link-rsiw"],
            params: {
                mpa_crc: bool {
                    default: false,
                    description: "Request MPA CRC32c on every connection (default: only when the peer asks); the default of each device's mpa_crc in sysfs",
                },
                rtr_delay_ms: u32 {
                    default: 0,
                    description: "Initiator: delay the peer-to-peer RTR after the MPA Reply by this many ms (at most 1000), for Linux siw responders on fast links; the default of each device's rtr_delay_ms in sysfs",
                },
                p2p_rtr: u32 {
                    default: 7,
                    description: "RTR kinds an initiator offers in peer-to-peer mode: bit 0 zero-length Send, bit 1 Write, bit 2 Read (default 7: all); 0: client-server mode; the default of each device's p2p_rtr in sysfs",
                },
                zcopy_min: u32 {
                    default: 1024,
                    description: "Send FPDU payloads of at least this many octets straight from the registered pages instead of through rsiw's buffer: by reference (MSG_ZEROCOPY with rsiw's notification; their WRs complete once TCP releases the pages), or over loopback and veth routes for TCP to copy (their WRs complete once TCP has them); 0: always through rsiw's buffer",
                },
                fpdu_segs_local: u32 {
                    default: 16,
                    description: "On a route that stays in the host (loopback, veth) an FPDU may span up to this many TCP segments (at most 64 KiB): no wire segments it, and fewer, larger FPDUs cost less per octet; 1: one segment per FPDU, as on every other route (RFC 5044 alignment)",
                },
                crc32c_impl: u32 {
                    default: 0,
                    description: "MPA CRC32c implementation: 0 time the kernel's crc32c() and rsiw's slicing-by-16 table at load and use the faster (the table wins where the crc32 instruction is emulated, e.g. QEMU TCG), 1 crc32c(), 2 the table",
                },
                rx_offload_min: u32 {
                    default: 32768,
                    description: "On a route that stays in the host (loopback, veth), read a stream whose socket holds at least this many octets in a work item instead of the receive softirq, which there runs on the sender's CPU: placement moves to another CPU and a bulk stream uses two; 0: always in the softirq",
                },
                zcopy_local: bool {
                    default: false,
                    description: "Send by reference (zcopy_min, MSG_ZEROCOPY) also over loopback and veth routes, where the stack copies every zero-copy skb it delivers (by default TCP copies the pages there): for tests of the zero-copy path",
                },
                $($kunit_params)*
            },
        }
    };
}

#[cfg(not(rsiw_kunit))]
rsiw_module! {}

#[cfg(rsiw_kunit)]
rsiw_module! {
    tx_bench_mib: u32 {
        default: 0,
        description: "KUnit only: MiB each configuration of the rsiw_tx_bench suite writes (0: a short run)",
    },
    kunit_pmem_dev: u32 {
        default: 0,
        description: "KUnit only: dev_t (major << 20 | minor) of an fsdax pmem block device the persistent RDMA Commit test may overwrite (0: skip that test)",
    },
    atomic_bench_ops: u32 {
        default: 0,
        description: "KUnit only: FetchAdds per QP in the rsiw_atomic_bench suite (0: a short run)",
    },
    kunit_scale_qps: u32 {
        default: 16,
        description: "KUnit only: connected QP pairs the rsiw_scale suite opens at once through rdma_cm (0: skip it)",
    },
    kunit_scale_rounds: u32 {
        default: 2,
        description: "KUnit only: rounds of open, traffic on all, teardown in the rsiw_scale suite",
    },
    kunit_terminate_after_mib: u32 {
        default: 0,
        description: "Test build only: once, the first QP to have received this many MiB ends its stream with a Terminate (local catastrophic error), as for a protocol error (0: never); the recovery tests' fault",
    },
    kunit_stag_reuse: bool {
        default: false,
        description: "Test build only: hand the lowest free STag index out at once, and give user and DMA MRs key 0, as after 2^24 registrations and a key that came round (the hostile-peer suite's index reuse without the registrations)",
    },
}

struct RsiwModule {
    _registration: ffi::ib::Registration<device::Rsiw>,
    /// Dropped after the devices are gone (fields drop in order).
    _cm: cm::Runtime,
}

impl kernel::Module for RsiwModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        device::crc::select(module_parameters::crc32c_impl.value())?;
        let cm = cm::Runtime::new()?;
        let registration = ffi::ib::Registration::new()?;
        pr_info!("software iWARP RNIC loaded (link type \"rsiw\")\n");
        Ok(Self {
            _registration: registration,
            _cm: cm,
        })
    }
}

impl Drop for RsiwModule {
    fn drop(&mut self) {
        pr_info!("unloading\n");
    }
}
