//! Local ports: how many sockets use each, and the cursor that hands out ephemeral ones.

use std::collections::HashMap;
use std::ops::RangeInclusive;

/// The local ports of one protocol.
#[derive(Debug)]
pub(crate) struct Ports {
    /// Ports in use, with how many sockets use each.
    in_use: HashMap<u16, u32>,
    /// The ephemeral range, and the cursor in it.
    range: RangeInclusive<u16>,
    next: u16,
}

impl Ports {
    /// No port in use; ephemeral ports are handed out from `range`, from its start.
    pub(crate) fn new(range: &RangeInclusive<u16>) -> Ports {
        Ports {
            in_use: HashMap::new(),
            range: range.clone(),
            next: *range.start(),
        }
    }

    /// One more socket uses `port`.
    pub(crate) fn take(&mut self, port: u16) {
        *self.in_use.entry(port).or_insert(0) += 1;
    }

    /// One socket fewer uses `port`.
    pub(crate) fn release(&mut self, port: u16) {
        if let Some(n) = self.in_use.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.in_use.remove(&port);
            }
        }
    }

    /// True when some socket uses `port`.
    pub(crate) fn in_use(&self, port: u16) -> bool {
        self.in_use.contains_key(&port)
    }

    /// `port`, or for port 0 an ephemeral one; `AddrInUse` when none is free.
    pub(crate) fn choose(&mut self, port: u16) -> std::io::Result<u16> {
        match port {
            0 => self.ephemeral().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free ephemeral port")
            }),
            p => Ok(p),
        }
    }

    /// The next port of the ephemeral range no socket uses, going round from where the last search stopped
    /// (none when all are in use). The port is not taken: the caller takes it when it binds.
    pub(crate) fn ephemeral(&mut self) -> Option<u16> {
        let (lo, hi) = (*self.range.start(), *self.range.end());
        for _ in 0..=u32::from(hi - lo) {
            let port = self.next.clamp(lo, hi);
            self.next = if port == hi { lo } else { port + 1 };
            if !self.in_use(port) {
                return Some(port);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ephemeral_ports_skip_those_in_use_and_run_out() {
        let range = 100..=102;
        let mut p = Ports::new(&range);
        p.take(101);
        assert_eq!(p.ephemeral(), Some(100));
        p.take(100);
        assert_eq!(p.ephemeral(), Some(102));
        p.take(102);
        assert_eq!(p.ephemeral(), None);
        p.take(102);
        p.release(102);
        assert!(p.in_use(102));
        p.release(102);
        assert_eq!(p.ephemeral(), Some(102));
    }
}
