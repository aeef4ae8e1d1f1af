// SPDX-License-Identifier: GPL-2.0
//! A userspace iWARP endpoint over `std::net::TcpStream`, built on the
//! `rsiw-engine` QP state machine.
//!
//! The MPA startup runs as the kernel CM runs it: the engine's
//! [`startup`](rsiw_engine::mpa::startup) machine of this end's role is fed
//! the socket's octets and takes them up to the end of the peer's frame;
//! its [`StreamParams`] then start the QP ([`Qp::establish_params`]) and
//! the octets read past the frame go to the QP first.
//!
//! Memory regions are `Vec<u8>`s with a tagged-offset base, access rights
//! and a protection domain; an STag is `(region index + 1) << 8 | key`.
//! Queues are `VecDeque`s, the CQ a `Vec`. The socket is non-blocking:
//! [`Endpoint::poll`] moves whatever can move (TX from the engine to the
//! socket, RX from the socket to the engine) and never blocks, so tests can
//! drive two endpoints from one thread and bound every wait
//! ([`wait_until`]).

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use rsiw_engine::crc::Crc32c;
use rsiw_engine::ddp::{Access, Region, StagTable};
use rsiw_engine::error::{self, TermError};
pub use rsiw_engine::mpa::negotiate::{CrcPolicy, InitiatorConfig, ResponderConfig, RtrMode};
pub use rsiw_engine::mpa::startup::{self, Initiator, Responder, StreamParams};
pub use rsiw_engine::qp::{
    CompOp, Completion, Event, Flags, Host, Local, Qp, QpConfig, RecvWr, Remote, SendOp, SendWr,
    State, Status, WorkQueue,
};
use rsiw_engine::rdmap::{atomic_execute, AtomicPlan};
use rsiw_engine::wire::commit::Region as CommitRegion;
pub use rsiw_engine::wire::mpa::{Rtr, RtrSet};

/// Host CRC32c (the `crc32c` crate, hardware accelerated where possible).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCrc;

impl Crc32c for HostCrc {
    fn append(&self, crc: u32, data: &[u8]) -> u32 {
        crc32c::crc32c_append(crc, data)
    }
}

/// The QP type the endpoint uses: ORD and IRD up to 16.
pub type EpQp = Qp<16, 16>;

/// A registered memory region.
#[derive(Clone, Debug)]
pub struct Mr {
    /// Tagged offset of `data[0]`.
    pub base: u64,
    /// Contents.
    pub data: Vec<u8>,
    /// Rights.
    pub access: Access,
    /// Protection domain.
    pub pd: u32,
    /// False once invalidated.
    pub valid: bool,
    /// Registered with the durability attribute (RDMA Commit).
    pub durable: bool,
    /// STag key byte.
    pub key: u8,
}

/// Everything the engine borrows: memory, queues, CQ, events.
#[derive(Debug, Default)]
pub struct Resources {
    /// Regions by index.
    pub mrs: Vec<Mr>,
    /// Send queue.
    pub sq: VecDeque<SendWr>,
    /// Receive queue.
    pub rq: VecDeque<RecvWr>,
    /// Receive buffers by wr_id.
    pub rbufs: Vec<Vec<u8>>,
    /// Completions, oldest first.
    pub cq: Vec<Completion>,
    /// Events, oldest first.
    pub events: Vec<Event>,
    /// Make every Commit fail to be durable (tests).
    pub fail_durable: bool,
    /// The protection domain of this endpoint.
    pub pd: u32,
}

impl Resources {
    fn mr_of(&self, stag: u32) -> Option<(usize, &Mr)> {
        let i = usize::try_from(stag >> 8).ok()?.checked_sub(1)?;
        let m = self.mrs.get(i)?;
        (m.key == (stag & 0xFF) as u8).then_some((i, m))
    }

