//! Which pods a read gathers from: the configured peers and the peer file, corrected by what
//! the pods announce about themselves.
//!
//! The peer file follows the replica count only when the kubelet refreshes the mounted
//! ConfigMap (about a minute). Until then a running pod would leave a new pod out of its reads
//! (a wrong answer, not an error) and keep asking a pod that was deleted (an error). So pods
//! announce themselves (see [`super::announce`]): a pod joins every running pod before it
//! reports ready, and so before the Service sends it a write; a decommissioned pod leaves once
//! it holds nothing, before the operator deletes it. When the file catches up the corrections
//! it now agrees with are dropped.
//!
//! A pod that joins is also reached at the address it joined from for a while
//! ([`ADDRESS_TTL`]): a pod recreated under the same name has a new address, and the cluster
//! DNS may answer the old one for up to its cache time (30 s with CoreDNS's defaults), where a
//! pooled connection to the old address would wait out the receive timeout.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a joined pod is reached at the address it joined from rather than by its name:
/// longer than the cluster DNS caches a pod's old address, short enough that a pod whose
/// later join was lost is soon found by name again.
pub const ADDRESS_TTL: Duration = Duration::from_secs(90);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Members {
    /// Pods that joined (the peer file may not list them yet), with the address each joined
    /// from and when.
    joined: BTreeMap<String, Option<(IpAddr, Instant)>>,
    /// Pods that left and that the peer file may still list.
    left: BTreeSet<String>,
}

impl Members {
    pub fn join(&mut self, name: &str, from: Option<IpAddr>, now: Instant) {
        self.left.remove(name);
        self.joined
            .insert(name.to_string(), from.map(|ip| (ip, now)));
    }

    /// Where pod `name` joined from, if it did within [`ADDRESS_TTL`] of `now`.
    pub fn address(&self, name: &str, now: Instant) -> Option<IpAddr> {
        match self.joined.get(name) {
            Some(Some((ip, at))) if now.saturating_duration_since(*at) < ADDRESS_TTL => Some(*ip),
            _ => None,
        }
    }

    pub fn leave(&mut self, name: &str) {
        self.joined.remove(name);
        self.left.insert(name.to_string());
    }

    /// The peer file now lists `file`. The operator writes a pod's name there before the pod
    /// exists and removes it only after the pod left, so a joined pod the new list lacks was
    /// removed since (its leave was lost), and a pod that left and is no longer listed is gone
    /// for good: neither correction is needed any more.
    pub fn file_changed(&mut self, file: &[String]) {
        self.joined.retain(|p, _| file.contains(p));
        self.left.retain(|p| file.contains(p));
    }

    /// `configured` (the configured peers, then the file's) corrected: without the pods that
    /// left, with the pods that joined.
    pub fn apply(&self, configured: &[String]) -> Vec<String> {
        let mut out: Vec<String> = configured
            .iter()
            .filter(|p| !self.left.contains(*p))
            .cloned()
            .collect();
        for p in self.joined.keys() {
            if !out.contains(p) && !configured.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// Whether `name` may join a tenant whose configured pods are `configured`: pods named under a
/// domain (`<tenant>-<i>.<headless>.<namespace>.svc:<port>`) admit only names under the same
/// domain and port, so a misdirected announcement cannot add a stranger to every read.
/// Addresses (tests on one machine) are not checked beyond their form.
pub fn plausible(configured: &[String], name: &str) -> bool {
    if !super::valid_peer(name) {
        return false;
    }
    let domain = |p: &str| -> Option<String> {
        let (host, port) = p.rsplit_once(':')?;
        if host.parse::<std::net::IpAddr>().is_ok() {
            return None;
        }
        let (_, rest) = host.split_once('.')?;
        Some(format!("{rest}:{port}"))
    };
    let named: Vec<String> = configured.iter().filter_map(|p| domain(p)).collect();
    if named.is_empty() {
        return true;
    }
    domain(name).is_some_and(|d| named.contains(&d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_joined_pod_is_read_until_the_file_drops_it_and_a_left_pod_is_not() {
        let file = names(&["t-0.h:1", "t-1.h:1"]);
        let mut m = Members::default();
        m.join("t-2.h:1", None, Instant::now());
        assert_eq!(m.apply(&file), names(&["t-0.h:1", "t-1.h:1", "t-2.h:1"]));
        // The kubelet's refresh lists it: nothing changes.
        let file3 = names(&["t-0.h:1", "t-1.h:1", "t-2.h:1"]);
        m.file_changed(&file3);
        assert_eq!(m.apply(&file3), file3);
        // It leaves while the file still lists it, then the file drops it.
        m.leave("t-2.h:1");
        assert_eq!(m.apply(&file3), file);
        m.file_changed(&file);
        assert_eq!(m, Members::default());
        // A pod that left comes back (scaled up again): it joins and is read again.
        m.leave("t-1.h:1");
        assert_eq!(m.apply(&file), names(&["t-0.h:1"]));
        m.join("t-1.h:1", None, Instant::now());
        assert_eq!(m.apply(&file), file);
    }

    #[test]
    fn a_joined_pod_is_reached_where_it_joined_from_for_a_while() {
        let mut m = Members::default();
        let t0 = Instant::now();
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        m.join("t-1.h:1", Some(ip), t0);
        assert_eq!(m.address("t-1.h:1", t0 + Duration::from_secs(5)), Some(ip));
        assert_eq!(m.address("t-1.h:1", t0 + ADDRESS_TTL), None);
        assert_eq!(m.address("t-0.h:1", t0), None);
        // Joining again (restarted elsewhere) moves it; leaving forgets it.
        let ip2: IpAddr = "10.0.0.9".parse().unwrap();
        m.join("t-1.h:1", Some(ip2), t0 + ADDRESS_TTL);
        assert_eq!(m.address("t-1.h:1", t0 + ADDRESS_TTL), Some(ip2));
        m.leave("t-1.h:1");
        assert_eq!(m.address("t-1.h:1", t0 + ADDRESS_TTL), None);
    }

    #[test]
    fn a_joined_pod_the_file_no_longer_lists_was_removed() {
        let mut m = Members::default();
        m.join("t-2.h:1", None, Instant::now());
        let file = names(&["t-0.h:1", "t-1.h:1"]);
        m.file_changed(&file);
        assert_eq!(m.apply(&file), file);
    }

    #[test]
    fn only_pods_under_the_tenants_domain_and_port_may_join() {
        let file = names(&["t-0.t-headless.ns.svc:8086", "t-1.t-headless.ns.svc:8086"]);
        assert!(plausible(&file, "t-2.t-headless.ns.svc:8086"));
        assert!(!plausible(&file, "t-2.t-headless.other.svc:8086"));
        assert!(!plausible(&file, "t-2.t-headless.ns.svc:9999"));
        assert!(!plausible(&file, "evil.example.com:8086"));
        assert!(!plausible(&file, "10.0.0.9:8086"));
        assert!(!plausible(&file, "t-2.t-headless.ns.svc"));
        let local = names(&["127.0.0.1:18086", "127.0.0.1:18087"]);
        assert!(plausible(&local, "127.0.0.1:18088"));
        assert!(plausible(&[], "127.0.0.1:18088"));
    }
}
