// SPDX-License-Identifier: GPL-2.0
//! Raw bindings generated at build time by bindgen from
//! `include/rsiw_sys.h` (see Kbuild). Private to `ffi`: nothing else in the
//! driver sees these types. Generated code: the lints are allowed as the
//! kernel allows them on its own bindings (`rust/bindings/lib.rs`).

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::as_underscore,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::undocumented_unsafe_blocks
)]

// Blocklisted in the generation as in the kernel's own bindings, which map
// them to Rust's pointer-sized integers (rust/bindings/lib.rs).
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("sys_generated.rs");