    /// The bytes at `stag`/`to`, length `len` (no access check: local use).
    pub fn slice_mut(&mut self, stag: u32, to: u64, len: usize) -> Result<&mut [u8], TermError> {
        let (i, _) = self.mr_of(stag).ok_or(error::rdmap::LOCAL_CATA)?;
        let m = &mut self.mrs[i];
        let off = usize::try_from(to.checked_sub(m.base).ok_or(error::rdmap::LOCAL_CATA)?)
            .map_err(|_| error::rdmap::LOCAL_CATA)?;
        let end = off.checked_add(len).ok_or(error::rdmap::LOCAL_CATA)?;
        m.data.get_mut(off..end).ok_or(error::rdmap::LOCAL_CATA)
    }
}

impl Resources {
    /// A tagged access goes only to the registration it was validated
    /// against, still valid.
    fn same_registration(&self, stag: u32, reg: u64) -> Result<(), TermError> {
        match self.lookup(stag) {
            Some(r) if r.reg == reg && r.valid => Ok(()),
            _ => Err(error::rdmap::LOCAL_CATA),
        }
    }
}

impl StagTable for Resources {
    fn lookup(&self, stag: u32) -> Option<Region> {
        let (_, m) = self.mr_of(stag)?;
        Some(Region {
            base_to: m.base,
            len: m.data.len() as u64,
            access: m.access,
            pd: m.pd,
            valid: m.valid,
            durable: m.durable,
            // One registration per MR for the endpoint's life.
            reg: u64::from(stag >> 8),
        })
    }
}

impl Host for Resources {
    fn sq_next(&mut self) -> Option<SendWr> {
        self.sq.pop_front()
    }
    fn rq_peek(&mut self) -> Option<RecvWr> {
        self.rq.front().copied()
    }
    fn rq_pop(&mut self) -> Option<RecvWr> {
        self.rq.pop_front()
    }
    fn complete(&mut self, c: Completion) {
        self.cq.push(c);
    }
    fn event(&mut self, e: Event) {
        self.events.push(e);
    }
    fn read_source(&mut self, wr: &Local, offset: u32, dst: &mut [u8]) -> Result<(), TermError> {
        let s = self.slice_mut(wr.stag, wr.to.wrapping_add(u64::from(offset)), dst.len())?;
        dst.copy_from_slice(s);
        Ok(())
    }
    fn read_tagged(
        &mut self,
        stag: u32,
        reg: u64,
        to: u64,
        dst: &mut [u8],
    ) -> Result<(), TermError> {
        self.same_registration(stag, reg)?;
        let s = self.slice_mut(stag, to, dst.len())?;
        dst.copy_from_slice(s);
        Ok(())
    }
    fn place_tagged(&mut self, stag: u32, reg: u64, to: u64, data: &[u8]) -> Result<(), TermError> {
        self.same_registration(stag, reg)?;
        self.slice_mut(stag, to, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn place_recv(&mut self, wr: &RecvWr, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let b = self
            .rbufs
            .get_mut(wr.wr_id as usize)
            .ok_or(error::ddp::LOCAL_CATA)?;
        let off = offset as usize;
        b.get_mut(off..off + data.len())
            .ok_or(error::ddp::U_TOO_LONG)?
            .copy_from_slice(data);
        Ok(())
    }
    fn atomic(&mut self, plan: &AtomicPlan) -> Result<u64, TermError> {
        let s = self.slice_mut(plan.stag, plan.to, 8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        let old = u64::from_le_bytes(b);
        let (new, orig) = atomic_execute(old, &plan.request)?;
        if let Some(n) = new {
            s.copy_from_slice(&n.to_le_bytes());
        }
        Ok(orig)
    }
    fn write_atomic_result(&mut self, wr: &Local, original: u64) -> Result<(), TermError> {
        self.slice_mut(wr.stag, wr.to, 8)?
            .copy_from_slice(&original.to_le_bytes());
        Ok(())
    }
    fn make_durable(&mut self, _region: &CommitRegion) -> bool {
        !self.fail_durable
    }
    fn invalidate(&mut self, stag: u32) -> Result<(), TermError> {
        let (i, _) = self.mr_of(stag).ok_or(error::rdmap::CANT_INVALIDATE)?;
        self.mrs[i].valid = false;
        Ok(())
    }
}

/// MPA and QP settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Ask for markers on what we receive.
    pub markers: bool,
    /// MPA Rev 2 with RFC 6581 enhanced data (initiator); highest Rev 2
    /// (responder).
    pub enhanced: bool,
    /// Peer-to-peer RTR kinds offered (initiator) / accepted (responder).
    pub p2p: Option<RtrSet>,
    /// IRD.
    pub ird: u16,
    /// ORD.
    pub ord: u16,
    /// MPA private data.
    pub private_data: Vec<u8>,
    /// Effective MSS used for MULPDU (FPDU size).
    pub emss: usize,
    /// Protection domain.
    pub pd: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            crc: CrcPolicy::Required,
            markers: false,
            enhanced: true,
            p2p: Some(RtrSet::ALL),
            ird: 8,
            ord: 8,
            private_data: Vec::new(),
            emss: 1460,
            pd: 1,
        }
    }
}

