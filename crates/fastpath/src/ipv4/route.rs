//! The routing table: longest-prefix match to an interface and a next hop.

use std::net::Ipv4Addr;

/// Index of an interface in the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InterfaceId(pub usize);

/// An IPv4 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    /// Address (host bits may be set: an interface address with its prefix).
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// `addr/prefix_len`.
    ///
    /// # Panics
    /// If `prefix_len > 32`.
    pub const fn new(addr: Ipv4Addr, prefix_len: u8) -> Ipv4Cidr {
        assert!(prefix_len <= 32, "prefix length past 32");
        Ipv4Cidr { addr, prefix_len }
    }

    /// The network mask.
    pub const fn mask(&self) -> u32 {
        if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix_len)
        }
    }

    /// True when `addr` is inside the prefix.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        (u32::from(addr) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// The directed broadcast address of the prefix (none for /31 and /32).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        (self.prefix_len < 31).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask()))
    }
}

impl std::str::FromStr for Ipv4Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = s.split_once('/').unwrap_or((s, "32"));
        let addr = a.parse().map_err(|_| format!("bad address in `{s}`"))?;
        let prefix_len = p
            .parse()
            .ok()
            .filter(|&p| p <= 32)
            .ok_or_else(|| format!("bad prefix length in `{s}`"))?;
        Ok(Ipv4Cidr { addr, prefix_len })
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// One route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destinations it covers.
    pub dest: Ipv4Cidr,
    /// Gateway to send through, or `None` when the destination is on the link.
    pub gateway: Option<Ipv4Addr>,
    /// Interface to send on.
    pub iface: InterfaceId,
}

/// Routes, kept longest prefix first so the first match is the best.
#[derive(Clone, Debug, Default)]
pub struct RoutingTable {
    routes: Vec<Route>,
}

impl RoutingTable {
    /// Adds a route (replacing one for the same prefix).
    pub fn add(&mut self, route: Route) {
        self.routes.retain(|r| r.dest != route.dest);
        let at = self
            .routes
            .partition_point(|r| r.dest.prefix_len >= route.dest.prefix_len);
        self.routes.insert(at, route);
    }

    /// Removes the route for exactly `dest`; true if there was one.
    pub fn remove(&mut self, dest: Ipv4Cidr) -> bool {
        let before = self.routes.len();
        self.routes.retain(|r| r.dest != dest);
        before != self.routes.len()
    }

    /// The longest-prefix match for `dst`.
    #[inline]
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<&Route> {
        self.routes.iter().find(|r| r.dest.contains(dst))
    }

    /// Every route, longest prefix first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        let mut t = RoutingTable::default();
        let r = |s: &str, gw: Option<[u8; 4]>, i| Route {
            dest: s.parse().unwrap(),
            gateway: gw.map(Ipv4Addr::from),
            iface: InterfaceId(i),
        };
        t.add(r("0.0.0.0/0", Some([10, 0, 0, 254]), 1));
        t.add(r("10.0.0.0/8", None, 2));
        t.add(r("10.1.0.0/16", None, 3));
        assert_eq!(
            t.lookup(Ipv4Addr::new(10, 1, 2, 3)).unwrap().iface,
            InterfaceId(3)
        );
        assert_eq!(
            t.lookup(Ipv4Addr::new(10, 2, 2, 3)).unwrap().iface,
            InterfaceId(2)
        );
        assert_eq!(
            t.lookup(Ipv4Addr::new(8, 8, 8, 8)).unwrap().iface,
            InterfaceId(1)
        );
        assert!(t.remove("0.0.0.0/0".parse().unwrap()));
        assert!(t.lookup(Ipv4Addr::new(8, 8, 8, 8)).is_none());
        let c: Ipv4Cidr = "192.168.7.9/24".parse().unwrap();
        assert_eq!(c.broadcast(), Some(Ipv4Addr::new(192, 168, 7, 255)));
        assert!("1.2.3.4/33".parse::<Ipv4Cidr>().is_err());
    }
}
