//! The tenant's pods as this pod sees them, and what one pod asks another for.
//!
//! A read through any pod gathers from all of them: the pod plans the statement, asks every
//! other pod for its partial result over `GET /internal/v1/partial` (and itself too, until
//! it knows its own address among them: [`Cluster::own_addr`]), and its own engine reads
//! those partials through `url()`, computes its own in the same query, and finishes the work
//! (see [`crate::query::gather`]). A peer is asked only for what this module's [`Partial`] can
//! express (an InfluxQL statement to compute its share of, its catalog, its series, a guarded
//! `/sql` inner query): never SQL, and never an address a reader chose.
//!
//! Which pods those are: the configured peers and the peer file, corrected by the pods' own
//! announcements ([`members`], [`announce`]).

pub mod announce;
pub mod members;
mod own_addr;
mod partial;

pub use own_addr::{OWN_ADDR_CHECK, OWN_ADDR_RETRY};
pub use partial::Partial;

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use sluice_core::config::ClusterConfig;
use sluice_core::names::quote_str;

/// The internal endpoint's path.
pub const PARTIAL_PATH: &str = "/internal/v1/partial";

/// Where a pod announces that it joins or leaves (see [`announce`]).
pub const PEERS_PATH: &str = "/internal/v1/peers";

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("reading cluster.token_file {path}: {source}")]
    TokenFile {
        path: String,
        source: std::io::Error,
    },
    #[error("cluster.token_file {0} is empty")]
    EmptyToken(String),
    #[error("cluster.peers: {0:?} is not host:port (letters, digits, '.', '-' and a port)")]
    BadPeer(String),
}

/// A peer by the name it was configured with, and where that name resolved to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub addr: Option<SocketAddr>,
}

pub struct Cluster {
    peers: Vec<String>,
    file: Option<PathBuf>,
    /// The file's peers as last read, and the modification time they were read at.
    from_file: Mutex<(Option<SystemTime>, Vec<String>)>,
    token: Option<String>,
    /// What the pods announced about themselves since.
    members: Mutex<members::Members>,
    /// Where this pod listens, to find itself among its peers by address.
    listen: Option<SocketAddr>,
    /// Set while this pod announces that it joins (see [`announce::announce`]).
    joining: AtomicBool,
    /// Where this pod answers its peers (see [`Cluster::own_addr`]).
    own: Mutex<own_addr::Own>,
}

impl Cluster {
    /// `listen` is this pod's listening address (`host:port`).
    pub fn new(cfg: &ClusterConfig, listen: &str) -> Result<Self, ClusterError> {
        for p in &cfg.peers {
            if !valid_peer(p) {
                return Err(ClusterError::BadPeer(p.clone()));
            }
        }
        let token = match (&cfg.token, &cfg.token_file) {
            (_, Some(path)) => {
                let t =
                    std::fs::read_to_string(path).map_err(|source| ClusterError::TokenFile {
                        path: path.clone(),
                        source,
                    })?;
                let t = t.trim().to_string();
                if t.is_empty() {
                    return Err(ClusterError::EmptyToken(path.clone()));
                }
                Some(t)
            }
            (Some(t), None) if !t.trim().is_empty() => Some(t.trim().to_string()),
            _ => None,
        };
        Ok(Self {
            peers: cfg.peers.clone(),
            file: cfg.peers_file.as_ref().map(PathBuf::from),
            from_file: Mutex::new((None, Vec::new())),
            token,
            members: Mutex::new(members::Members::default()),
            listen: listen.parse().ok(),
            joining: AtomicBool::new(false),
            own: Mutex::new(own_addr::Own::default()),
        })
    }

    /// The token peers present; `None` turns gathering and the internal endpoint off.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Whether this pod could ever gather (a token, and peers configured or a peer file).
    pub fn configured(&self) -> bool {
        self.token.is_some() && (self.peers.len() > 1 || self.file.is_some())
    }

    /// The tenant's pods now: `cluster.peers`, then the file's, without the pods that left
    /// and with the pods that joined since the file last changed (see [`members`]).
    pub fn peers(&self) -> Vec<String> {
        let configured = self.configured_peers();
        self.members().apply(&configured)
    }

