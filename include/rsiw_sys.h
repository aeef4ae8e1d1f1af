/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C API rsiw uses, fed to bindgen at build time (see Kbuild). The
 * generated Rust lands in rust/ffi/sys.rs's private module and is only used
 * by the thin layer under rust/ffi/.
 *
 * Static inlines and macros bindgen cannot see are wrapped by the small
 * functions declared at the end and defined in rust/helpers.c.
 */
#ifndef RSIW_SYS_H
#define RSIW_SYS_H

#include <linux/etherdevice.h>
#include <linux/netdevice.h>
#include <linux/if_arp.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/iw_cm.h>
#include <rdma/rdma_cm.h>
#include <rdma/rdma_netlink.h>
#include <rdma/ib_umem.h>
#include <linux/crc32.h>
#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <linux/net.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/skbuff.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tcp_states.h>
#include <net/ipv6.h>
#include <linux/workqueue.h>
#include <linux/ratelimit.h>
#include <linux/libnvdimm.h>
#include <linux/memremap.h>
#include <linux/ioport.h>
#include <linux/blkdev.h>
#include <linux/dax.h>
#include <linux/file.h>

#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "uapi/rdma/rsiw-abi.h"

struct net *rsiw_dev_net(struct net_device *ndev);
void rsiw_dev_put(struct net_device *ndev);
enum ib_port_state rsiw_port_state(struct net_device *ndev);
enum ib_mtu rsiw_mtu_int_to_enum(int mtu);
void rsiw_mark_name_assigned_by_user(struct ib_device *ibdev);
/* The settings' sysfs attributes (rust/ffi/ib/settings.rs). */
struct ib_device *rsiw_device_to_ibdev(struct device *dev);
void rsiw_setting_attr_init(struct device_attribute *attr, const char *name,
			    ssize_t (*show)(struct device *dev, struct device_attribute *attr,
					    char *buf),
			    ssize_t (*store)(struct device *dev, struct device_attribute *attr,
					     const char *buf, size_t count));
void rsiw_attr_group_init(struct attribute_group *group, struct attribute **attrs);
unsigned int rsiw_num_possible_cpus(void);
struct net_device *rsiw_notifier_dev(void *info);
void rsiw_random_mac(u8 *mac);

/* CQ, MR and SRQ (rust/ffi/cq.rs, mr.rs, srq.rs) */
int rsiw_ib_poll_cq(struct ib_cq *cq, int num_entries, struct ib_wc *wc);
int rsiw_ib_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags);
int rsiw_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr);
struct ib_umem *rsiw_umem_get(struct ib_device *dev, unsigned long addr,
			      size_t size, int access);
unsigned long rsiw_umem_offset(struct ib_umem *umem);
bool rsiw_umem_writable(struct ib_umem *umem);
size_t rsiw_umem_pages(struct ib_umem *umem, struct page **pages, size_t max);
void rsiw_copy_to_page(struct page *page, size_t off, const void *src, size_t len);
void rsiw_copy_from_page(struct page *page, size_t off, void *dst, size_t len);
void rsiw_sg_init_one(struct scatterlist *sg, void *buf, unsigned int len);
int rsiw_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents);
void rsiw_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents);
bool rsiw_ib_uses_virt_dma(struct ib_device *dev);
/* RFC 7306 atomics (rust/ffi/mr.rs): the physical address of a kernel
 * virtual address (linear map or vmalloc) or of a page, the key of the
 * per-device atomic lock table; a page mapped for an in-place update.
 */
u64 rsiw_kaddr_phys(const void *addr);
u64 rsiw_page_phys(struct page *page);
void *rsiw_kmap_local_page(struct page *page);
void rsiw_kunmap_local(void *addr);
/* sk_callback_lock, taken around socket callback (un)installation and in
 * the callbacks themselves.
 */
void rsiw_sk_callback_write_lock(struct sock *sk);
void rsiw_sk_callback_write_unlock(struct sock *sk);
void rsiw_sk_callback_read_lock(struct sock *sk);
void rsiw_sk_callback_read_unlock(struct sock *sk);
/* The net namespace a socket lives in. */
struct net *rsiw_sock_net(struct sock *sk);
/* The connection's current MSS (tcp_sk(sk)->mss_cache). */
unsigned int rsiw_tcp_mss(struct sock *sk);

/* Connection management (rust/ffi/cm.rs). */
/* The CM's own workqueue: drained and destroyed at module unload. */
struct workqueue_struct *rsiw_cm_wq_alloc(void);
/*
 * A socket's callbacks and user data, read and written by C: bindgen's
 * layout of struct sock can differ from the compiler's past its first
 * cache lines (64 bytes short on a lockdep/KASAN kernel), so rsiw never
 * touches these fields from Rust. The caller holds sk_callback_lock.
 */
