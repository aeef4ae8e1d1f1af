// SPDX-License-Identifier: GPL-2.0
//! `iwarp-endpoint`: run one iWARP endpoint by hand (or as the test peer of
//! the kernel driver).
//!
//! ```text
//! iwarp-endpoint --listen 0.0.0.0:4791 [mpa options]
//!     serves: registers a 1 MiB region (all remote rights), advertises
//!     "STAG TO LEN" in its MPA private data, posts receives, prints every
//!     completion and event until the peer disconnects.
//! iwarp-endpoint --connect HOST:PORT --op OP [--len N] [mpa options]
//!     OP: send | send-inv | write | read | fetchadd | cmpswap | imm |
//!         write-imm | commit | rtr-only
//!
//! MPA options: --rev 1|2  --crc required|if-peer-asks|never  --markers
//!              --p2p send,write,read | --no-p2p  --ird N  --ord N
//!              --private-data TEXT  --emss N  --timeout SECS
//! ```

use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Duration;

use iwarp_endpoint::*;
use rsiw_engine::wire::atomic::AtomicOp;
use rsiw_engine::wire::commit::{Region as CRegion, RequestRepr};

const REGION: usize = 1 << 20;
const BASE: u64 = 0x1000_0000;

fn usage() -> ExitCode {
    eprintln!("usage: iwarp-endpoint (--listen ADDR | --connect ADDR --op OP [--len N]) [--rev 1|2] [--crc required|if-peer-asks|never] [--markers] [--p2p send,write,read | --no-p2p] [--ird N] [--ord N] [--private-data TEXT] [--emss N] [--timeout SECS]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Options::default();
    let (mut listen, mut connect, mut op, mut len, mut timeout) =
        (None, None, String::from("send"), 4096u32, 10u64);
    let mut pd_given = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut val = || {
            i += 1;
            args.get(i).cloned().unwrap_or_default()
        };
        match a {
            "--listen" => listen = Some(val()),
            "--connect" => connect = Some(val()),
            "--op" => op = val(),
            "--len" => len = val().parse().unwrap_or(len),
            "--rev" => o.enhanced = val() != "1",
            "--crc" => {
                o.crc = match val().as_str() {
                    "required" => CrcPolicy::Required,
                    "never" => CrcPolicy::Never,
                    _ => CrcPolicy::IfPeerAsks,
                }
            }
            "--markers" => o.markers = true,
            "--no-p2p" => o.p2p = None,
            "--p2p" => {
                let v = val();
                o.p2p = Some(RtrSet::from_flags(
                    v.contains("send"),
                    v.contains("write"),
                    v.contains("read"),
                ));
            }
            "--ird" => o.ird = val().parse().unwrap_or(o.ird),
            "--ord" => o.ord = val().parse().unwrap_or(o.ord),
            "--private-data" => {
                o.private_data = val().into_bytes();
                pd_given = true;
            }
            "--emss" => o.emss = val().parse().unwrap_or(o.emss),
            "--timeout" => timeout = val().parse().unwrap_or(timeout),
            _ => return usage(),
        }
        i += 1;
    }
    let t = Duration::from_secs(timeout);
    let r = match (listen, connect) {
        (Some(addr), None) => serve(&addr, o, pd_given),
        (None, Some(addr)) => client(&addr, &o, &op, len, t),
        _ => return usage(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(addr: &str, mut o: Options, pd_given: bool) -> Result<(), String> {
    let l = TcpListener::bind(addr).map_err(|e| e.to_string())?;
    println!(
        "listening on {}",
        l.local_addr().map_err(|e| e.to_string())?
    );
    let (sock, peer) = l.accept().map_err(|e| e.to_string())?;
    println!("connection from {peer}");
    // The region's STag is 0x0101 | key: register first, then advertise.
    let mut probe = Endpoint::responder(sock, &o).map_err(|e| e.to_string())?;
    let stag = probe.reg_mr(BASE, REGION, all_access());
    if !pd_given {
        o.private_data = format!("{stag:#x} {BASE:#x} {REGION}").into_bytes();
        probe.set_reply_private_data(&o.private_data);
    }
    let mut ep = probe;
    for _ in 0..64 {
        ep.post_recv(REGION as u32);
    }
    let (mut seen_cq, mut seen_ev) = (0, 0);
    loop {
        ep.poll().map_err(|e| e.to_string())?;
        for c in &ep.res.cq[seen_cq..] {
            println!("completion {c:?}");
            if c.queue == WorkQueue::Recv && c.status == Status::Success {
                ep.res.rq.push_back(RecvWr {
                    wr_id: c.wr_id,
                    len: REGION as u32,
                });
            }
        }
        seen_cq = ep.res.cq.len();
        for e in &ep.res.events[seen_ev..] {
            println!("event {e:?}");
        }
        seen_ev = ep.res.events.len();
        if ep.is_eof() || (ep.is_done() && ep.tx_idle()) {
            println!(
                "done: state {:?}, {} bytes out, {} bytes in",
                ep.qp.state(),
                ep.bytes.0,
                ep.bytes.1
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn client(addr: &str, o: &Options, op: &str, len: u32, t: Duration) -> Result<(), String> {
    let mut a = Endpoint::connect(addr, o).map_err(|e| e.to_string())?;
    wait_until(&mut [&mut a], t, |e| e[0].startup_done()).map_err(|e| format!("MPA: {e}"))?;
    println!(
        "state {:?} framing {:?} ird/ord {:?} rtr {:?}",
        a.qp.state(),
        a.qp.framing(),
        a.qp.ird_ord(),
        a.qp.rtr_mode()
    );
    let pd = String::from_utf8_lossy(a.peer_private_data()).to_string();
    println!("peer private data: {pd:?}");
    let mut it = pd.split_whitespace().map(|x| {
        u64::from_str_radix(
            x.trim_start_matches("0x"),
            if x.starts_with("0x") { 16 } else { 10 },
        )
    });
    let (rstag, rto) = match (it.next(), it.next()) {
        (Some(Ok(s)), Some(Ok(to))) => (s as u32, to),
        _ => (0, 0),
    };
    let src = a.reg_mr(BASE, REGION, all_access());
    for (i, x) in a.mr(src).data.iter_mut().enumerate() {
        *x = i as u8;
    }
    let l = Local {
        stag: src,
        to: BASE,
        handle: 0,
    };
    let sink = Local {
        stag: src,
        to: BASE + (REGION / 2) as u64,
        handle: 0,
    };
    let remote = Remote {
        stag: rstag,
        to: rto,
    };
    let atomic = |op, add_swap, compare| SendOp::Atomic {
        op,
        remote,
        add_swap,
        add_swap_mask: 0,
        compare,
        compare_mask: u64::MAX,
    };
    let (sop, n, local) = match op {
        "send" => (SendOp::Send { invalidate: None }, len, l),
        "send-inv" => (
            SendOp::Send {
                invalidate: Some(rstag),
            },
            len,
            l,
        ),
        "write" => (SendOp::Write { remote }, len, l),
        "read" => (SendOp::Read { remote }, len, sink),
        "fetchadd" => (atomic(AtomicOp::FetchAdd, 1, 0), 0, sink),
        "cmpswap" => (atomic(AtomicOp::CmpSwap, 7, 0), 0, sink),
        "imm" => (SendOp::Immediate { data: *b"rsiw-imm" }, 0, l),
        "write-imm" => (
            SendOp::WriteImm {
                remote,
                data: *b"rsiw-imm",
            },
            len,
            l,
        ),
        "commit" => {
            let r = RequestRepr::new(
                0,
                &[CRegion {
                    stag: rstag,
                    to: rto,
                    len,
                }],
            )
            .ok_or("commit")?;
            (SendOp::Commit { request: r }, 0, l)
        }
        "rtr-only" => {
            wait_until(&mut [&mut a], Duration::from_millis(200), |e| {
                e[0].tx_idle()
            })
            .ok();
            return Ok(());
        }
        _ => return Err(format!("unknown op {op}")),
    };
    let id = a.post_send(sop, n, local, Flags::NONE);
    wait_until(&mut [&mut a], t, |e| {
        e[0].res.cq.iter().any(|c| c.wr_id == id) || e[0].is_done()
    })
    .map_err(|e| format!("{op}: {e}"))?;
    for c in &a.res.cq {
        println!("completion {c:?}");
    }
    for e in &a.res.events {
        println!("event {e:?}");
    }
    a.qp.close(&mut a.res);
    wait_until(&mut [&mut a], t, |e| e[0].is_done() && e[0].tx_idle()).ok();
    a.shutdown();
    match a.res.cq.iter().find(|c| c.wr_id == id) {
        Some(c) if c.status == Status::Success => Ok(()),
        other => Err(format!("{op} failed: {other:?}")),
    }
}
