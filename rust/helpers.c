// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for the static inlines and macros rsiw's Rust code
 * needs. Nothing here holds logic: each is one call or one kernel
 * predicate.
 */
#include "rsiw_sys.h"
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <kunit/test.h>
#include <kunit/test-bug.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>

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

struct ib_device *rsiw_device_to_ibdev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
}

/*
 * A settings attribute (rust/ffi/ib/settings.rs): read by all, written by
 * root; one lockdep class for them all (they are allocated).
 */
void rsiw_setting_attr_init(struct device_attribute *attr, const char *name,
			    ssize_t (*show)(struct device *dev, struct device_attribute *attr,
					    char *buf),
			    ssize_t (*store)(struct device *dev, struct device_attribute *attr,
					     const char *buf, size_t count))
{
	sysfs_attr_init(&attr->attr);
	attr->attr.name = name;
	attr->attr.mode = 0644;
	attr->show = show;
	attr->store = store;
}

void rsiw_attr_group_init(struct attribute_group *group, struct attribute **attrs)
{
	group->attrs = attrs;
}

unsigned int rsiw_num_possible_cpus(void)
{
	return num_possible_cpus();
}

/*
 * iw_connect and iw_accept run in the caller's context: ucma calls
 * rdma_connect/rdma_accept, and so them, synchronously from the process's
 * write() on /dev/infiniband/rdma_cm, so `current` is the process that
 * names the QP number. The core exposes no ucontext for a cm_id (ucma is
 * a file of its own), so ownership is the process: a process's QP
 * (uobject set) was created by a task restrack keeps (`res.task`), and
 * only that task's thread group may attach it. A kernel QP only a kernel
 * caller: one whose rdma_cm_id holds that very QP (rdma_create_qp; rdma_cm
 * then passes its number itself, whatever context the ULP calls from,
 * e.g. a mount), or a kernel thread or worker (ucma never runs in one).
 * Every iw_cm_id is rdma_cm's (cma.c is the only iw_create_cm_id caller),
 * its context the rdma_id_private whose first member is the rdma_cm_id.
 */
bool rsiw_iw_caller_owns_qp(struct iw_cm_id *id, struct ib_qp *qp)
{
	struct rdma_cm_id *cm = id->context;

	if (qp->uobject)
		return !(current->flags & PF_KTHREAD) && qp->res.task &&
		       same_thread_group(current, qp->res.task);
	if (cm && cm->qp == qp)
		return true;
	return current->flags & PF_KTHREAD;
}

struct net_device *rsiw_notifier_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void rsiw_random_mac(u8 *mac)
{
	eth_random_addr(mac);
}

int rsiw_ib_poll_cq(struct ib_cq *cq, int num_entries, struct ib_wc *wc)
{
	return ib_poll_cq(cq, num_entries, wc);
}

int rsiw_ib_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags)
{
	return ib_req_notify_cq(cq, flags);
}

int rsiw_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr)
{
	return ib_post_srq_recv(srq, wr, bad_wr);
}

struct ib_umem *rsiw_umem_get(struct ib_device *dev, unsigned long addr,
			      size_t size, int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

/* Whether @umem's pages were pinned for writing (FOLL_WRITE). */
bool rsiw_umem_writable(struct ib_umem *umem)
{
	return umem->writable;
}

unsigned long rsiw_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/* The pinned pages of @umem in order, at most @max; returns how many. */
size_t rsiw_umem_pages(struct ib_umem *umem, struct page **pages, size_t max)
{
	struct sg_page_iter iter;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}

void rsiw_copy_to_page(struct page *page, size_t off, const void *src, size_t len)
{
	void *dst = kmap_local_page(page);

	memcpy(dst + off, src, len);
	kunmap_local(dst);
}

void rsiw_copy_from_page(struct page *page, size_t off, void *dst, size_t len)
{
	void *src = kmap_local_page(page);

	memcpy(dst, src + off, len);
	kunmap_local(src);
}

void rsiw_sg_init_one(struct scatterlist *sg, void *buf, unsigned int len)
{
	sg_init_one(sg, buf, len);
}

int rsiw_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents)
{
	return ib_dma_map_sg(dev, sg, nents, DMA_BIDIRECTIONAL);
}

void rsiw_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents)
{
	ib_dma_unmap_sg(dev, sg, nents, DMA_BIDIRECTIONAL);
}

