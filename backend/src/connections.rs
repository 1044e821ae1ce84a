//! Bounds on the server's connections, so that no client takes it down by holding them:
//! how many are open in all and per peer address, and how long one may sit with no
//! request in flight, on HTTP/1 and HTTP/2 alike (hyper's own header timeout covers only
//! HTTP/1, and an HTTP/2 client that sent its preface and nothing more was never closed).
//!
//! A connection past a bound is not simply refused: the oldest idle connection (of the
//! same peer, for the per-peer bound) is asked to close, as nginx reuses keep-alive
//! connections, so a flood of idle connections cannot lock out a new client. Only when
//! every connection is busy is the new one shed (closed at once). A connection asked to
//! close does so gracefully: the requests it carries finish first (HTTP/2: GOAWAY).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// What the bounds are.
#[derive(Copy, Clone, Debug)]
pub struct Limits {
    /// Connections open at once.
    pub max: usize,
    /// Connections open at once from one peer address.
    pub per_peer: usize,
    /// How long a connection may carry no request before it is closed.
    pub idle: Duration,
}

/// File descriptors kept free of connections for the store, outgoing requests and logs.
const SPARE_FDS: u64 = 64;

/// The most connections the process's open-file limit leaves room for (all of it but
/// [`SPARE_FDS`] and a quarter), so that accepting stops before files cannot be opened.
pub fn fitting_the_fd_limit(wanted: usize) -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(u64::MAX, |l| l.0);
    let room = soft.saturating_sub(SPARE_FDS).saturating_mul(3) / 4;
    wanted.min(usize::try_from(room).unwrap_or(usize::MAX)).max(1)
}

