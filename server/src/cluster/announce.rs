//! A pod telling the tenant's other pods that it joins or leaves (see [`super::members`]).
//!
//! `POST /internal/v1/peers?join=<name>` (or `leave=`) with the cluster token, to every pod
//! this pod reads from (not to pods that left). A pod that is not running (no address,
//! connection refused) is not asked again: it reads the peer file when it starts, and the
//! operator wrote the file before this pod existed. A running pod that does not record the
//! announcement is asked again until `patience` runs out; then this pod goes on, and that
//! pod's reads depend on its peer file again until the kubelet refreshes it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Cluster, PEERS_PATH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    Join,
    Leave,
}

impl Announce {
    pub fn param(self) -> &'static str {
        match self {
            Announce::Join => "join",
            Announce::Leave => "leave",
        }
    }
}

/// Which pods recorded an announcement, and which could not be asked.
#[derive(Debug, Default)]
pub struct Told {
    pub recorded: Vec<String>,
    pub not_running: Vec<String>,
    /// Pods that answered with an error or not at all until `patience` ran out, with the last
    /// reason.
    pub unanswered: Vec<(String, String)>,
}

enum Reply {
    Recorded,
    NotRunning,
    /// Worth asking again.
    Failed(String),
    /// Asking again would get the same answer (no such endpoint, another token).
    Refused(String),
}

/// Announces `what` about this pod to every other pod it reads from. Blocks up to `patience`:
/// the pods are asked side by side, each again while it answers with an error that may pass,
/// and a pod whose name takes long to resolve (a pod just deleted, under a resolver that is
/// slow to deny it) cannot hold this pod longer. Nothing to do when this pod cannot name
/// itself among its peers (`None`).
pub fn announce(cluster: &Cluster, what: Announce, patience: Duration) -> Option<Told> {
    let token = cluster.token()?.to_string();
    if cluster.configured_peers().len() < 2 {
        return Some(Told::default());
    }
    let me = cluster.me()?;
    // `/ready` says why this pod is not ready yet while it joins.
    let _joining = (what == Announce::Join).then(|| Joining::start(cluster));
    let mut pending: Vec<String> = cluster
        .peers()
        .into_iter()
        .filter(|p| *p != me && !(what == Announce::Join && later(p, &me)))
        .collect();
    let deadline = Instant::now() + patience;
    let mut told = Told::default();
    loop {
        let (tx, rx) = std::sync::mpsc::channel();
        for peer in &pending {
            let (tx, peer, token, me) = (tx.clone(), peer.clone(), token.clone(), me.clone());
            // Detached: one stuck in name resolution is left behind at the deadline.
            std::thread::spawn(move || {
                let reply = ask(&peer, &token, what, &me);
                let _ = tx.send((peer, reply));
            });
        }
        drop(tx);
        let mut failed: Vec<(String, String)> = Vec::new();
        let mut waiting = pending.len();
        while waiting > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((peer, reply)) = rx.recv_timeout(left) else {
                break;
            };
            waiting -= 1;
            pending.retain(|p| *p != peer);
            match reply {
                Reply::Recorded => told.recorded.push(peer),
                Reply::NotRunning => told.not_running.push(peer),
                Reply::Refused(why) => told.unanswered.push((peer, why)),
                Reply::Failed(why) => failed.push((peer, why)),
            }
        }
        // Still pending: no reply before the deadline.
        let silent = std::mem::take(&mut pending);
        if Instant::now() >= deadline || failed.is_empty() {
            told.unanswered.extend(failed);
            told.unanswered.extend(
                silent
                    .into_iter()
                    .map(|p| (p, format!("no answer within {patience:?}"))),
            );
            return Some(told);
        }
        pending = failed.into_iter().map(|(p, _)| p).collect();
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Marks `cluster` as joining until dropped (every return of [`announce`]).
struct Joining<'a>(&'a Cluster);

impl<'a> Joining<'a> {
    fn start(cluster: &'a Cluster) -> Self {
        cluster.joining.store(true, Ordering::Release);
        Joining(cluster)
    }
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        self.0.joining.store(false, Ordering::Release);
    }
}

/// Whether `peer` is a StatefulSet pod with a higher ordinal than `me` (`<set>-<n>.` names):
/// such a pod starts after this one (or restarts with a fresh peer file), so a joining pod
/// need not ask it, and asking a pod that does not exist yet waits on the resolver.
fn later(peer: &str, me: &str) -> bool {
    let ordinal = |name: &str| -> Option<(String, u32)> {
        let host = name.rsplit_once(':')?.0;
        let (label, domain) = host.split_once('.')?;
        let (set, n) = label.rsplit_once('-')?;
        Some((format!("{set}.{domain}"), n.parse().ok()?))
    };
    match (ordinal(peer), ordinal(me)) {
        (Some((a, n)), Some((b, m))) => a == b && n > m,
        _ => false,
    }
}

fn ask(peer: &str, token: &str, what: Announce, me: &str) -> Reply {
    let url = format!("http://{peer}{PEERS_PATH}");
    let r = ureq::post(&url)
        .timeout(Duration::from_secs(2))
        .set("Authorization", &format!("Bearer {token}"))
        .query(what.param(), me)
        .call();
    match r {
        Ok(_) => Reply::Recorded,
        Err(ureq::Error::Status(code, resp)) => {
            let body = resp.into_string().unwrap_or_default();
            let why = format!("{code}: {}", body.trim());
            if code == 404 || code == 401 || code == 400 {
                Reply::Refused(why)
            } else {
                Reply::Failed(why)
            }
        }
        Err(ureq::Error::Transport(t)) => match t.kind() {
            ureq::ErrorKind::Dns | ureq::ErrorKind::ConnectionFailed => Reply::NotRunning,
            _ => Reply::Failed(t.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::later;

    #[test]
    fn a_joining_pod_skips_the_pods_of_its_set_with_higher_ordinals() {
        let me = "t-1.t-headless.ns.svc:8086";
        assert!(later("t-2.t-headless.ns.svc:8086", me));
        assert!(later("t-10.t-headless.ns.svc:8086", me));
        assert!(!later("t-0.t-headless.ns.svc:8086", me));
        assert!(!later("u-2.t-headless.ns.svc:8086", me));
        assert!(!later("127.0.0.1:18087", "127.0.0.1:18086"));
    }
}
