//! The application's side of a socket that carries one LRT connection (`LrtSocket`,
//! `MpLrtSocket`): sending, receiving, flushing and waiting, blocking and async, over the state
//! the driver thread shares.

use crate::lrt::NetError;
use crate::shared::{Shared, Wait};
use cohort_proto::lrt::{self, Connection, SendError, State};
use std::time::{Duration, Instant};

/// Driver state that holds an LRT connection.
pub(crate) trait Driven {
    fn conn(&self) -> &Connection;
    fn conn_mut(&mut self) -> &mut Connection;
    /// The driver thread has stopped.
    fn is_shutdown(&self) -> bool;
}

/// Whether a driver is done with its connection: it is closed, and drained (its CLOSE sent
/// and its closing period over), or it has no peer it can tell (no address, no session), or
/// it has been closed for longer than a closing period lasts. `closed_at` keeps when the
/// driver first saw it closed.
pub(crate) fn closing_done(
    conn: &Connection,
    can_send: bool,
    now: cohort_time::Instant,
    closed_at: &mut Option<cohort_time::Instant>,
) -> bool {
    if !matches!(conn.state(), State::Closed(_)) {
        return false;
    }
    let since = *closed_at.get_or_insert(now);
    !can_send || conn.is_drained(now) || now >= since + lrt::MAX_CLOSING
}

/// When a driver's timer must next fire: the earliest of the key exchange's `keyx` (its
/// next message 1) and the connection's deadlines, all of them (`poll_timeout`, the
/// connection's or its multipath wrapper's) once the driver can send, else only the timers
/// of the connection's own (`Connection::timer_deadline`): a transmission it cannot make
/// yet would fire the timer again at once.
pub(crate) fn deadline(
    conn: &Connection,
    poll_timeout: Option<cohort_time::Instant>,
    keyx: Option<cohort_time::Instant>,
    can_send: bool,
) -> Option<cohort_time::Instant> {
    let own = if can_send { poll_timeout } else { conn.timer_deadline() };
    own.into_iter().chain(keyx).min()
}

/// The error of a wait the driver's end cut short.
fn stopped<T: Driven>(i: &T) -> NetError {
    match i.conn().state() {
        State::Closed(r) => NetError::Closed(r.clone()),
        _ => NetError::Io(std::io::Error::other("driver stopped")),
    }
}

/// `Closed` if the connection is, otherwise `Ok`.
fn open_or_closed<T: Driven>(shared: &Shared<T>) -> Result<(), NetError> {
    match shared.lock().conn().state() {
        State::Closed(r) => Err(NetError::Closed(r.clone())),
        _ => Ok(()),
    }
}

/// Waits until `done` holds (or the driver stopped); `TimedOut` after `timeout`.
pub(crate) fn wait_for<T: Driven>(
    shared: &Shared<T>,
    timeout: Option<Duration>,
    done: impl FnMut(&mut T) -> bool,
) -> Result<(), NetError> {
    let (g, w) = shared.wait_until(timeout.map(|t| Instant::now() + t), |i| i.is_shutdown(), done);
    match w {
        Wait::Done => Ok(()),
        Wait::TimedOut => Err(NetError::TimedOut),
        Wait::Stopped => Err(stopped(&*g)),
    }
}

/// Waits (up to `timeout`, or forever) until the handshake is done.
pub(crate) fn wait_connected<T: Driven>(shared: &Shared<T>, timeout: Option<Duration>) -> Result<(), NetError> {
    wait_for(shared, timeout, |i| i.conn().state() != &State::Handshaking)?;
    open_or_closed(shared)
}

/// Queues a message without blocking.
pub(crate) fn try_send<T: Driven>(shared: &Shared<T>, msg: &[u8]) -> Result<(), NetError> {
    let r = shared.lock().conn_mut().send(msg);
    match r {
        Ok(()) => {
            shared.waker.wake()?;
            Ok(())
        }
        Err(SendError::WouldBlock) => Err(NetError::WouldBlock),
        Err(SendError::Size(n)) => Err(NetError::MessageSize(n)),
        Err(SendError::Closed(r)) => Err(NetError::Closed(r)),
    }
}

