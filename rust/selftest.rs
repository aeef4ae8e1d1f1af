// SPDX-License-Identifier: GPL-2.0
//! In-kernel self-tests that need a registered device: they create one on
//! the loopback net_device and drive it through the RDMA core the way a
//! kernel ULP does.

use kernel::prelude::*;

#[kunit_tests(rsiw_registration)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        device::PortState,
        ffi::{
            device::{self, testing::Found},
            netdev::NetDevRef,
        },
    };

    #[test]
    fn loopback_device_serves_kernel_verbs() -> Result {
        let lo = NetDevRef::by_name(c"lo").ok_or(ENODEV)?;
        device::create(c"rsiw_kunit0", &lo, false)?;
        let found = Found::by_netdev(&lo).ok_or(ENODEV)?;

        assert!(found.is_iwarp());
        let (active, gid_tbl_len) = found.query_port()?;
        assert_eq!(active, lo.port_state() == PortState::Active);
        assert_eq!(gid_tbl_len, 1);
        // lo has an all-zero MAC: the device must have made up a local one.
        let mac = found.device().data().mac();
        assert!(mac != [0u8; 6]);
        assert_eq!(mac[0] & 0x03, 0x02);

        // One PD exists while allocated, none after.
        assert_eq!(found.alloc_dealloc_pd()?, 1);
        assert_eq!(found.device().data().pd_count(), 0);

        // One device per net_device.
        assert_eq!(device::create(c"rsiw_kunit1", &lo, false), Err(EEXIST));

        found.unregister();
        assert!(Found::by_netdev(&lo).is_none());
        Ok(())
    }
}