    /// `cluster.peers`, then the file's (read again when it changed; a file that cannot be
    /// read keeps its last list). Lines that are not `host:port` are skipped with a warning.
    pub fn configured_peers(&self) -> Vec<String> {
        let mut out = self.peers.clone();
        if let Some(path) = &self.file {
            let mut cached = self.from_file.lock().unwrap_or_else(|p| p.into_inner());
            let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            if mtime.is_some() && mtime != cached.0 {
                if let Ok(text) = std::fs::read_to_string(path) {
                    let mut list = Vec::new();
                    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                        if valid_peer(line) {
                            list.push(line.to_string());
                        } else {
                            tracing::warn!(peer = line, file = %path.display(), "skipping a peer that is not host:port");
                        }
                    }
                    if list != cached.1 {
                        self.members().file_changed(&list);
                    }
                    *cached = (mtime, list);
                }
            }
            out.extend(cached.1.iter().cloned());
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|p| seen.insert(p.clone()));
        out
    }

    fn members(&self) -> std::sync::MutexGuard<'_, members::Members> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that pod `name` joins (`Join`, from address `from`: see
    /// [`members::ADDRESS_TTL`]) or leaves the tenant, and answers the pods this pod reads
    /// from now. Refuses a name that is not plausibly one of the tenant's pods
    /// ([`members::plausible`]).
    pub fn record(
        &self,
        what: announce::Announce,
        name: &str,
        from: std::net::IpAddr,
    ) -> Result<Vec<String>, String> {
        let configured = self.configured_peers();
        if what == announce::Announce::Join && !members::plausible(&configured, name) {
            return Err(format!(
                "{name:?} is not host:port under the tenant's pods' domain and port"
            ));
        }
        // A connection from a loopback address did not come from the pod's own interface:
        // on one machine every connection to a 127.x address comes from 127.0.0.1, and a
        // sidecar proxy connects from its own. Remembered, it would send this pod's reads of
        // that pod to another (or to itself) for [`members::ADDRESS_TTL`]: such a pod is
        // reached by its name.
        let from = Some(from.to_canonical()).filter(|ip| !ip.is_loopback());
        match what {
            announce::Announce::Join => self.members().join(name, from, std::time::Instant::now()),
            announce::Announce::Leave => self.members().leave(name),
        }
        tracing::info!(
            pod = name,
            "{} the tenant's pods",
            match what {
                announce::Announce::Join => "a pod joins",
                announce::Announce::Leave => "a pod leaves",
            }
        );
        Ok(self.peers())
    }

    /// This pod's name among the configured peers: the one whose first label is this host's
    /// name (a StatefulSet pod's hostname is its name), else the one that resolves to the
    /// address this pod listens on.
    pub fn me(&self) -> Option<String> {
        let configured = self.configured_peers();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        if !host.is_empty() {
            if let Some(p) = configured.iter().find(|p| {
                p.rsplit_once(':')
                    .is_some_and(|(h, _)| h.split('.').next() == Some(host.as_str()))
            }) {
                return Some(p.clone());
            }
        }
        let listen = self.listen.filter(|a| !a.ip().is_unspecified())?;
        resolve(&configured)
            .into_iter()
            .find(|p| p.addr == Some(listen))
            .map(|p| p.name)
    }

    /// Where each of `names` is now: where it joined from when that was recent (see
    /// [`members::ADDRESS_TTL`]), else what its name resolves to.
    pub fn resolve(&self, names: &[String]) -> Vec<Peer> {
        let now = std::time::Instant::now();
        let known: Vec<Option<std::net::IpAddr>> = {
            let m = self.members();
            names.iter().map(|n| m.address(n, now)).collect()
        };
        names
            .iter()
            .zip(known)
            .map(|(name, ip)| Peer {
                name: name.clone(),
                addr: ip
                    .zip(port_of(name))
                    .map(SocketAddr::from)
                    .or_else(|| resolve_one(name)),
            })
            .collect()
    }

    /// Whether this pod is still announcing itself (and so not ready).
    pub fn is_joining(&self) -> bool {
        self.joining.load(Ordering::Acquire)
    }
}

