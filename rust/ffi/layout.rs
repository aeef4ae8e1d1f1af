// SPDX-License-Identifier: GPL-2.0
//! A self-check of the generated bindings: bindgen computes struct layouts
//! from its own run of clang over the headers. This compares, at insmod,
//! the size of every struct rsiw passes through the bindings and the
//! offset of the fields it reads or writes directly with what the C
//! compiler says (`rsiw_layout` in rust/helpers.c, same order).
//!
//! `struct sock` is opaque to Rust (`--opaque-type sock` in Kbuild), its
//! fields are read and written in C: the kernel builds with
//! `-fms-extensions`, and `socket_lock_t` holds a tagged anonymous struct
//! (`union { struct slock_owned { int owned; spinlock_t slock; }; long
//! combined; }`) that bindgen does not take as a member. Its union came
//! out as a bare `long`, which happens to be the right size only while
//! `spinlock_t` is 4 bytes: with lockdep, bindgen's `sk_lock` was 64 bytes
//! short and every later field of `struct sock` off by 64 (this check
//! found it on the debug kernel: `sk_reserved_mem` at 552 against 616).

#[cfg(rsiw_kunit)]
use kernel::prelude::*;

#[cfg(rsiw_kunit)]
#[kunit_tests(rsiw_bindings)]
mod tests {
    use core::mem::{offset_of, size_of};

    use kernel::prelude::*;

    use crate::ffi::sys;

    #[test]
    fn generated_layouts_match_the_compiler() -> Result {
        let ours: &[(&str, usize)] = &[
            ("sizeof ib_device", size_of::<sys::ib_device>()),
            ("sizeof ib_qp", size_of::<sys::ib_qp>()),
            ("sizeof ib_cq", size_of::<sys::ib_cq>()),
            ("sizeof ib_mr", size_of::<sys::ib_mr>()),
            ("sizeof ib_pd", size_of::<sys::ib_pd>()),
            ("sizeof ib_srq", size_of::<sys::ib_srq>()),
            ("sizeof ib_sge", size_of::<sys::ib_sge>()),
            ("sizeof ib_send_wr", size_of::<sys::ib_send_wr>()),
            ("sizeof ib_recv_wr", size_of::<sys::ib_recv_wr>()),
            ("sizeof ib_rdma_wr", size_of::<sys::ib_rdma_wr>()),
            ("sizeof ib_atomic_wr", size_of::<sys::ib_atomic_wr>()),
            ("sizeof ib_reg_wr", size_of::<sys::ib_reg_wr>()),
            ("sizeof ib_wc", size_of::<sys::ib_wc>()),
            ("sizeof ib_event", size_of::<sys::ib_event>()),
            ("sizeof ib_srq_attr", size_of::<sys::ib_srq_attr>()),
            ("sizeof ib_qp_init_attr", size_of::<sys::ib_qp_init_attr>()),
            ("sizeof ib_qp_attr", size_of::<sys::ib_qp_attr>()),
            ("sizeof ib_port_attr", size_of::<sys::ib_port_attr>()),
            ("sizeof ib_device_attr", size_of::<sys::ib_device_attr>()),
            ("sizeof ib_cq_init_attr", size_of::<sys::ib_cq_init_attr>()),
            ("sizeof iw_cm_id", size_of::<sys::iw_cm_id>()),
            ("sizeof iw_cm_event", size_of::<sys::iw_cm_event>()),
            (
                "sizeof iw_cm_conn_param",
                size_of::<sys::iw_cm_conn_param>(),
            ),
            ("sizeof ib_udata", size_of::<sys::ib_udata>()),
            ("sizeof scatterlist", size_of::<sys::scatterlist>()),
            ("offsetof ib_qp.device", offset_of!(sys::ib_qp, device)),
            ("offsetof ib_qp.qp_num", offset_of!(sys::ib_qp, qp_num)),
            ("offsetof ib_cq.device", offset_of!(sys::ib_cq, device)),
            ("offsetof ib_cq.cqe", offset_of!(sys::ib_cq, cqe)),
            ("offsetof ib_mr.lkey", offset_of!(sys::ib_mr, lkey)),
            ("offsetof ib_mr.rkey", offset_of!(sys::ib_mr, rkey)),
            ("offsetof ib_mr.iova", offset_of!(sys::ib_mr, iova)),
            ("offsetof ib_pd.device", offset_of!(sys::ib_pd, device)),
            ("offsetof ib_device.ops", offset_of!(sys::ib_device, ops)),
            (
                "offsetof iw_cm_id.provider_data",
                offset_of!(sys::iw_cm_id, provider_data),
            ),
            (
                "offsetof iw_cm_id.local_addr",
                offset_of!(sys::iw_cm_id, local_addr),
            ),
            (
                "offsetof iw_cm_id.m_remote_addr",
                offset_of!(sys::iw_cm_id, m_remote_addr),
            ),
            ("offsetof socket.sk", offset_of!(sys::socket, sk)),
            ("sizeof bio_vec", size_of::<sys::bio_vec>()),
            ("offsetof bio_vec.bv_len", offset_of!(sys::bio_vec, bv_len)),
            (
                "offsetof bio_vec.bv_offset",
                offset_of!(sys::bio_vec, bv_offset),
            ),
            ("offsetof ib_qp.uobject", offset_of!(sys::ib_qp, uobject)),
            (
                "offsetof ib_device.uverbs_cmd_mask",
                offset_of!(sys::ib_device, uverbs_cmd_mask),
            ),
        ];
        let mut c = [0usize; 64];
        let n = ours.len().min(c.len());
        // SAFETY: `c` has room for `n` entries.
        unsafe { sys::rsiw_layout(c.as_mut_ptr(), n) };
        let mut bad = 0;
        for (i, (what, rust)) in ours.iter().enumerate().take(n) {
            if c[i] != *rust {
                pr_err!(
                    "rsiw kunit: bindings: {} is {} in C, {} in Rust\n",
                    what,
                    c[i],
                    rust
                );
                bad += 1;
            }
        }
        assert_eq!(n, ours.len());
        assert_eq!(bad, 0);
        Ok(())
    }
}
