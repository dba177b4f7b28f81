//! How a pod finds its own address among its peers': a gathering pod computes its own share
//! in its gathering query there instead of asking itself over HTTP (see
//! [`crate::query::gather::Urls::url_with_own`]).

use std::net::SocketAddr;
use std::time::Instant;

use super::Cluster;

/// How long a pod that could not find itself among its peers waits before looking again.
pub const OWN_ADDR_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a pod asks the address it learned as its own whether it still answers there
/// with this process's boot id: a host whose address changed while the process lives, and
/// whose old address another pod then took, would otherwise read that pod's share as its
/// own and count its own twice.
pub const OWN_ADDR_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// This pod's address among its peers' as learned from their answers, and when it was last
/// looked for and last confirmed.
#[derive(Default)]
pub(super) struct Own {
    learned: Option<SocketAddr>,
    looked: Option<Instant>,
    checked: Option<Instant>,
}

impl Cluster {
    /// The address among its peers' at which this pod answers them, once known: the one
    /// whose series version carried this process's boot id ([`Cluster::learn_own_addr`]), or
    /// the address this pod listens on when that is a specific one (no other process can
    /// listen there). A gathering pod reads its own share without a round trip to itself
    /// there. Never guessed from a name, which could send this pod's share to another pod.
    pub fn own_addr(&self) -> Option<SocketAddr> {
        let known = self.own().learned;
        known.or_else(|| self.listen.filter(|a| !a.ip().is_unspecified()))
    }

    fn own(&self) -> std::sync::MutexGuard<'_, Own> {
        self.own.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `addr` answered with this process's boot id: it is this pod, until an
    /// answer there says otherwise ([`Cluster::own_addr_to_check`]).
    pub fn learn_own_addr(&self, addr: SocketAddr) {
        let mut own = self.own();
        own.learned = Some(addr);
        own.checked = Some(Instant::now());
    }

    /// Forgets `addr` as this pod's own (it answered with another process's boot id, or not
    /// at all); the pod reads its share over `url()` like any pod's until it finds itself
    /// again.
    pub fn forget_own_addr(&self, addr: SocketAddr) {
        let mut own = self.own();
        if own.learned == Some(addr) {
            tracing::warn!(%addr, "this pod no longer answers at the address it learned as its own");
            own.learned = None;
            own.looked = None;
        }
    }

    /// Whether the learned address is due to be asked again ([`OWN_ADDR_CHECK`]).
    pub fn own_addr_check_due(&self) -> bool {
        Self::check_due(&self.own(), Instant::now())
    }

    /// The learned address, when it is due to be asked again; it then counts as asked.
    pub fn own_addr_to_check(&self) -> Option<SocketAddr> {
        self.own_addr_to_check_at(Instant::now())
    }

    fn own_addr_to_check_at(&self, now: Instant) -> Option<SocketAddr> {
        let mut own = self.own();
        if !Self::check_due(&own, now) {
            return None;
        }
        own.checked = Some(now);
        own.learned
    }

    fn check_due(own: &Own, now: Instant) -> bool {
        own.learned.is_some()
            && own
                .checked
                .is_none_or(|t| now.duration_since(t) >= OWN_ADDR_CHECK)
    }

    /// Whether to look for this pod's address among `among` (the pods' addresses now): it is
    /// not known there ([`Cluster::own_addr`]: a listen address that is none of them does not
    /// count), and was not looked for in the last [`OWN_ADDR_RETRY`] (a pod not among its
    /// peers yet would otherwise ask every pod on every read).
    pub fn should_look_for_own_addr(&self, among: &[SocketAddr]) -> bool {
        if self.own_addr().is_some_and(|a| among.contains(&a)) {
            return false;
        }
        let mut own = self.own();
        let now = Instant::now();
        if own
            .looked
            .is_some_and(|t| now.duration_since(t) < OWN_ADDR_RETRY)
        {
            return false;
        }
        own.looked = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::config::ClusterConfig;

    /// A tenant of two pods by name, with a token.
    fn two_pods() -> ClusterConfig {
        ClusterConfig {
            peers: vec!["a.pods:8086".into(), "b.pods:8086".into()],
            token: Some("t".into()),
            ..Default::default()
        }
    }

    /// A pod finds itself among its peers only by what cannot be another pod: the specific
    /// address it listens on, or an address that answered with its boot id.
    #[test]
    fn a_pod_knows_its_own_address_only_from_its_listener_or_its_boot_id() {
        let cfg = two_pods();
        let own: SocketAddr = "127.0.0.2:8086".parse().unwrap();
        let specific = Cluster::new(&cfg, "127.0.0.2:8086").unwrap();
        assert_eq!(specific.own_addr(), Some(own));
        assert!(!specific.should_look_for_own_addr(&[own]));

        let every = Cluster::new(&cfg, "0.0.0.0:8086").unwrap();
        assert_eq!(
            every.own_addr(),
            None,
            "not guessed from the wildcard listener"
        );
        let learned: SocketAddr = "10.0.0.7:8086".parse().unwrap();
        assert!(every.should_look_for_own_addr(&[learned]));
        assert!(
            !every.should_look_for_own_addr(&[learned]),
            "looked for again only after OWN_ADDR_RETRY"
        );
        every.learn_own_addr(learned);
        assert_eq!(every.own_addr(), Some(learned));
        assert!(!every.should_look_for_own_addr(&[learned]));

        // A specific listen address that none of the pods' addresses is does not stop the
        // look by boot id.
        let elsewhere = Cluster::new(&cfg, "192.168.1.9:8086").unwrap();
        assert!(elsewhere.should_look_for_own_addr(&[learned]));
        elsewhere.learn_own_addr(learned);
        assert_eq!(
            elsewhere.own_addr(),
            Some(learned),
            "what answered as this pod wins"
        );
    }

    /// A learned address is asked again every OWN_ADDR_CHECK, and forgotten when it does not
    /// answer as this pod; a specific listen address is never in doubt.
    #[test]
    fn a_learned_own_address_is_checked_again_and_forgotten_when_another_answers() {
        let cfg = two_pods();
        let specific = Cluster::new(&cfg, "127.0.0.2:8086").unwrap();
        assert!(!specific.own_addr_check_due());
        assert_eq!(specific.own_addr_to_check(), None);

        let every = Cluster::new(&cfg, "0.0.0.0:8086").unwrap();
        let learned: SocketAddr = "10.0.0.7:8086".parse().unwrap();
        let other: SocketAddr = "10.0.0.8:8086".parse().unwrap();
        every.learn_own_addr(learned);
        let now = Instant::now();
        assert!(!every.own_addr_check_due(), "just learned");
        assert_eq!(every.own_addr_to_check_at(now), None);
        let later = now + OWN_ADDR_CHECK;
        assert_eq!(every.own_addr_to_check_at(later), Some(learned));
        assert_eq!(
            every.own_addr_to_check_at(later),
            None,
            "asked once per interval"
        );
        every.forget_own_addr(other);
        assert_eq!(
            every.own_addr(),
            Some(learned),
            "only the learned one is forgotten"
        );
        every.forget_own_addr(learned);
        assert_eq!(every.own_addr(), None);
        assert!(
            every.should_look_for_own_addr(&[learned, other]),
            "looked for again at once"
        );
    }
}