struct rsiw_sk_cbs {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
	void *user_data;
};
void rsiw_sk_get_cbs(struct sock *sk, struct rsiw_sk_cbs *out);
void rsiw_sk_set_cbs(struct sock *sk, const struct rsiw_sk_cbs *cbs);
/* sk_user_data as stored (with its flag bits). */
void *rsiw_sk_user_data(struct sock *sk);
/* User verbs (rust/ffi/ib/umap.rs): a command's context, its request and
 * response, memory a process maps (vmalloc'ed, charged to its memory
 * cgroup, freed with vfree).
 */
struct ib_ucontext *rsiw_udata_ucontext(struct ib_udata *udata);
struct ib_udata *rsiw_attrs_udata(struct uverbs_attr_bundle *attrs);
int rsiw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
int rsiw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
bool rsiw_udata_cleared_from(struct ib_udata *udata, size_t offset);
void *rsiw_vmalloc_user(unsigned long size);
void rsiw_vfree(void *addr);
int rsiw_remap_vmalloc_range(struct vm_area_struct *vma, void *addr);
u64 rsiw_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry);
/* KUnit: C sizes and offsets, see rust/ffi/layout.rs. */
void rsiw_layout(size_t *out, size_t n);

/* The QPs' transmit work (unbound, usable in memory reclaim: NVMe-oF). */
struct workqueue_struct *rsiw_tx_wq_alloc(void);
/* The QPs' RX work (bulk on local routes): unbound. */
struct workqueue_struct *rsiw_rx_wq_alloc(void);
/* The monotonic clock in units of 1024 ns, wrapping (short intervals). */
u32 rsiw_clock_us(void);
/* Rate limit for CM log messages driven by peers. */
bool rsiw_cm_ratelimit(void);
/* IPV6_V6ONLY on a kernel socket (iw_cm_id->afonly). */
int rsiw_sock_set_v6only(struct sock *sk);
/* The pending socket error, without clearing it (0: none). */
int rsiw_sock_error(struct sock *sk);

/* rdma_cm for the in-kernel end-to-end tests (rust/ffi/rdma_cm.rs). */
struct rdma_cm_id *rsiw_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				       void *context);
int rsiw_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr);
int rsiw_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
/* The ifindex of the device in @net owning local address @ss (0: none). */
int rsiw_addr_owner(struct net *net, const struct __kernel_sockaddr_storage *ss);
/* Persistent memory and RDMA Commit (rust/ffi/pmem.rs). */
/* The page of a direct-map kernel address; NULL if it has none. */
struct page *rsiw_virt_to_page(const void *addr);
/* A ZONE_DEVICE page of fs-DAX or device-DAX (pgmap type FS_DAX/GENERIC). */
bool rsiw_page_is_dax(struct page *page);
/* [start, start + len) lies in persistent memory resources only (NVDIMM
 * or legacy memmap=! pmem), as region_intersects() judges it.
 */
bool rsiw_phys_is_pmem(phys_addr_t start, size_t len);
phys_addr_t rsiw_page_to_phys(struct page *page);
bool rsiw_has_pmem_api(void);
void rsiw_wb_cache_pmem(void *addr, size_t len);
void rsiw_wb_cache_pmem_page(struct page *page, size_t off, size_t len);
void rsiw_pmem_wmb(void);
void rsiw_wmb(void);
void rsiw_cond_resched(void);
/* KUnit: a pmem block device's DAX mapping. */
struct file *rsiw_bdev_open_rw(dev_t dev);
struct dax_device *rsiw_fs_dax_get(struct file *bdev_file, u64 *start_off);
void rsiw_fs_put_dax(struct dax_device *dax);
long rsiw_dax_direct_access(struct dax_device *dax, pgoff_t pgoff, long nr_pages,
			    void **kaddr, unsigned long *pfn);
/* KUnit: marks the running test skipped (it goes on; 0 outside KUnit). */
void rsiw_kunit_mark_skipped(const char *reason);

