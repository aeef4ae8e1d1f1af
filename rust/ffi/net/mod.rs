// SPDX-License-Identifier: GPL-2.0
//! Networking: kernel TCP sockets and their callbacks ([`socket`]),
//! net_devices ([`netdev`]), zero-copy transmit notifications ([`zcopy`]).

pub(crate) mod netdev;
pub(crate) mod socket;
pub(crate) mod zcopy;