/// The MPA startup of an endpoint.
enum Mpa {
    Initiator(Box<Initiator>),
    Responder(Box<Responder>),
}

impl Mpa {
    fn transmit(&self) -> &[u8] {
        match self {
            Mpa::Initiator(m) => m.transmit(),
            Mpa::Responder(m) => m.transmit(),
        }
    }

    fn sent(&mut self, n: usize) {
        match self {
            Mpa::Initiator(m) => m.sent(n),
            Mpa::Responder(m) => m.sent(n),
        }
    }

    fn phase(&self) -> startup::Phase {
        match self {
            Mpa::Initiator(m) => m.phase(),
            Mpa::Responder(m) => m.phase(),
        }
    }
}

/// One endpoint: socket, MPA startup, QP, resources.
pub struct Endpoint {
    /// The QP (started once the MPA exchange is done).
    pub qp: Box<EpQp>,
    mpa: Mpa,
    /// What the MPA exchange settled.
    pub params: Option<StreamParams>,
    /// Memory, queues, CQ, events.
    pub res: Resources,
    sock: TcpStream,
    out: Vec<u8>,
    out_off: usize,
    out_len: usize,
    eof: bool,
    reply_pd: Vec<u8>,
    next_wr: u64,
    /// Bytes sent and received (including MPA frames).
    pub bytes: (u64, u64),
}