/// Queues a message, waiting while the send buffer is full.
pub(crate) fn send<T: Driven>(shared: &Shared<T>, msg: &[u8]) -> Result<(), NetError> {
    loop {
        match try_send(shared, msg) {
            Err(NetError::WouldBlock) => wait_for(shared, None, |i| {
                let c = i.conn();
                c.send_queued_bytes() < c.config().send_buffer_bytes / 2
            })?,
            other => return other,
        }
    }
}

/// The next message without blocking.
pub(crate) fn try_recv<T: Driven>(shared: &Shared<T>) -> Result<Option<Vec<u8>>, NetError> {
    let r = shared.lock().conn_mut().recv();
    let m = r.map_err(|lrt::RecvError::Closed(r)| NetError::Closed(r))?;
    if m.is_some() {
        // Room in the receive buffer may let more symbols be released and acknowledged.
        shared.waker.wake()?;
    }
    Ok(m)
}

/// The next message, waiting up to `timeout` (forever with `None`).
pub(crate) fn recv_timeout<T: Driven>(shared: &Shared<T>, timeout: Option<Duration>) -> Result<Vec<u8>, NetError> {
    let mut got = None;
    wait_for(shared, timeout, |i| {
        got = Some(i.conn_mut().recv());
        !matches!(got, Some(Ok(None)))
    })?;
    // Room in the receive buffer may let more symbols be released and acknowledged.
    shared.waker.wake()?;
    match got {
        Some(Ok(Some(m))) => Ok(m),
        Some(Err(lrt::RecvError::Closed(r))) => Err(NetError::Closed(r)),
        _ => Err(NetError::TimedOut),
    }
}

/// Resolves once the driver reports a change after generation `seen`.
async fn changed_since<T: Driven>(shared: &Shared<T>, seen: u64) -> Result<(), NetError> {
    if shared.changed_since(seen, |i| i.is_shutdown()).await { Ok(()) } else { Err(stopped(&*shared.lock())) }
}

/// Async `send`: resolves once the message is queued. Works on any executor: the driver
/// thread wakes the task.
pub(crate) async fn send_async<T: Driven>(shared: &Shared<T>, msg: &[u8]) -> Result<(), NetError> {
    loop {
        let seen = shared.generation();
        match try_send(shared, msg) {
            Err(NetError::WouldBlock) => changed_since(shared, seen).await?,
            other => return other,
        }
    }
}

/// Async `recv`.
pub(crate) async fn recv_async<T: Driven>(shared: &Shared<T>) -> Result<Vec<u8>, NetError> {
    loop {
        let seen = shared.generation();
        if let Some(m) = try_recv(shared)? {
            return Ok(m);
        }
        changed_since(shared, seen).await?;
    }
}

/// Waits until everything sent so far has been seen by the peer.
pub(crate) fn flush<T: Driven>(shared: &Shared<T>, timeout: Option<Duration>) -> Result<(), NetError> {
    wait_for(shared, timeout, |i| {
        let c = i.conn();
        matches!(c.state(), State::Closed(_)) || (c.send_queued_bytes() == 0 && c.unacked_symbols() == 0)
    })?;
    open_or_closed(shared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_time::Instant as T;

    #[test]
    fn a_driver_still_exchanging_keys_waits_for_the_next_message_1_not_for_the_hello() {
        let cfg = lrt::Config::default();
        let c = Connection::connect(cfg.clone(), 1, T::ZERO).unwrap();
        let retry = T::ZERO + Duration::from_millis(100);
        // The HELLO is due at once; the driver cannot send it before the session is up.
        assert_eq!(c.poll_timeout(), Some(T::ZERO));
        assert_eq!(deadline(&c, c.poll_timeout(), Some(retry), false), Some(retry));
        assert_eq!(deadline(&c, c.poll_timeout(), None, false), Some(T::ZERO + cfg.handshake_timeout));
        // Once it can send, the HELLO is what it waits for.
        assert_eq!(deadline(&c, c.poll_timeout(), Some(retry), true), Some(T::ZERO));
    }
}