/// `host:port` with a host of letters, digits, dots and dashes: nothing that could change the
/// meaning of the URL or the SQL string it goes into.
pub fn valid_peer(p: &str) -> bool {
    let Some((host, port)) = p.rsplit_once(':') else {
        return false;
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && port.parse::<u16>().is_ok_and(|p| p > 0)
}

fn port_of(name: &str) -> Option<u16> {
    name.rsplit_once(':')?.1.parse().ok()
}

/// Resolves every peer now (the engine's own DNS cache would keep a restarted pod's old
/// address); a name that does not resolve has no address.
pub fn resolve(names: &[String]) -> Vec<Peer> {
    names
        .iter()
        .map(|name| Peer {
            name: name.clone(),
            addr: resolve_one(name),
        })
        .collect()
}

/// What `name` resolves to now, an IPv4 address first.
fn resolve_one(name: &str) -> Option<SocketAddr> {
    let all: Vec<SocketAddr> = name.to_socket_addrs().ok()?.collect();
    all.iter().find(|a| a.is_ipv4()).or(all.first()).copied()
}

/// `url(...)` reading `what` from every address of `addrs` at once, in `format` with the
/// columns `structure`. Pods on one port are one `url()` whose host is a glob (`{a,b}`), which
/// the engine fetches side by side; the engine checks the URL's port before it expands a glob,
/// so pods on different ports (tests on one machine) are a `UNION ALL` of such reads.
pub fn url_sql(
    addrs: &[SocketAddr],
    what: &Partial,
    format: &str,
    structure: &str,
    token: &str,
) -> String {
    let mut by_port: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for a in addrs {
        let host = match a {
            SocketAddr::V4(v4) => v4.ip().to_string(),
            SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        };
        by_port.entry(a.port()).or_default().push(host);
    }
    let one = |port: u16, hosts: &[String]| {
        let hosts = if hosts.len() == 1 {
            hosts[0].clone()
        } else {
            format!("{{{}}}", hosts.join(","))
        };
        let url = format!("http://{hosts}:{port}{PARTIAL_PATH}?p={}", what.encode());
        format!(
            "url({}, {format}, {}, headers('Authorization' = {}))",
            quote_str(&url),
            quote_str(structure),
            quote_str(&format!("Bearer {token}"))
        )
    };
    let reads: Vec<String> = by_port.iter().map(|(p, h)| one(*p, h)).collect();
    if reads.len() == 1 {
        return reads[0].clone();
    }
    let union: Vec<String> = reads.iter().map(|r| format!("SELECT * FROM {r}")).collect();
    format!("({})", union.join(" UNION ALL "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_does_not_depend_on_the_time_is_asked_without_it() {
        let values = Partial::TagValues {
            db: "d".into(),
            q: "SHOW TAG VALUES WITH KEY = host".into(),
            params: None,
            statement: 0,
            now: 7,
        };
        let Partial::TagValues { now, q, .. } = values.timeless() else {
            panic!("the same kind of request");
        };
        assert_eq!((now, q.as_str()), (0, "SHOW TAG VALUES WITH KEY = host"));
        let select = Partial::Select {
            q: "SELECT v FROM m WHERE time > now() - 1h".into(),
            params: None,
            statement: 0,
            db: "d".into(),
            rp: "autogen".into(),
            measurement: "m".into(),
            fields: Default::default(),
            tag_keys: vec![],
            now: 7,
            handed: vec![],
            ordered_sums: false,
        };
        assert_eq!(
            select.timeless(),
            select,
            "a share of points keeps its time"
        );
    }

    /// Three servers on one machine: every join reaches the others from 127.0.0.1, and a
    /// pod remembered there would be read as the pod at 127.0.0.1 (counted twice, its own
    /// data missing) until the address expired.
    #[test]
    fn a_join_from_a_loopback_address_is_reached_by_its_name() {
        let peers = ["127.0.0.1:18087", "127.0.0.2:18087", "127.0.0.3:18087"];
        let cfg = ClusterConfig {
            peers: peers.iter().map(|p| p.to_string()).collect(),
            token: Some("t".into()),
            ..Default::default()
        };
        let c = Cluster::new(&cfg, peers[0]).unwrap();
        let join = |name: &str, from: &str| {
            c.record(announce::Announce::Join, name, from.parse().unwrap())
                .unwrap()
        };
        join(peers[1], "10.1.2.3");
        join(peers[2], "127.0.0.1");
        let found = c.resolve(&[peers[1].to_string(), peers[2].to_string()]);
        let addr = |a: &str| Some(a.parse::<SocketAddr>().unwrap());
        assert_eq!(found[0].addr, addr("10.1.2.3:18087"));
        assert_eq!(found[1].addr, addr(peers[2]));
        // The same from an IPv4-mapped IPv6 loopback.
        join(peers[1], "::ffff:127.0.0.1");
        let found = c.resolve(&[peers[1].to_string()]);
        assert_eq!(found[0].addr, addr(peers[1]));
    }

    #[test]
    fn peers_must_be_plain_host_and_port() {
        assert!(valid_peer(
            "sluice-t-0.sluice-t-peers.ns.svc.cluster.local:8086"
        ));
        assert!(valid_peer("127.0.0.1:18086"));
        for bad in [
            "host", "host:0", "host:x", ":80", "a,b:80", "a}:80", "a'b:80", "h/x:80",
        ] {
            assert!(!valid_peer(bad), "{bad}");
        }
    }

    #[test]
    fn a_request_travels_as_url_safe_text_and_back() {
        let p = Partial::Select {
            q: "SELECT mean(\"v\") + 1 FROM cpu WHERE host =~ /a|b/ AND x = '{,}'".into(),
            params: Some(r#"{"h": "a"}"#.into()),
            statement: 0,
            db: "db".into(),
            rp: "autogen".into(),
            measurement: "cpu".into(),
            fields: [("v".to_string(), "float".to_string())].into(),
            tag_keys: vec!["host".into()],
            now: 1,
            handed: vec![(3, vec!["t".to_string()])],
            ordered_sums: false,
        };
        let e = p.encode();
        assert!(e
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(Partial::decode(&e).unwrap(), p);
        let addrs: Vec<SocketAddr> = vec![
            "10.0.0.1:8086".parse().unwrap(),
            "10.0.0.2:8086".parse().unwrap(),
        ];
        let sql = url_sql(&addrs, &Partial::Ping, "RawBLOB", "x String", "t'k");
        assert!(
            sql.starts_with("url('http://{10.0.0.1,10.0.0.2}:8086/internal/v1/partial?p="),
            "{sql}"
        );
        assert!(sql.contains("'Bearer t\\'k'"), "{sql}");
        let addrs: Vec<SocketAddr> = vec![
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        ];
        let sql = url_sql(&addrs, &Partial::Ping, "RawBLOB", "x String", "t");
        assert!(
            sql.starts_with("(SELECT * FROM url('http://127.0.0.1:1/"),
            "{sql}"
        );
        assert!(
            sql.contains(" UNION ALL SELECT * FROM url('http://127.0.0.1:2/"),
            "{sql}"
        );
    }
}
