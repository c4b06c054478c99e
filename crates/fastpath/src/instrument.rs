//! Where the time goes: cycle-counter timing by layer and by operation, for `fastpath bench sweep`
//! (Kay & Pasquale, paper 001, figures 1-10: time per layer and per operation, send side and receive
//! side).
//!
//! Only built with the `instrument` cargo feature; without it the probes in the stack ([`layer!`] and
//! [`timed!`]) expand to nothing. The stack marks each layer boundary: time runs against the layer
//! entered last until the next boundary, and an application's own time (between calls) counts against
//! nothing. Operations are timed inside their layer and also reported on their own; "other" is a layer's
//! time less its operations.

use std::cell::Cell;

/// A layer of the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// The socket calls: argument checks, queues, the copy to and from the application.
    Socket = 0,
    /// UDP: header, checksum, demultiplexing.
    Udp = 1,
    /// IPv4: header, routing, fragmentation and reassembly.
    Ip = 2,
    /// The link: handing packets over and taking them in.
    Link = 3,
    /// TCP: header, checksum, the connection's state machine.
    Tcp = 4,
}

/// Sending or receiving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The send path.
    Send = 0,
    /// The receive path.
    Receive = 1,
}

/// A data-touching or per-packet operation (Kay & Pasquale's categories).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Checksumming.
    Checksum = 0,
    /// Copying data.
    Copy = 1,
    /// Copying and checksumming in one loop.
    CopyChecksum = 2,
    /// Buffer allocation and freeing (malloc/free, or the pool).
    Buffers = 3,
}

/// Layer and operation names, in the order of the arrays of [`Profile`].
pub const LAYERS: [&str; 5] = ["socket", "udp", "ip", "link", "tcp"];
/// See [`LAYERS`].
pub const OPS: [&str; 4] = ["checksum", "copy", "copy+checksum", "buffers"];

/// Cycles spent, by side, then by layer or operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Cycles in each layer (`[side][layer]`).
    pub layers: [[u64; 5]; 2],
    /// Cycles in each operation (`[side][op]`), included in the layers' cycles.
    pub ops: [[u64; 4]; 2],
}

#[derive(Clone, Copy)]
struct State {
    profile: Profile,
    current: Option<(Side, Layer)>,
    since: u64,
}

thread_local! {
    static STATE: Cell<State> = const {
        Cell::new(State { profile: Profile { layers: [[0; 5]; 2], ops: [[0; 4]; 2] }, current: None, since: 0 })
    };
}

/// The CPU's cycle counter.
#[inline(always)]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: RDTSC reads the time-stamp counter; it touches no memory and every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// Charges the time since the last boundary to the current layer, then makes `next` current (`None`:
/// back in the application).
#[inline]
pub fn enter(next: Option<(Side, Layer)>) {
    let now = cycles();
    STATE.with(|s| {
        let mut st = s.get();
        if let Some((side, layer)) = st.current {
            st.profile.layers[side as usize][layer as usize] += now.wrapping_sub(st.since);
        }
        st.current = next;
        st.since = now;
        s.set(st);
    });
}

/// Times one operation until dropped, charging it to the current side.
pub struct OpTimer {
    op: Op,
    start: u64,
}

impl OpTimer {
    /// Starts timing `op`.
    #[inline]
    pub fn start(op: Op) -> OpTimer {
        OpTimer {
            op,
            start: cycles(),
        }
    }
}

impl Drop for OpTimer {
    #[inline]
    fn drop(&mut self) {
        let spent = cycles().wrapping_sub(self.start);
        STATE.with(|s| {
            let mut st = s.get();
            let side = st.current.map_or(0, |(side, _)| side as usize);
            st.profile.ops[side][self.op as usize] += spent;
            s.set(st);
        });
    }
}

/// Returns this thread's profile and starts a new one.
pub fn take() -> Profile {
    STATE.with(|s| {
        let mut st = s.get();
        let p = st.profile;
        st.profile = Profile::default();
        s.set(st);
        p
    })
}
