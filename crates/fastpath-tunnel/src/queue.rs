//! One queue of the tunnel: a stack on one TUN link, its relays, and a current-thread runtime, on a
//! thread of its own, until told to stop. It publishes its stack's counters every
//! [`PUBLISH_EVERY`](crate::PUBLISH_EVERY) for [`Tunnel::stats`](crate::Tunnel::stats), and a last
//! time as it stops.

use fastpath::link::{Link, TunHandle, TunLink};
use fastpath::{Ipv4Cidr, Ipv6Cidr, StackConfig};
use fastpath_tokio::Net;

use crate::settings::*;
use crate::tcp::tcp_loop;
use crate::udp::udp_loop;

/// What [`Tunnel::stats`](crate::Tunnel::stats) reads of a queue while it runs.
#[derive(Debug, Default)]
pub(crate) struct Published {
    pub(crate) tally: Arc<Tally>,
    /// The stack's counters and connections, as of the last publication.
    pub(crate) stack: Mutex<(fastpath::Counters, usize)>,
    /// The TUN link's counters (a handle on them, read when asked), once the queue started.
    pub(crate) tun: Mutex<Option<TunHandle>>,
}

/// Wraps a queue's TUN link in another link (a packet recorder, say) before the stack takes it; it
/// is given the link and the queue's number.
pub type LinkWrapper =
    Arc<dyn Fn(TunLink, usize) -> Result<Box<dyn Link>, String> + Send + Sync + 'static>;

/// What every queue's stack is built from.
#[derive(Clone)]
pub(crate) struct Queue {
    pub(crate) dev: String,
    pub(crate) cidr: Ipv4Cidr,
    pub(crate) v6: Option<Ipv6Cidr>,
    pub(crate) settings: Settings,
    pub(crate) wrap: Option<LinkWrapper>,
}

impl Queue {
    /// Runs a stack on `link` (queue `queue` of `queues`) and its relays until `stop` says so, on a
    /// current-thread runtime of its own. Sends the set-up's outcome on `ready` first.
    pub(crate) fn run(
        self,
        mut link: TunLink,
        (queue, queues): (usize, usize),
        mut stop: tokio::sync::watch::Receiver<bool>,
        ready: std::sync::mpsc::Sender<Result<(), String>>,
        published: Arc<Published>,
    ) -> Result<(), String> {
        let fail = |e: String| {
            let _ = ready.send(Err(e.clone()));
            e
        };
        let tun = link.handle();
        *published.tun.lock().unwrap_or_else(|e| e.into_inner()) = Some(tun.clone());
        let mut stack =
            stack_for_queue(&mut link, StackConfig::default(), queue, queues).map_err(&fail)?;
        let iface = match &self.wrap {
            Some(wrap) => {
                stack.add_interface(&self.dev, wrap(link, queue).map_err(&fail)?, self.cidr)
            }
            None => stack.add_interface(&self.dev, link, self.cidr),
        };
        if let Some(a) = self.v6 {
            stack
                .add_ipv6_address(iface, a)
                .map_err(|e| fail(format!("IPv6 address {}: {e}", a.addr)))?;
        }
        stack
            .set_intercept(iface, true)
            .map_err(|e| fail(format!("intercepting on {}: {e}", self.dev)))?;
        let settings = Rc::new(self.settings);
        let tally = published.tally.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("starting the runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        let dev = self.dev;
        local.block_on(&runtime, async {
            let net =
                Net::with_tun(stack, tun).map_err(|e| fail(format!("registering {dev}: {e}")))?;
            tokio::task::spawn_local(net.clone().drive());
            let listener =
                TcpListener::intercept_holding(&net, 1024).map_err(|e| fail(e.to_string()))?;
            let udp = Rc::new(UdpIntercept::new(&net));
            tokio::task::spawn_local(tcp_loop(listener, settings.clone(), tally.clone()));
            tokio::task::spawn_local(udp_loop(udp, settings.clone(), tally.clone()));
            let publish = || {
                let now = net.with_stack(|s| (*s.counters(), s.tcp_connections()));
                *published.stack.lock().unwrap_or_else(|e| e.into_inner()) = now;
            };
            publish();
            let _ = ready.send(Ok(()));
            let mut every = tokio::time::interval(crate::PUBLISH_EVERY);
            loop {
                tokio::select! {
                    _ = stop.wait_for(|&s| s) => break,
                    _ = every.tick() => publish(),
                }
            }
            publish();
            Ok::<_, String>(())
        })
    }
}

/// A stack for queue `queue` of `queues`, built from `config` with its share of `config`'s ephemeral
/// ports (so that the steering program brings its connections' replies back to it,
/// `fastpath::link::tun::steer`), and `link` given a buffer depot shared with it.
pub fn stack_for_queue(
    link: &mut TunLink,
    mut config: StackConfig,
    queue: usize,
    queues: usize,
) -> Result<fastpath::Stack, String> {
    config.ephemeral_ports =
        fastpath::link::tun::ephemeral_share(&config.ephemeral_ports, queue, queues).ok_or_else(
            || {
                format!(
                    "the ephemeral ports {:?} cannot be shared by {queues} queues",
                    config.ephemeral_ports
                )
            },
        )?;
    let mut stack = fastpath::Stack::new(config);
    let depot = fastpath::buf::BufferDepot::new();
    link.set_buffer_depot(depot.clone());
    stack.set_buffer_depot(depot);
    Ok(stack)
}
