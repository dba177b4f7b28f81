//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several operator replicas
//! exactly one reconciles.
//!
//! The algorithm is client-go's: a candidate takes the Lease when it is free (no holder, or a
//! holder that released it) or when the record has not changed for a whole lease duration *as
//! measured on the candidate's own monotonic clock* (so clock skew between nodes cannot make
//! two leaders). Every write is an update with the resourceVersion read just before it, so two
//! candidates racing for the same Lease cannot both win: the loser gets a 409. The leader renews
//! every `renew_period` and gives up (stops reconciling) if it could not renew within
//! `renew_deadline`, which is shorter than the lease duration: it stops acting before anyone
//! else may start.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::cancel::Cancel;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// Unique per replica (the pod name in-cluster).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    /// How often the leader renews and candidates retry.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The last version of the Lease record this candidate saw, and when it first saw it.
#[derive(Debug, Clone)]
struct Observed {
    resource_version: Option<String>,
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    at: Instant,
}

pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    observed: Mutex<Option<Observed>>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, cfg: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: Mutex::new(None),
        }
    }

    pub fn identity(&self) -> &str {
        &self.cfg.identity
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.cfg.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// One attempt: creates, renews or takes over the Lease. `Ok(true)` means this replica is
    /// the leader until at least `renew_deadline` from now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = MicroTime(Utc::now());
        let Some(current) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    info!(identity = %self.cfg.identity, lease = %self.cfg.name, "created the leader Lease");
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };

        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let me = holder.as_deref() == Some(self.cfg.identity.as_str());

        // Track when the record last changed, on our own clock.
        let expired = {
            let mut obs = self.observed.lock().await;
            let changed = match obs.as_ref() {
                None => true,
                Some(o) => {
                    o.resource_version != current.metadata.resource_version
                        || o.holder != holder
                        || o.renew_time != spec.renew_time
                }
            };
            if changed {
                *obs = Some(Observed {
                    resource_version: current.metadata.resource_version.clone(),
                    holder: holder.clone(),
                    renew_time: spec.renew_time.clone(),
                    at: Instant::now(),
                });
            }
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.cfg.lease_duration);
            obs.as_ref().is_some_and(|o| o.at.elapsed() >= duration)
        };

        if !me && holder.is_some() && !expired {
            return Ok(false);
        }

        let mut next = current.clone();
        let s = next.spec.get_or_insert_with(LeaseSpec::default);
        if !me {
            s.acquire_time = Some(now.clone());
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            s.holder_identity = Some(self.cfg.identity.clone());
        }
        s.renew_time = Some(now);
        s.lease_duration_seconds = Some(self.lease_seconds());
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &next)
            .await
        {
            Ok(updated) => {
                if !me {
                    info!(identity = %self.cfg.identity, previous = ?holder, "acquired the leader Lease");
                }
                let mut obs = self.observed.lock().await;
                *obs = Some(Observed {
                    resource_version: updated.metadata.resource_version.clone(),
                    holder: Some(self.cfg.identity.clone()),
                    renew_time: updated.spec.as_ref().and_then(|s| s.renew_time.clone()),
                    at: Instant::now(),
                });
                Ok(true)
            }
            // Someone else wrote the Lease between our read and write: they won this round.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica is the leader. Returns `false` if `cancel` fired first.
    pub async fn acquire(&self, cancel: &Cancel) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(e) => warn!(error = %e, "cannot read or write the leader Lease"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = cancel.cancelled() => return false,
            }
        }
    }

    /// Renews until `cancel` fires (returns `true`) or a renewal deadline is missed (returns
    /// `false`: leadership is lost and the caller must stop acting at once).
    pub async fn hold(&self, cancel: &Cancel) -> bool {
        let mut last_renewed = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = cancel.cancelled() => return true,
            }
            let attempt =
                tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(true)) => last_renewed = Instant::now(),
                // A 409 or a new holder: not renewed this round. The deadline below decides; by
                // construction it passes before anyone else may take over.
                Ok(Ok(false)) => {
                    warn!(identity = %self.cfg.identity, "leader Lease not renewed this round")
                }
                Ok(Err(e)) => warn!(error = %e, "cannot renew the leader Lease"),
                Err(_) => warn!("renewing the leader Lease timed out"),
            }
            if last_renewed.elapsed() >= self.cfg.renew_deadline {
                warn!(identity = %self.cfg.identity, "leader Lease not renewed within the deadline");
                return false;
            }
        }
    }

    /// Gives the Lease up (on shutdown) so that another replica takes over at once instead of
    /// after a lease duration.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut current) = self.api.get_opt(&self.cfg.name).await? else {
            return Ok(());
        };
        let spec = current.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Utc::now()));
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => {
                info!(identity = %self.cfg.identity, "released the leader Lease");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}