/// One connection's state, shared by its task, its service and the registry.
pub struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` at the last request's start or end.
    last: AtomicU64,
    epoch: Instant,
    close: Notify,
}

impl Activity {
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::SeqCst));
        Some(self.epoch.elapsed().saturating_sub(last))
    }

    fn touch(&self) {
        self.last.store(self.epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
    }

    /// A request starts; it counts until the returned guard drops.
    pub fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        InFlight(self.clone())
    }
}

/// A request in flight on a connection.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Open {
    peer: IpAddr,
    activity: Arc<Activity>,
}

#[derive(Default)]
struct Registry {
    next: u64,
    open: HashMap<u64, Open>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Registry {
    fn remove(&mut self, id: u64) {
        if let Some(open) = self.open.remove(&id) {
            if let Some(count) = self.per_peer.get_mut(&open.peer) {
                *count -= 1;
                if *count == 0 {
                    self.per_peer.remove(&open.peer);
                }
            }
        }
    }

    /// Asks the longest-idle connection (of `peer`, if given) to close and stops counting
    /// it; false when every such connection is busy.
    fn evict_idle(&mut self, peer: Option<IpAddr>) -> bool {
        let idlest = self
            .open
            .iter()
            .filter(|(_, open)| peer.is_none_or(|p| open.peer == p))
            .filter_map(|(&id, open)| open.activity.idle_for().map(|idle| (idle, id)))
            .max();
        let Some((_, id)) = idlest else { return false };
        if let Some(open) = self.open.get(&id) {
            open.activity.close.notify_one();
        }
        self.remove(id);
        true
    }
}

/// The open connections.
#[derive(Clone)]
pub struct Connections {
    registry: Arc<Mutex<Registry>>,
    limits: Limits,
    shed: Arc<AtomicU64>,
}

/// An admitted connection: counted until dropped.
pub struct Slot {
    id: u64,
    activity: Arc<Activity>,
    connections: Connections,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.registry.lock().expect("not poisoned").remove(self.id);
    }
}

impl Slot {
    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }

    /// No request in flight.
    pub fn is_idle(&self) -> bool {
        self.activity.idle_for().is_some()
    }

    /// Resolves when the connection should close: idle past the limit, or asked to
    /// (evicted for a newer one, or the server is stopping).
    pub async fn closing(&self) {
        let idle = self.connections.limits.idle;
        loop {
            let wait = match self.activity.idle_for() {
                Some(for_) if for_ >= idle => return,
                Some(for_) => idle - for_,
                None => idle,
            };
            tokio::select! {
                () = self.activity.close.notified() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

impl Connections {
    pub fn new(limits: Limits) -> Connections {
        Connections { registry: Arc::default(), limits, shed: Arc::default() }
    }

    /// Counts a new connection from `peer`, making room by closing idle ones if need be;
    /// `None` (shed it) when every connection in its way is busy.
    pub fn admit(&self, peer: IpAddr) -> Option<Slot> {
        let mut registry = self.registry.lock().expect("not poisoned");
        let from_peer = registry.per_peer.get(&peer).copied().unwrap_or(0);
        let room = (from_peer < self.limits.per_peer || registry.evict_idle(Some(peer)))
            && (registry.open.len() < self.limits.max || registry.evict_idle(None));
        if !room {
            let shed = self.shed.fetch_add(1, Ordering::Relaxed) + 1;
            if shed.is_power_of_two() {
                tracing::warn!(
                    "shed {shed} connections so far: every connection was busy ({} open)",
                    registry.open.len()
                );
            }
            return None;
        }
        let id = registry.next;
        registry.next += 1;
        let activity = Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            epoch: Instant::now(),
            close: Notify::new(),
        });
        registry.open.insert(id, Open { peer, activity: activity.clone() });
        *registry.per_peer.entry(peer).or_default() += 1;
        Some(Slot { id, activity, connections: self.clone() })
    }

    /// Asks one idle connection to close: for when the process ran out of file descriptors.
    pub fn evict_one_idle(&self) -> bool {
        self.registry.lock().expect("not poisoned").evict_idle(None)
    }

    /// Asks every connection to close (the server is stopping).
    pub fn close_all(&self) {
        for open in self.registry.lock().expect("not poisoned").open.values() {
            open.activity.close.notify_one();
        }
    }

    /// How many are open.
    pub fn count(&self) -> usize {
        self.registry.lock().expect("not poisoned").open.len()
    }
}

/// A tower service that counts its requests as the connection's activity.
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }
}

impl<S, R> tower::Service<R> for Tracked<S>
where
    S: tower::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let in_flight = self.activity.request();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(in_flight);
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_peer: usize) -> Limits {
        Limits { max, per_peer, idle: Duration::from_secs(60) }
    }

    #[test]
    fn idle_connections_make_room_and_busy_ones_do_not() {
        let connections = Connections::new(limits(2, 2));
        let (a, b) = ("127.0.0.1".parse().unwrap(), "10.0.0.1".parse().unwrap());
        let first = connections.admit(a).unwrap();
        let second = connections.admit(b).unwrap();
        let _busy = (first.activity().request(), second.activity().request());
        assert!(connections.admit(a).is_none(), "both busy: shed");
        drop(_busy);
        let third = connections.admit(a).expect("an idle one makes room");
        assert_eq!(connections.count(), 2);
        drop(third);
        assert_eq!(connections.count(), 1);
    }

    #[test]
    fn a_peer_past_its_bound_makes_room_among_its_own() {
        let connections = Connections::new(limits(10, 1));
        let (a, b) = ("127.0.0.1".parse().unwrap(), "10.0.0.1".parse().unwrap());
        let other = connections.admit(b).unwrap();
        let first = connections.admit(a).unwrap();
        let busy = first.activity().request();
        assert!(connections.admit(a).is_none(), "its one connection is busy");
        drop(busy);
        let _again = connections.admit(a).expect("its idle one goes");
        assert_eq!(other.activity().idle_for().map(|_| ()), Some(()), "the other peer's stays");
        assert_eq!(connections.count(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_closes_after_the_limit_and_a_busy_one_does_not() {
        let connections = Connections::new(Limits { max: 4, per_peer: 4, idle: Duration::from_secs(10) });
        let slot = connections.admit("127.0.0.1".parse().unwrap()).unwrap();
        let busy = slot.activity().request();
        assert!(tokio::time::timeout(Duration::from_secs(30), slot.closing()).await.is_err(), "busy: stays");
        drop(busy);
        let started = tokio::time::Instant::now();
        slot.closing().await;
        assert!(started.elapsed() >= Duration::from_secs(10), "closed after the idle limit, not before");
    }
}
