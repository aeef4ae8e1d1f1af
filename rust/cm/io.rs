// SPDX-License-Identifier: GPL-2.0
//! Socket I/O of the CM: feeding an MPA startup machine from a socket,
//! sending what it queued, and scheduling the work items.

use super::*;

// ---- socket I/O ---------------------------------------------------------

/// Feeds the Request queued in `sock` to `m`, never past its last octet
/// (nothing at all once the Request is complete): whatever follows stays
/// queued for the QP.
pub(crate) fn read_request(sock: &TcpSocket, m: &mut Responder) {
    sock.read(&mut |chunk: &[u8]| {
        if m.phase() == startup::Phase::AwaitFrame {
            m.receive(chunk)
        } else {
            0
        }
    });
}

/// Feeds the Reply queued in `sock` to `m`, as [`read_request`].
pub(crate) fn read_reply(sock: &TcpSocket, m: &mut Initiator) {
    sock.read(&mut |chunk: &[u8]| {
        if m.phase() == startup::Phase::AwaitFrame {
            m.receive(&ModuleCrc32c, chunk)
        } else {
            0
        }
    });
}

/// Sends all of `bytes` (bounded retries while the socket is full).
pub(crate) fn send_all(sock: &TcpSocket, bytes: &[u8]) -> Result {
    let mut off = 0;
    let mut tries = 0;
    while off < bytes.len() {
        match sock.send(&[&bytes[off..]], false) {
            Ok(n) if n > 0 => off += n,
            Ok(_) | Err(EAGAIN) => {
                tries += 1;
                if tries > SEND_TRIES {
                    return Err(ETIMEDOUT);
                }
                fsleep(Delta::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(crate) fn kick_cep(cep: &Arc<Cep>) {
    if let Some(q) = crate::ffi::runtime::cm_queue() {
        let _ = q.enqueue(cep.clone());
    }
}

pub(crate) fn kick_listener(l: &Arc<Listener>) {
    if let Some(q) = crate::ffi::runtime::cm_queue() {
        let _ = q.enqueue(l.clone());
    }
}