impl Endpoint {
    fn new(sock: TcpStream, opts: &Options, mpa: Mpa) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        Ok(Endpoint {
            qp: Box::new(EpQp::new(QpConfig {
                pd: opts.pd,
                emss: opts.emss,
            })),
            mpa,
            params: None,
            res: Resources {
                pd: opts.pd,
                ..Resources::default()
            },
            sock,
            out: vec![0; 1 << 16],
            out_off: 0,
            out_len: 0,
            eof: false,
            reply_pd: opts.private_data.clone(),
            next_wr: 1,
            bytes: (0, 0),
        })
    }

    /// Connects as MPA initiator.
    pub fn connect<A: ToSocketAddrs>(addr: A, opts: &Options) -> io::Result<Self> {
        let sock = TcpStream::connect(addr)?;
        let cfg = InitiatorConfig {
            crc: opts.crc,
            markers: opts.markers,
            enhanced: opts.enhanced,
            ird: opts.ird,
            ord: opts.ord,
            p2p: if opts.enhanced { opts.p2p } else { None },
            private_data: &opts.private_data,
        };
        let m =
            Initiator::new(&cfg).map_err(|e| io::Error::other(format!("MPA request: {e:?}")))?;
        Self::new(sock, opts, Mpa::Initiator(Box::new(m)))
    }

    /// Accepts one TCP connection and acts as MPA responder; the request is
    /// accepted automatically with `opts.private_data`.
    pub fn accept(listener: &TcpListener, opts: &Options) -> io::Result<Self> {
        let (sock, _) = listener.accept()?;
        Self::responder(sock, opts)
    }

    /// MPA responder on an accepted socket.
    pub fn responder(sock: TcpStream, opts: &Options) -> io::Result<Self> {
        let cfg = ResponderConfig {
            max_rev: if opts.enhanced { 2 } else { 1 },
            crc: opts.crc,
            markers: opts.markers,
            ird: opts.ird,
            ord: opts.ord,
            min_ord: 0,
            rtr: opts.p2p.unwrap_or(RtrSet::ALL),
        };
        Self::new(sock, opts, Mpa::Responder(Box::new(Responder::new(&cfg))))
    }

    /// Sets the private data of the (automatic) MPA Reply.
    pub fn set_reply_private_data(&mut self, pd: &[u8]) {
        self.reply_pd = pd.to_vec();
    }

    /// Registers a region of `len` bytes at tagged offset `base`; returns
    /// its STag.
    pub fn reg_mr(&mut self, base: u64, len: usize, access: Access) -> u32 {
        let i = self.res.mrs.len();
        let key = (0x40 + i as u8).wrapping_mul(7) | 1;
        self.res.mrs.push(Mr {
            base,
            data: vec![0; len],
            access,
            pd: self.res.pd,
            valid: true,
            durable: true,
            key,
        });
        ((i as u32 + 1) << 8) | u32::from(key)
    }

    /// A region's bytes.
    pub fn mr(&mut self, stag: u32) -> &mut Mr {
        let i = ((stag >> 8) as usize).saturating_sub(1);
        &mut self.res.mrs[i]
    }

    /// Posts a receive of `len` bytes; returns its wr_id.
    pub fn post_recv(&mut self, len: u32) -> u64 {
        self.res.rbufs.push(vec![0; len as usize]);
        let id = (self.res.rbufs.len() - 1) as u64;
        self.res.rq.push_back(RecvWr { wr_id: id, len });
        if self.qp.is_done() {
            self.qp.flush(&mut self.res);
        }
        id
    }

    /// Posts a send work request (signaled); returns its wr_id.
    pub fn post_send(&mut self, op: SendOp, len: u32, local: Local, flags: Flags) -> u64 {
        let id = self.next_wr;
        self.next_wr += 1;
        self.res.sq.push_back(SendWr {
            wr_id: id,
            flags: flags.with(Flags::SIGNALED),
            op,
            len,
            local,
        });
        if self.qp.is_done() {
            self.qp.flush(&mut self.res);
        }
        id
    }

    /// Moves what can move without blocking; `Ok(true)` if anything did.
    pub fn poll(&mut self) -> io::Result<bool> {
        let mut progress = false;
        if !self.eof {
            // TX: the MPA frame (or a startup's Terminate) first.
            while !self.mpa.transmit().is_empty() {
                match self.sock.write(self.mpa.transmit()) {
                    Ok(0) => break,
                    Ok(n) => {
                        self.bytes.0 += n as u64;
                        self.mpa.sent(n);
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.lost();
                        break;
                    }
                }
            }
            // Then the stream: refill from the engine when the previous
            // batch is out.
            while self.mpa.transmit().is_empty() && self.params.is_some() {
                if self.out_off >= self.out_len {
                    self.out_off = 0;
                    self.out_len = self.qp.tx(&mut self.res, &HostCrc, &mut self.out);
                    if self.out_len == 0 {
                        break;
                    }
                }
                match self.sock.write(&self.out[self.out_off..self.out_len]) {
                    Ok(0) => break,
                    Ok(n) => {
                        self.bytes.0 += n as u64;
                        self.out_off += n;
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.lost();
                        break;
                    }
                }
            }
            // RX.
            let mut buf = [0u8; 1 << 16];
            loop {
                match self.sock.read(&mut buf) {
                    Ok(0) => {
                        self.lost();
                        break;
                    }
                    Ok(n) => {
                        self.bytes.1 += n as u64;
                        let used = self.startup_rx(&buf[..n]);
                        if self.params.is_some() {
                            self.qp.rx(&mut self.res, &HostCrc, &buf[used..n]);
                        }
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.lost();
                        break;
                    }
                }
            }
        }
        Ok(progress)
    }

    fn pending(&self) -> &[u8] {
        self.out.get(self.out_off..self.out_len).unwrap_or(&[])
    }

    fn lost(&mut self) {
        self.eof = true;
        self.qp.on_connection_lost(&mut self.res);
    }

    /// Feeds the startup machine; returns the octets it took (the rest
    /// belongs to the stream). The Request is accepted at once with the
    /// endpoint's private data and settings; startup outcomes are
    /// recorded as the engine QP reports them in-band.
    fn startup_rx(&mut self, input: &[u8]) -> usize {
        let (used, event) = match &mut self.mpa {
            Mpa::Initiator(m) => (m.receive(&HostCrc, input), m.poll()),
            Mpa::Responder(m) => (m.receive(input), m.poll()),
        };
        match event {
            None => {}
            Some(startup::Event::Request(_)) => {
                self.res.events.push(Event::ConnectRequest);
                if let Mpa::Responder(m) = &mut self.mpa {
                    let cfg = *m.config();
                    match m.accept(&cfg, &self.reply_pd) {
                        Ok(p) => self.start(p),
                        Err(e) => self.res.events.push(Event::NegotiationFailed(e)),
                    }
                }
            }
            Some(startup::Event::Established(p)) => self.start(p),
            Some(startup::Event::Rejected { .. }) => self.res.events.push(Event::Rejected),
            Some(startup::Event::Failed(f)) => self.res.events.push(if f.terminate {
                Event::LocalTerminate(f.error)
            } else {
                Event::NegotiationFailed(f.error)
            }),
        }
        used
    }

    /// The exchange is done: the QP takes over the stream.
    fn start(&mut self, p: StreamParams) {
        self.qp.establish_params(&p);
        self.params = Some(p);
        self.res.events.push(Event::Established);
        if self.qp.state() == State::Rts {
            self.res.events.push(Event::Ready);
        }
    }

    /// The peer's MPA private data (once the exchange is done).
    pub fn peer_private_data(&self) -> &[u8] {
        self.params
            .as_ref()
            .map_or(&[], |p| p.private_data.as_bytes())
    }

    /// Whether the MPA startup is over (established, rejected or failed).
    pub fn startup_done(&self) -> bool {
        !matches!(
            self.mpa.phase(),
            startup::Phase::AwaitFrame | startup::Phase::Decide
        )
    }

    /// Whether the endpoint is finished: the stream failed or closed, or
    /// the startup ended without one.
    pub fn is_done(&self) -> bool {
        self.qp.is_done() || (self.startup_done() && self.params.is_none())
    }

    /// Whether the peer closed or the connection failed.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// Whether all engine output has been written to the socket.
    pub fn tx_idle(&self) -> bool {
        self.mpa.transmit().is_empty() && self.pending().is_empty() && !self.qp.wants_tx()
    }

    /// Shuts the socket down (both directions).
    pub fn shutdown(&self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    /// The Terminate received from the peer, if any.
    pub fn terminate_received(&self) -> Option<rsiw_engine::wire::terminate::Repr> {
        self.qp.peer_terminate().copied()
    }

    /// The error this side terminated the stream with, if any.
    pub fn local_terminate(&self) -> Option<TermError> {
        self.res.events.iter().find_map(|e| match e {
            Event::LocalTerminate(t) => Some(*t),
            _ => None,
        })
    }
}

/// Polls the endpoints until `done` holds, failing after `timeout`.
pub fn wait_until(
    eps: &mut [&mut Endpoint],
    timeout: Duration,
    mut done: impl FnMut(&mut [&mut Endpoint]) -> bool,
) -> Result<(), String> {
    let end = Instant::now() + timeout;
    loop {
        let mut progress = false;
        for e in eps.iter_mut() {
            progress |= e.poll().map_err(|e| e.to_string())?;
        }
        if done(eps) {
            return Ok(());
        }
        if Instant::now() > end {
            return Err("timed out".into());
        }
        if !progress {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// All rights.
pub fn all_access() -> Access {
    Access::LOCAL_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_WRITE
        | Access::REMOTE_ATOMIC
        | Access::COMMIT
}