/* Zero-copy transmit (rust/ffi/zcopy.rs). */
struct page *rsiw_kaddr_to_page(const void *addr);
bool rsiw_sendpage_ok(struct page *page);
void rsiw_get_page(struct page *page);
void rsiw_put_page(struct page *page);
struct page *rsiw_alloc_tx_page(void);
void *rsiw_page_address(struct page *page);
struct rsiw_zc_notif;
struct rsiw_zc_notif *rsiw_zc_alloc(void (*release)(void *owner, u64 token, bool copied), void *owner);
void rsiw_zc_set_token(struct rsiw_zc_notif *notif, u64 token);
void rsiw_zc_put(struct rsiw_zc_notif *notif);
int rsiw_zc_live(void);
int rsiw_zc_probe_skb(struct rsiw_zc_notif *notif, bool local);
/* Whether a connection's route stays in this host: loopback or veth. */
bool rsiw_sk_local_route(struct sock *sk);
/* struct sock is opaque to bindgen (see rust/ffi/layout.rs): fields in C. */
unsigned char rsiw_sk_state(const struct sock *sk);
u32 rsiw_sk_rx_queued(const struct sock *sk);
/* Whether the running task (in a socket callback: whoever sent, on a
 * local route) is a process rather than a kernel thread.
 */
bool rsiw_current_is_process(void);
void rsiw_sk_bind_dev_if(struct sock *sk, int ifindex);
int rsiw_tcp_read_sock(struct sock *sk, read_descriptor_t *desc, sk_read_actor_t actor);
int rsiw_sock_send_pages(struct socket *sock, struct bio_vec *bv, unsigned int n, size_t len,
			 struct rsiw_zc_notif *notif, bool copy);

/*
 * The port's hw counters (`rdma statistic show link rsiwN/1`, sysfs
 * ports/1/hw_counters/): the index of each, their names in helpers.c.
 */
enum rsiw_hw_counter {
	RSIW_HW_TX_ZCOPY_OCTETS,
	RSIW_HW_TX_ZCOPY_BATCHES,
	RSIW_HW_TX_ZCOPY_COPIED,
	RSIW_HW_TERMINATE_SENT,
	RSIW_HW_TERMINATE_RECEIVED,
	RSIW_HW_RX_CRC_ERRORS,
	RSIW_HW_RX_PROTOCOL_ERRORS,
	RSIW_HW_MPA_REJECT_SENT,
	RSIW_HW_MPA_REJECT_RECEIVED,
	RSIW_HW_CM_TIMEOUTS,
	RSIW_HW_CM_FAILURES,
	RSIW_HW_CM_ESTABLISHED,
	RSIW_HW_RX_WORK_OCTETS,
	RSIW_HW_COUNTERS,
};
struct rdma_hw_stats *rsiw_alloc_hw_port_stats(void);
void rsiw_hw_stats_set(struct rdma_hw_stats *stats, unsigned int i, u64 value);

/*
 * Per-QP attributes of `rdma resource show qp -dd` (fill_res_qp_entry):
 * the driver table nest around rdma_nl_put_driver_*().
 */
struct nlattr *rsiw_nl_driver_nest_start(struct sk_buff *msg);
void rsiw_nl_nest_end(struct sk_buff *msg, struct nlattr *nest);
void rsiw_nl_nest_cancel(struct sk_buff *msg, struct nlattr *nest);
/* tcp_info's total_retrans of a TCP socket. */
u32 rsiw_tcp_total_retrans(struct sock *sk);
/* Retransmission timeouts since the peer last acknowledged new data. */
u32 rsiw_tcp_unanswered_rtos(struct sock *sk);

/* Trace events (rust/trace.c, include/trace/rsiw.h). */
bool rsiw_trace_cm_state_enabled(void);
void rsiw_trace_cm_state(u64 cm_id, const struct __kernel_sockaddr_storage *laddr,
			 const struct __kernel_sockaddr_storage *raddr,
			 const char *old, unsigned int old_len,
			 const char *new, unsigned int new_len);
void rsiw_trace_mpa(u64 cm_id, bool initiator, const char *result, unsigned int result_len,
		    u8 rev, bool crc, bool markers_tx, bool markers_rx, u16 ird, u16 ord,
		    const char *rtr, unsigned int rtr_len, u16 error);
void rsiw_trace_qp_state(u32 qpn, int old, int new);
void rsiw_trace_terminate(u32 qpn, bool sent, u8 layer, u8 etype, u8 code);
void rsiw_trace_wr_error(u32 qpn, u64 wr_id, int opcode, int status);

/*
 * Whether the caller of iw_connect/iw_accept on `id` owns `qp` (it may
 * attach it to a connection): a process's QP only its own process, a
 * kernel QP only a kernel caller (rust/ffi/ib/iw_cm.rs).
 */
bool rsiw_iw_caller_owns_qp(struct iw_cm_id *id, struct ib_qp *qp);

/* Memory cgroup charging (rust/ffi/mem/memcg.rs). */
struct mem_cgroup;
struct mem_cgroup *rsiw_memcg_get_current(void);
void rsiw_memcg_put(struct mem_cgroup *memcg);
struct mem_cgroup *rsiw_memcg_set_active(struct mem_cgroup *memcg);

#endif /* RSIW_SYS_H */
