//! The status stage: the status is written only when it differs, and Events mark the
//! decisions and phase changes, never "reconciled, nothing to do".

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;

use super::{Context, Error};
use crate::crd::{IngestTenant, IngestTenantStatus, Phase, FIELD_MANAGER};
use crate::status::{self, Observation};

/// Writes the status if it changed and publishes Events for phase changes.
pub(super) async fn update_status(
    tenant: &IngestTenant,
    ctx: &Context,
    obs: &Observation<'_>,
) -> Result<IngestTenantStatus, Error> {
    let prev = tenant.status.as_ref();
    let next = status::compute(prev, obs, Time(Utc::now()));
    if prev == Some(&next) {
        return Ok(next);
    }
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<IngestTenant> = Api::namespaced(ctx.client.clone(), &ns);
    // The autoscaler's fields are its own (it writes them under its field manager): applying
    // them from this reconcile's read could put back an older knee or last scaling.
    let applied = IngestTenantStatus {
        knee: None,
        traffic: None,
        plateau: None,
        rate: None,
        p95: None,
        last_scaling: None,
        ..next.clone()
    };
    let patch = serde_json::json!({
        "apiVersion": format!("{}/v1alpha1", crate::crd::GROUP),
        "kind": "IngestTenant",
        "status": applied,
    });
    api.patch_status(
        &tenant.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    ctx.metrics.status_writes.inc();

    let prev_phase = prev.and_then(|p| p.phase);
    let degraded_msg = |s: Option<&IngestTenantStatus>| {
        s.and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == status::DEGRADED && c.status == "True")
        })
        .map(|c| (c.reason.clone(), c.message.clone()))
    };
    let (before, after) = (degraded_msg(prev), degraded_msg(Some(&next)));
    if after.is_some() && after != before {
        let (reason, message) = after.unwrap_or_default();
        ctx.event(tenant, EventType::Warning, &reason, "Degrade", message)
            .await;
    }
    if next.phase != prev_phase {
        match next.phase {
            Some(Phase::Running) => {
                let note = format!("all {} replicas are ready", next.ready_replicas);
                ctx.event(tenant, EventType::Normal, "Running", "Observe", note)
                    .await;
            }
            Some(Phase::Stopped) => {
                ctx.event(
                    tenant,
                    EventType::Normal,
                    "Stopped",
                    "Observe",
                    "scaled to zero replicas".into(),
                )
                .await;
            }
            _ => {}
        }
        if prev_phase == Some(Phase::Degraded) && next.phase != Some(Phase::Degraded) {
            ctx.event(
                tenant,
                EventType::Normal,
                "Recovered",
                "Observe",
                "no longer degraded".into(),
            )
            .await;
        }
    }
    Ok(next)
}
