//! Everything the node loop waits on, behind one call: [`Inputs::next`]
//! sleeps until the node's deadline or the first input of any source and
//! returns it as one [`Input`]. A source that ends (a channel whose sender
//! is gone) is dropped and waited on no more. The status and stats timers
//! are the only periodic ones, and they are not protocol.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};

use super::status::STATUS_PERIOD;
use crate::clock::Time;
use crate::http::admin::AdminRequest;
use crate::transport::client::ClientEvent;
use crate::transport::peer::PeerEvent;
use crate::transport::upstream::UpstreamEvent;

/// What woke the loop.
pub(super) enum Input {
    /// A peer link's event (a link up or down, a frame, a refusal).
    Peer(PeerEvent),
    /// A client connection's event (connected, frames, closed).
    Client(ClientEvent),
    /// Every client listener has stopped: the node cannot serve.
    ClientsStopped,
    /// The node's deadline (`Node::poll_timeout`) came.
    Timeout { deadline: Time },
    /// The connection to the world server (upstream mode).
    Upstream(UpstreamEvent),
    /// Time for the stats lines (`[log] stats_interval_secs`).
    Stats,
    /// Time to publish the status; the tick was scheduled for `scheduled`.
    Status { scheduled: std::time::Instant },
    /// An operator command from the HTTP admin endpoint.
    Admin(AdminRequest),
    /// A reload request (SIGHUP, `lessgate reload`).
    Reload,
    /// The embedding program asked the node to stop.
    Shutdown,
}

/// The loop's input sources.
pub(super) struct Inputs {
    clients: mpsc::Receiver<ClientEvent>,
    peers: Option<mpsc::Receiver<PeerEvent>>,
    upstream: Option<mpsc::Receiver<UpstreamEvent>>,
    admin: Option<mpsc::Receiver<AdminRequest>>,
    reload: Option<mpsc::Receiver<()>>,
    /// The node's next deadline, and the timer set to its instant.
    deadline: Time,
    timer: Pin<Box<Sleep>>,
    stats: Option<Interval>,
    status: Interval,
}

/// The sources `Inputs` is built from; `None` for a part the node lacks.
pub(super) struct Sources {
    pub clients: mpsc::Receiver<ClientEvent>,
    pub peers: Option<mpsc::Receiver<PeerEvent>>,
    pub upstream: Option<mpsc::Receiver<UpstreamEvent>>,
    pub admin: Option<mpsc::Receiver<AdminRequest>>,
    pub reload: Option<mpsc::Receiver<()>>,
    /// How often the stats lines are logged; `None`: never.
    pub stats_period: Option<Duration>,
}

impl Inputs {
    pub(super) fn new(sources: Sources) -> Inputs {
        let stats = sources
            .stats_period
            .map(|period| tokio::time::interval_at(Instant::now() + period, period));
        let mut status = tokio::time::interval(STATUS_PERIOD);
        status.set_missed_tick_behavior(MissedTickBehavior::Skip);
        Inputs {
            clients: sources.clients,
            peers: sources.peers,
            upstream: sources.upstream,
            admin: sources.admin,
            reload: sources.reload,
            deadline: Time::MAX,
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            stats,
            status,
        }
    }

    /// Waits for the next input: the node's `deadline` (protocol time,
    /// falling on the process instant `at`), any source's event, or
    /// `shutdown` while it is given.
    pub(super) async fn next<S>(
        &mut self,
        deadline: Time,
        at: Instant,
        mut shutdown: Option<Pin<&mut S>>,
    ) -> Input
    where
        S: Future<Output = ()>,
    {
        self.deadline = deadline;
        self.timer.as_mut().reset(at);
        loop {
            // Peer datagrams carry the acknowledgements that open the LESS
            // send window: they are never starved by clients (see
            // `Driver::turn`, which also takes the queued ones after every
            // batch of client frames).
            tokio::select! {
                event = recv(&mut self.peers) => match event {
                    Some(event) => return Input::Peer(event),
                    None => self.peers = None,
                },
                event = self.clients.recv() => {
                    return event.map_or(Input::ClientsStopped, Input::Client);
                }
                () = &mut self.timer => {
                    return Input::Timeout { deadline: self.deadline };
                }
                event = recv(&mut self.upstream) => match event {
                    Some(event) => return Input::Upstream(event),
                    None => self.upstream = None,
                },
                () = tick(&mut self.stats) => return Input::Stats,
                scheduled = self.status.tick() => {
                    return Input::Status { scheduled: scheduled.into_std() };
                }
                request = recv(&mut self.admin) => match request {
                    Some(request) => return Input::Admin(request),
                    None => self.admin = None,
                },
                request = recv(&mut self.reload) => match request {
                    Some(()) => return Input::Reload,
                    None => self.reload = None,
                },
                () = until(&mut shutdown) => return Input::Shutdown,
            }
        }
    }

    /// A client event already queued, without waiting.
    pub(super) fn queued_client(&mut self) -> Option<ClientEvent> {
        self.clients.try_recv().ok()
    }

    /// A peer event already queued, without waiting.
    pub(super) fn queued_peer(&mut self) -> Option<PeerEvent> {
        self.peers.as_mut()?.try_recv().ok()
    }
}

/// The next message of a source, or never when there is none.
async fn recv<T>(source: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match source {
        Some(source) => source.recv().await,
        None => std::future::pending().await,
    }
}

/// The next tick of an optional timer, or never.
async fn tick(timer: &mut Option<Interval>) {
    match timer {
        Some(timer) => {
            timer.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Completes when `future` does, or never when there is none.
async fn until<S: Future<Output = ()>>(future: &mut Option<Pin<&mut S>>) {
    match future {
        Some(future) => future.as_mut().await,
        None => std::future::pending().await,
    }
}
