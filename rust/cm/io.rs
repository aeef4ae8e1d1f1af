// SPDX-License-Identifier: GPL-2.0
//! MPA frames on a kernel socket: read exactly one frame, send one, send a
//! Terminate.

use super::*;

// ---- socket I/O ---------------------------------------------------------

/// Reads into `rx` up to the last octet of one MPA frame of `kind`, never
/// past it. `Ok(true)`: the frame is complete.
pub(crate) fn read_frame(sock: &TcpSocket, rx: &mut KVec<u8>, kind: Kind) -> Result<bool> {
    let mut bad = false;
    sock.read(&mut |chunk: &[u8]| {
        let mut used = 0;
        while used < chunk.len() {
            let need = match frame_len(rx, kind) {
                Err(_) => {
                    bad = true;
                    break;
                }
                Ok(None) => HEADER_LEN.saturating_sub(rx.len()).max(1),
                Ok(Some(total)) => total.saturating_sub(rx.len()),
            };
            if need == 0 {
                break;
            }
            let n = need.min(chunk.len() - used);
            // Within the capacity reserved at creation: never allocates.
            if rx.extend_from_slice(&chunk[used..used + n], GFP_ATOMIC).is_err() {
                bad = true;
                break;
            }
            used += n;
        }
        used
    });
    match frame_len(rx, kind) {
        Err(_) => Err(EPROTO),
        _ if bad => Err(EPROTO),
        Ok(Some(total)) => Ok(total == rx.len()),
        Ok(None) => Ok(false),
    }
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

pub(crate) fn send_frame(sock: &TcpSocket, repr: &Repr<'_>) -> Result {
    let mut buf = [0u8; MAX_FRAME];
    let len = repr.emit_bytes(&mut buf).map_err(|_| EINVAL)?;
    send_all(sock, &buf[..len])
}

/// RFC 6581 section 9: an initiator that cannot use the Reply (LLP errors
/// 5 to 7) sends a Terminate in the negotiated framing before closing.
pub(crate) fn send_terminate(sock: &TcpSocket, framing: Framing, error: TermError) {
    let mut seg = [0u8; 64];
    let Some(n) = terminate::Repr::for_error(error, None).emit_segment(1, &mut seg) else {
        return;
    };
    let mut out = [0u8; 128];
    let mut tx = framing.tx();
    if let Ok(len) = tx.write(&KernelCrc32c, &seg[..n], &[], &mut out) {
        let _ = send_all(sock, &out[..len]);
    }
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