bool rsiw_ib_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

/* The physical address of a kernel virtual address (the atomic lock
 * table's key): the one helper with a branch, as which translation applies
 * (linear map or vmalloc) is a question only C can ask. Other addresses
 * (none a consumer can hand over today) identify the word by themselves.
 */
u64 rsiw_kaddr_phys(const void *addr)
{
	if (is_vmalloc_or_module_addr(addr)) {
		struct page *page = vmalloc_to_page(addr);

		return page ? page_to_phys(page) + offset_in_page(addr) : (uintptr_t)addr;
	}
	if (virt_addr_valid(addr))
		return __pa(addr);
	return (uintptr_t)addr;
}

u64 rsiw_page_phys(struct page *page)
{
	return page_to_phys(page);
}

void *rsiw_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void rsiw_kunmap_local(void *addr)
{
	kunmap_local(addr);
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

void rsiw_sk_get_cbs(struct sock *sk, struct rsiw_sk_cbs *out)
{
	out->data_ready = sk->sk_data_ready;
	out->write_space = sk->sk_write_space;
	out->state_change = sk->sk_state_change;
	out->user_data = sk->sk_user_data;
}

void rsiw_sk_set_cbs(struct sock *sk, const struct rsiw_sk_cbs *cbs)
{
	sk->sk_user_data = cbs->user_data;
	WRITE_ONCE(sk->sk_data_ready, cbs->data_ready);
	WRITE_ONCE(sk->sk_write_space, cbs->write_space);
	WRITE_ONCE(sk->sk_state_change, cbs->state_change);
}

void *rsiw_sk_user_data(struct sock *sk)
{
	return sk->sk_user_data;
}

struct workqueue_struct *rsiw_cm_wq_alloc(void)
{
	return alloc_workqueue("rsiw_cm", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
}

struct workqueue_struct *rsiw_tx_wq_alloc(void)
{
	return alloc_workqueue("rsiw_tx", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
}

/* The monotonic clock in units of 1024 ns (short intervals, wrapping). */
u32 rsiw_clock_us(void)
{
	return (u32)(ktime_get_ns() >> 10);
}

/*
 * Normal priority on purpose: where every CPU is busy (processes
 * busy-polling) the work then starts late, and the QP reads in the softirq
 * again for a while (Qp::run_rx); a high-priority work would preempt a
 * poller at once and make each message pay the hop.
 */
struct workqueue_struct *rsiw_rx_wq_alloc(void)
{
	return alloc_workqueue("rsiw_rx", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
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

unsigned int rsiw_tcp_mss(struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->mss_cache);
}

struct rdma_cm_id *rsiw_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				       void *context)
{
	return rdma_create_id(net, handler, context, RDMA_PS_TCP, IB_QPT_RC);
}

int rsiw_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int rsiw_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	return ib_post_recv(qp, wr, bad_wr);
}

int rsiw_addr_owner(struct net *net, const struct __kernel_sockaddr_storage *ss)
{
	struct net_device *dev = NULL;
	int ifindex = 0;
	__be32 v4;

	if (ss->ss_family == AF_INET) {
		v4 = ((const struct sockaddr_in *)ss)->sin_addr.s_addr;
		goto ipv4;
	}
#if IS_ENABLED(CONFIG_IPV6)
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

		if (ipv6_addr_v4mapped(a)) {
			v4 = a->s6_addr32[3];
			goto ipv4;
		}
		rcu_read_lock();
		dev = ipv6_dev_find(net, a, NULL);
		if (dev)
			ifindex = dev->ifindex;
		rcu_read_unlock();
	}
#endif
	return ifindex;
ipv4:
	dev = ip_dev_find(net, v4);
	if (dev) {
		ifindex = dev->ifindex;
		dev_put(dev);
	}
	return ifindex;
}

struct page *rsiw_virt_to_page(const void *addr)
{
	return virt_addr_valid(addr) ? virt_to_page(addr) : NULL;
}

bool rsiw_page_is_dax(struct page *page)
{
	return is_zone_device_page(page) &&
	       (page_pgmap(page)->type == MEMORY_DEVICE_FS_DAX ||
		page_pgmap(page)->type == MEMORY_DEVICE_GENERIC);
}

bool rsiw_phys_is_pmem(phys_addr_t start, size_t len)
{
	return region_intersects(start, len, IORESOURCE_MEM,
				 IORES_DESC_PERSISTENT_MEMORY) == REGION_INTERSECTS ||
	       region_intersects(start, len, IORESOURCE_MEM,
				 IORES_DESC_PERSISTENT_MEMORY_LEGACY) == REGION_INTERSECTS;
}

phys_addr_t rsiw_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

bool rsiw_has_pmem_api(void)
{
	return IS_ENABLED(CONFIG_ARCH_HAS_PMEM_API);
}

void rsiw_wb_cache_pmem(void *addr, size_t len)
{
	arch_wb_cache_pmem(addr, len);
}

void rsiw_wb_cache_pmem_page(struct page *page, size_t off, size_t len)
{
	void *p = kmap_local_page(page);

	arch_wb_cache_pmem(p + off, len);
	kunmap_local(p);
}

void rsiw_pmem_wmb(void)
{
	pmem_wmb();
}

void rsiw_cond_resched(void)
{
	/* A resched point for long loops on kernels without preemption
	 * (cond_resched() is a macro; PREEMPT kernels make it nothing).
	 */
	cond_resched();
}

void rsiw_wmb(void)
{
	/* RDMA Commit's global visibility: the data placed so far
	 * before the Commit's answer is sent (rust/ffi/mem/pmem.rs).
	 */
	wmb();
}

struct file *rsiw_bdev_open_rw(dev_t dev)
{
	return bdev_file_open_by_dev(dev, BLK_OPEN_READ | BLK_OPEN_WRITE, NULL, NULL);
}

struct dax_device *rsiw_fs_dax_get(struct file *bdev_file, u64 *start_off)
{
	return fs_dax_get_by_bdev(file_bdev(bdev_file), start_off, NULL, NULL);
}

void rsiw_fs_put_dax(struct dax_device *dax)
{
	fs_put_dax(dax, NULL);
}

long rsiw_dax_direct_access(struct dax_device *dax, pgoff_t pgoff, long nr_pages,
			    void **kaddr, unsigned long *pfn)
{
	int id = dax_read_lock();
	long n = dax_direct_access(dax, pgoff, nr_pages, DAX_ACCESS, kaddr, pfn);

	dax_read_unlock(id);
	return n;
}

void rsiw_kunit_mark_skipped(const char *reason)
{
#if IS_ENABLED(CONFIG_KUNIT)
	struct kunit *test = kunit_get_current_test();

	if (test)
		kunit_mark_skipped(test, "%s", reason);
#endif
}

/* Layout self-check (KUnit rsiw_bindings): the compiler's sizes and
 * offsets of what rsiw touches through bindgen's structs, in the order
 * of rust/ffi/layout.rs.
 */
void rsiw_layout(size_t *out, size_t n)
{
	const size_t v[] = {
		sizeof(struct ib_device),
		sizeof(struct ib_qp),
		sizeof(struct ib_cq),
		sizeof(struct ib_mr),
		sizeof(struct ib_pd),
		sizeof(struct ib_srq),
		sizeof(struct ib_sge),
		sizeof(struct ib_send_wr),
		sizeof(struct ib_recv_wr),
		sizeof(struct ib_rdma_wr),
		sizeof(struct ib_atomic_wr),
		sizeof(struct ib_reg_wr),
		sizeof(struct ib_wc),
		sizeof(struct ib_event),
		sizeof(struct ib_srq_attr),
		sizeof(struct ib_qp_init_attr),
		sizeof(struct ib_qp_attr),
		sizeof(struct ib_port_attr),
		sizeof(struct ib_device_attr),
		sizeof(struct ib_cq_init_attr),
		sizeof(struct iw_cm_id),
		sizeof(struct iw_cm_event),
		sizeof(struct iw_cm_conn_param),
		sizeof(struct ib_udata),
		sizeof(struct scatterlist),
		offsetof(struct ib_qp, device),
		offsetof(struct ib_qp, qp_num),
		offsetof(struct ib_cq, device),
		offsetof(struct ib_cq, cqe),
		offsetof(struct ib_mr, lkey),
		offsetof(struct ib_mr, rkey),
		offsetof(struct ib_mr, iova),
		offsetof(struct ib_pd, device),
		offsetof(struct ib_device, ops),
		offsetof(struct iw_cm_id, provider_data),
		offsetof(struct iw_cm_id, local_addr),
		offsetof(struct iw_cm_id, m_remote_addr),
		offsetof(struct socket, sk),
		sizeof(struct bio_vec),
		offsetof(struct bio_vec, bv_len),
		offsetof(struct bio_vec, bv_offset),
		offsetof(struct ib_qp, uobject),
		offsetof(struct ib_device, uverbs_cmd_mask),
	};
	size_t i;

	for (i = 0; i < n && i < ARRAY_SIZE(v); i++)
		out[i] = v[i];
}

/*
 * Zero-copy transmit. TCP takes its own page references when it splices
 * (skb_append_pagefrags), so rsiw only holds its references until
 * sock_sendmsg has taken the pages.
 */

/* The page of a direct-mapped or vmalloc kernel address; NULL otherwise. */
struct page *rsiw_kaddr_to_page(const void *addr)
{
	if (is_vmalloc_addr(addr))
		return vmalloc_to_page(addr);
	if (virt_addr_valid(addr))
		return virt_to_page(addr);
	return NULL;
}

bool rsiw_sendpage_ok(struct page *page)
{
	return sendpage_ok(page);
}

void rsiw_get_page(struct page *page)
{
	get_page(page);
}

void rsiw_put_page(struct page *page)
{
	put_page(page);
}

/* A lowmem page for the literal octets (headers, trailers) of a round. */
struct page *rsiw_alloc_tx_page(void)
{
	return alloc_page(GFP_KERNEL);
}

void *rsiw_page_address(struct page *page)
{
	return page_address(page);
}

/*
 * A zero-copy notification (MSG_ZEROCOPY with msg_ubuf, as io_uring's send
 * zerocopy): every skb that refers to the batch's pages holds a reference,
 * and so does the sender until the batch is sent. When the last goes, no
 * skb refers to the pages any more (freed after the peer's ACK, or copied
 * by skb_orphan_frags_rx when delivered to a local socket), and release()
 * tells the QP, and whether the stack copied the pages on the way (as
 * MSG_ZEROCOPY's SO_EE_CODE_ZEROCOPY_COPIED). Any context.
 *
 * SKBFL_DONT_ORPHAN, as MSG_ZEROCOPY's and io_uring's notifications: TCP
 * keeps the pages referenced until the ACK, and skb_clone() (every
 * transmit) must not copy them. Without it, skb_copy_ubufs() copied the
 * pages at the first transmit and cleared SKBFL_PURE_ZEROCOPY on the
 * queued skb, whose frags TCP had not charged: freeing it uncharged them
 * anyway (sk_forward_alloc left over at close, inet_sock_destruct's WARN).
 */
struct rsiw_zc_notif {
	struct ubuf_info ubuf;
	void (*release)(void *owner, u64 token, bool copied);
	void *owner;
	u64 token;
	bool copied;
};

static atomic_t rsiw_zc_count = ATOMIC_INIT(0);

static void rsiw_zc_complete(struct sk_buff *skb, struct ubuf_info *uarg, bool zerocopy)
{
	struct rsiw_zc_notif *n = container_of(uarg, struct rsiw_zc_notif, ubuf);

	/* Ordered before the release below by refcount_dec_and_test(). */
	if (!zerocopy)
		WRITE_ONCE(n->copied, true);
	if (!refcount_dec_and_test(&uarg->refcnt))
		return;
	n->release(n->owner, n->token, READ_ONCE(n->copied));
	kfree(n);
	atomic_dec(&rsiw_zc_count);
}

static const struct ubuf_info_ops rsiw_zc_ops = {
	.complete = rsiw_zc_complete,
};

struct rsiw_zc_notif *rsiw_zc_alloc(void (*release)(void *owner, u64 token, bool copied), void *owner)
{
	struct rsiw_zc_notif *n = kzalloc(sizeof(*n), GFP_KERNEL);

	if (!n)
		return NULL;
	n->ubuf.ops = &rsiw_zc_ops;
	n->ubuf.flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
	refcount_set(&n->ubuf.refcnt, 1);
	n->release = release;
	n->owner = owner;
	atomic_inc(&rsiw_zc_count);
	return n;
}

void rsiw_zc_set_token(struct rsiw_zc_notif *notif, u64 token)
{
	notif->token = token;
}

/*
 * Self-test (KUnit rsiw_zcopy): an skb with a page of @notif, as TCP queues
 * it, then what the stack does to it: @local false, the clone TCP takes
 * for every transmit; true, what delivery to a local socket does
 * (skb_orphan_frags_rx). Returns 1 if the queued skb still refers to the
 * page itself, 0 if the stack swapped in a copy, or -ENOMEM.
 */
int rsiw_zc_probe_skb(struct rsiw_zc_notif *notif, bool local)
{
	struct page *page = alloc_page(GFP_KERNEL);
	struct sk_buff *skb, *clone = NULL;
	int kept = -ENOMEM;

	if (!page)
		return -ENOMEM;
	skb = alloc_skb(0, GFP_KERNEL);
	if (!skb)
		goto out;
	get_page(page);
	skb_fill_page_desc(skb, 0, page, 0, 64);
	skb->len = skb->data_len = 64;
	skb->truesize += PAGE_SIZE;
	skb_zcopy_set(skb, &notif->ubuf, NULL);
	if (local) {
		if (skb_orphan_frags_rx(skb, GFP_KERNEL))
			goto free;
	} else {
		clone = skb_clone(skb, GFP_KERNEL);
		if (!clone)
			goto free;
	}
	kept = skb_frag_page(&skb_shinfo(skb)->frags[0]) == page &&
	       skb_zcopy(skb) == &notif->ubuf;
	kfree_skb(clone);
free:
	kfree_skb(skb);
out:
	put_page(page);
	return kept;
}

/* Drops the sender's reference. */
void rsiw_zc_put(struct rsiw_zc_notif *notif)
{
	net_zcopy_put(&notif->ubuf);
}

/* Notifications not yet released (module unload waits for none). */
int rsiw_zc_live(void)
{
	return atomic_read(&rsiw_zc_count);
}

unsigned char rsiw_sk_state(const struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

bool rsiw_current_is_process(void)
{
	return !(current->flags & PF_KTHREAD);
}

/* Octets TCP holds for the reader: received in order, not yet read. */
u32 rsiw_sk_rx_queued(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return READ_ONCE(tp->rcv_nxt) - READ_ONCE(tp->copied_seq);
}

/*
 * tcp_read_sock() with its precondition checked where lockdep can: the
 * caller owns the socket (TCP's receive path under bh_lock_sock, or
 * lock_sock). rsiw reads from data_ready, state_change and after hooking.
 */
int rsiw_tcp_read_sock(struct sock *sk, read_descriptor_t *desc, sk_read_actor_t actor)
{
	sock_owned_by_me(sk);
	return tcp_read_sock(sk, desc, actor);
}

/* Before bind, on a socket no one else sees (as siw does). */
void rsiw_sk_bind_dev_if(struct sock *sk, int ifindex)
{
	sk->sk_bound_dev_if = ifindex;
}

/* Whether the connection's route leaves through a loopback device. */
bool rsiw_sk_local_route(struct sock *sk)
{
	struct dst_entry *dst = sk_dst_get(sk);
	struct net_device *dev;
	bool local = false;

	if (dst) {
		dev = dst->dev;
		local = dev && ((dev->flags & IFF_LOOPBACK) ||
				(dev->rtnl_link_ops && !strcmp(dev->rtnl_link_ops->kind, "veth")));
		dst_release(dst);
	}
	return local;
}

/*
 * Sends the pages; the socket takes what fits now. With a notification:
 * by reference, MSG_ZEROCOPY. With copy: TCP copies the octets into its
 * own skbs before it returns (the pages may change once it has). Otherwise
 * (only rsiw's own literal pages, never rewritten): MSG_SPLICE_PAGES.
 */
int rsiw_sock_send_pages(struct socket *sock, struct bio_vec *bv, unsigned int n, size_t len,
			 struct rsiw_zc_notif *notif, bool copy)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL |
			     (notif ? MSG_ZEROCOPY : copy ? 0 : MSG_SPLICE_PAGES),
	};

	if (notif)
		msg.msg_ubuf = &notif->ubuf;
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, len);
	return sock_sendmsg(sock, &msg);
}

