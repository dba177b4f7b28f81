//! Which of a tenant's pods have windows, and which windows say nothing about capacity: a pod
//! counts once Ready; its first 30 s it is warming; and while a scale-down settles no window
//! counts.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

use crate::crd::IngestTenant;

/// A pod counts as warming this long after its container started.
const WARMING: Duration = Duration::from_secs(30);

/// Ready, and not on its way out.
pub fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How long after a scale-down the tenant's windows say nothing about its pods' capacity.
const AFTER_SCALE_DOWN: Duration = Duration::from_secs(60);

/// Whether `t`'s pods are settling after a scale-down: a hand-off is under way, or one ended
/// less than [`AFTER_SCALE_DOWN`] ago (`since_handoff_s`: how long ago this loop last saw one
/// under way), or the scale-down was decided less than that ago (what an operator that just
/// started knows). The pod that received the data merges it and answers slowly for a while;
/// judged like any window, that lowered the knee below the load that had just been scaled in
/// for, and the autoscaler added the pod back. The minute counts from the hand-off's end, not
/// from the decision: a hand-off of half a minute left the receiving pod only the other half.
pub fn settling(t: &IngestTenant, now: DateTime<Utc>, since_handoff_s: Option<f64>) -> bool {
    if since_handoff_s.is_some_and(|s| s < AFTER_SCALE_DOWN.as_secs_f64()) {
        return true;
    }
    let Some(s) = t.status.as_ref() else {
        return false;
    };
    s.decommission.is_some()
        || s.last_scaling.as_ref().is_some_and(|d| {
            d.to < d.from && (now - d.time.0).num_seconds() < AFTER_SCALE_DOWN.as_secs() as i64
        })
}

/// Started less than [`WARMING`] ago: caches, pre-touched memory and the WAL replay settle.
pub fn warming(p: &Pod) -> bool {
    let started = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref());
    started.is_some_and(|t| (Utc::now() - t.0).num_seconds() < WARMING.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::crd::{IngestTenantStatus, ScalingDecision};

    fn scaled(from: i32, to: i32, secs_ago: i64) -> IngestTenant {
        let mut t = crate::testing::tenant(crate::testing::autoscaled());
        t.status = Some(IngestTenantStatus {
            last_scaling: Some(ScalingDecision {
                time: Time(Utc::now() - k8s_openapi::chrono::Duration::seconds(secs_ago)),
                from,
                to,
                reason: "Forecast".into(),
            }),
            ..Default::default()
        });
        t
    }

    #[test]
    fn windows_right_after_a_scale_down_say_nothing() {
        let now = Utc::now();
        assert!(settling(&scaled(2, 1, 10), now, None));
        assert!(!settling(&scaled(2, 1, 120), now, None), "long after");
        assert!(!settling(&scaled(1, 2, 10), now, None), "a scale-up");
        assert!(!settling(
            &crate::testing::tenant(crate::testing::autoscaled()),
            now,
            None
        ));
        // Decided two minutes ago, but the hand-off ended 20 s ago: the receiving pod is
        // still merging what it got.
        assert!(settling(&scaled(2, 1, 120), now, Some(20.0)));
        assert!(!settling(&scaled(2, 1, 120), now, Some(61.0)));
    }
}
