// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for the static inlines and macros rsiw's Rust code
 * needs. Nothing here holds logic: each is one call.
 */
#include "rsiw_sys.h"

struct net *rsiw_dev_net(struct net_device *ndev)
{
	return dev_net(ndev);
}

void rsiw_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

enum ib_port_state rsiw_port_state(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev);
}

enum ib_mtu rsiw_mtu_int_to_enum(int mtu)
{
	return ib_mtu_int_to_enum(mtu);
}

void rsiw_mark_name_assigned_by_user(struct ib_device *ibdev)
{
	ib_mark_name_assigned_by_user(ibdev);
}

unsigned int rsiw_num_possible_cpus(void)
{
	return num_possible_cpus();
}

struct net_device *rsiw_notifier_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void rsiw_random_mac(u8 *mac)
{
	eth_random_addr(mac);
}

void rsiw_sk_callback_write_lock(struct sock *sk)
{
	write_lock_bh(&sk->sk_callback_lock);
}

void rsiw_sk_callback_write_unlock(struct sock *sk)
{
	write_unlock_bh(&sk->sk_callback_lock);
}

void rsiw_sk_callback_read_lock(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
}

void rsiw_sk_callback_read_unlock(struct sock *sk)
{
	read_unlock_bh(&sk->sk_callback_lock);
}

struct net *rsiw_sock_net(struct sock *sk)
{
	return sock_net(sk);
}

struct workqueue_struct *rsiw_cm_wq_alloc(void)
{
	return alloc_workqueue("rsiw_cm", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
}

static DEFINE_RATELIMIT_STATE(rsiw_cm_rs, 5 * HZ, 10);

bool rsiw_cm_ratelimit(void)
{
	return __ratelimit(&rsiw_cm_rs);
}

int rsiw_sock_set_v6only(struct sock *sk)
{
#if IS_ENABLED(CONFIG_IPV6)
	return ip6_sock_set_v6only(sk);
#else
	return -EAFNOSUPPORT;
#endif
}

int rsiw_sock_error(struct sock *sk)
{
	return READ_ONCE(sk->sk_err);
}