static const struct rdma_stat_desc rsiw_hw_counter_descs[] = {
	[RSIW_HW_TX_ZCOPY_OCTETS] = { .name = "tx_zcopy_octets" },
	[RSIW_HW_TX_ZCOPY_BATCHES] = { .name = "tx_zcopy_batches" },
	[RSIW_HW_TX_ZCOPY_COPIED] = { .name = "tx_zcopy_copied" },
	[RSIW_HW_TERMINATE_SENT] = { .name = "terminate_sent" },
	[RSIW_HW_TERMINATE_RECEIVED] = { .name = "terminate_received" },
	[RSIW_HW_RX_CRC_ERRORS] = { .name = "rx_crc_errors" },
	[RSIW_HW_RX_PROTOCOL_ERRORS] = { .name = "rx_protocol_errors" },
	[RSIW_HW_MPA_REJECT_SENT] = { .name = "mpa_reject_sent" },
	[RSIW_HW_MPA_REJECT_RECEIVED] = { .name = "mpa_reject_received" },
	[RSIW_HW_CM_TIMEOUTS] = { .name = "cm_timeouts" },
	[RSIW_HW_CM_FAILURES] = { .name = "cm_failures" },
	[RSIW_HW_CM_ESTABLISHED] = { .name = "cm_established" },
	[RSIW_HW_RX_WORK_OCTETS] = { .name = "rx_work_octets" },
};
static_assert(ARRAY_SIZE(rsiw_hw_counter_descs) == RSIW_HW_COUNTERS);

