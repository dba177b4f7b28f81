//! The finalizer's cleanup branch.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use tracing::info;

use super::{Context, Error};
use crate::builders;
use crate::crd::{IngestTenant, ReclaimPolicy};

/// The Cleanup branch: applies the reclaim policy to the tenant's volumes. Everything else
/// is owned by the tenant and goes with it through garbage collection.
pub(super) async fn cleanup(tenant: &IngestTenant, ctx: &Context) -> Result<Action, Error> {
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let name = tenant.name_any();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let claims = pvcs
        .list(&ListParams::default().labels(&builders::selector_string(&name)))
        .await?;
    let names: Vec<String> = claims.items.iter().map(|c| c.name_any()).collect();
    match tenant.spec.storage.reclaim_policy {
        ReclaimPolicy::Delete => {
            for n in &names {
                match pvcs.delete(n, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if !names.is_empty() {
                let msg = format!(
                    "deleting {} PersistentVolumeClaim(s) (storage.reclaimPolicy Delete): {}",
                    names.len(),
                    names.join(", ")
                );
                ctx.event(tenant, EventType::Normal, "VolumesDeleted", "Delete", msg)
                    .await;
            }
        }
        ReclaimPolicy::Retain => {
            if !names.is_empty() {
                let msg = format!(
                    "keeping {} PersistentVolumeClaim(s) (storage.reclaimPolicy Retain): {}; \
                     a tenant of the same name reuses them, or delete them by hand",
                    names.len(),
                    names.join(", ")
                );
                ctx.event(tenant, EventType::Normal, "VolumesRetained", "Delete", msg)
                    .await;
            }
        }
    }
    info!(tenant = %builders::tenant_key(tenant), policy = tenant.spec.storage.reclaim_policy.as_str(), volumes = names.len(), "tenant deleted");
    Ok(Action::await_change())
}
