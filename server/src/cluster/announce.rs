//! A pod telling the tenant's other pods that it joins or leaves (see [`super::members`]).
//!
//! `POST /internal/v1/peers?join=<name>` (or `leave=`) with the cluster token. A pod that is
//! not running (no address, connection refused) is not asked again: it reads the peer file
//! when it starts, and the operator wrote the file before this pod existed. A running pod that
//! does not record the announcement is asked again until `patience` runs out; then this pod
//! goes on, and that pod's reads depend on its peer file again until the kubelet refreshes it.

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

/// Announces `what` about this pod to every other pod of the tenant. Blocks: up to `patience`
/// while a running pod does not record it. Nothing to do when this pod cannot name itself
/// among its peers (`None`).
pub fn announce(cluster: &Cluster, what: Announce, patience: Duration) -> Option<Told> {
    let token = cluster.token()?.to_string();
    if cluster.configured_peers().len() < 2 {
        return Some(Told::default());
    }
    let me = cluster.me()?;
    let mut pending: Vec<String> = cluster
        .configured_peers()
        .into_iter()
        .chain(cluster.peers())
        .filter(|p| *p != me)
        .collect();
    pending.sort();
    pending.dedup();
    let deadline = Instant::now() + patience;
    let mut told = Told::default();
    let mut last: Vec<(String, String)> = Vec::new();
    loop {
        last.clear();
        for peer in std::mem::take(&mut pending) {
            match ask(&peer, &token, what, &me) {
                Reply::Recorded => told.recorded.push(peer),
                Reply::NotRunning => told.not_running.push(peer),
                Reply::Refused(why) => told.unanswered.push((peer, why)),
                Reply::Failed(why) => {
                    last.push((peer.clone(), why));
                    pending.push(peer);
                }
            }
        }
        if pending.is_empty() || Instant::now() >= deadline {
            told.unanswered.extend(last);
            return Some(told);
        }
        std::thread::sleep(Duration::from_millis(250));
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