struct rdma_hw_stats *rsiw_alloc_hw_port_stats(void)
{
	return rdma_alloc_hw_stats_struct(rsiw_hw_counter_descs, RSIW_HW_COUNTERS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

void rsiw_hw_stats_set(struct rdma_hw_stats *stats, unsigned int i, u64 value)
{
	if (i < stats->num_counters)
		stats->value[i] = value;
}

struct nlattr *rsiw_nl_driver_nest_start(struct sk_buff *msg)
{
	return nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void rsiw_nl_nest_end(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void rsiw_nl_nest_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}

u32 rsiw_tcp_total_retrans(struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->total_retrans);
}

u32 rsiw_tcp_unanswered_rtos(struct sock *sk)
{
	return READ_ONCE(inet_csk(sk)->icsk_retransmits);
}

struct ib_ucontext *rsiw_udata_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

struct ib_udata *rsiw_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

int rsiw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

/* Whether every request octet from `offset` on is zero (none is fine). */
bool rsiw_udata_cleared_from(struct ib_udata *udata, size_t offset)
{
	if (udata->inlen <= offset)
		return true;
	return ib_is_udata_cleared(udata, offset, udata->inlen - offset);
}

int rsiw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

/* Zeroed, page-aligned memory to map into a process, charged to the
 * caller's memory cgroup (vmalloc_user() is not).
 */
void *rsiw_vmalloc_user(unsigned long size)
{
	return __vmalloc(PAGE_ALIGN(size), GFP_KERNEL_ACCOUNT | __GFP_ZERO);
}

void rsiw_vfree(void *addr)
{
	vfree(addr);
}

/* remap_vmalloc_range() for memory from rsiw_vmalloc_user(), which is
 * zeroed and page-aligned but not VM_USERMAP: the vma's pages, one by one
 * (the caller checked its length against the allocation's).
 */
int rsiw_remap_vmalloc_range(struct vm_area_struct *vma, void *addr)
{
	unsigned long uaddr;
	int ret;

	for (uaddr = vma->vm_start; uaddr < vma->vm_end; uaddr += PAGE_SIZE, addr += PAGE_SIZE) {
		ret = vm_insert_page(vma, uaddr, vmalloc_to_page(addr));
		if (ret)
			return ret;
	}
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	return 0;
}

u64 rsiw_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

/* The memory cgroup of the calling task's mm (a counted reference; the
 * root cgroup, uncounted, for a kernel thread; NULL without memcg).
 */
struct mem_cgroup *rsiw_memcg_get_current(void)
{
	return get_mem_cgroup_from_mm(current->mm);
}

void rsiw_memcg_put(struct mem_cgroup *memcg)
{
	mem_cgroup_put(memcg);
}

struct mem_cgroup *rsiw_memcg_set_active(struct mem_cgroup *memcg)
{
	return set_active_memcg(memcg);
}
