//! What the operator observed and decided: the tenant's `status`. The autoscaler's own fields
//! are in [`super::autoscaling`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CalibrationStatus, KneeStatus, PlateauStatus, ScalingDecision, TrafficStatus};

/// What the operator observed and decided.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestTenantStatus {
    /// The tenant generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods of the StatefulSet (the `/scale` subresource's status).
    #[serde(default)]
    pub replicas: i32,
    /// Pods passing their readiness probe (`/ready`: WAL replayed, not draining).
    #[serde(default)]
    pub ready_replicas: i32,
    /// Label selector of the pods, for the `/scale` subresource (HPA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Pending, Progressing, Running, Degraded or Stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "phase_schema")]
    pub phase: Option<Phase>,
    /// Ready, Progressing and Degraded, with reason and message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Hash of the rendered server configuration the pods run with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The measured latency knee, per pod (set by the autoscaler, from calibration and live
    /// traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<KneeStatus>,
    /// The last calibration, or the one under way (set by the reconciler, which runs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationStatus>,
    /// What the tenant's writes look like, as its pods count them (set by the autoscaler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<TrafficStatus>,
    /// Current write rate of the tenant, points per second (set by the autoscaler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Current p95 write latency, e.g. `12ms` (set by the autoscaler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95: Option<String>,
    /// The last scaling decision and its reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scaling: Option<ScalingDecision>,
    /// Set by the autoscaler while added pods no longer add acknowledged throughput (the
    /// node's CPU or disk is the limit): it adds no more, and the `Plateau` condition says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau: Option<PlateauStatus>,
    /// The pod leaving the tenant before the StatefulSet shrinks, while it hands its data to
    /// a pod that stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decommission: Option<DecommissionStatus>,
}

/// Tables and rows of a hand-off, planned and done (the leaving pod's own words, which use
/// snake case).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct HandoffProgress {
    #[serde(default)]
    pub tables: u64,
    #[serde(default)]
    pub tables_handed: u64,
    #[serde(default)]
    pub rows_planned: u64,
    #[serde(default)]
    pub rows_copied: u64,
}

/// A scale-down under way: the highest pod hands its data over, then the StatefulSet loses it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecommissionStatus {
    /// Ordinal of the leaving pod.
    pub ordinal: i32,
    /// Ordinal of the pod receiving its data.
    pub receiver: i32,
    /// As the leaving pod reports it: draining, handing_over, finishing, empty, refused,
    /// cancelling; `unknown` while it does not answer.
    pub phase: String,
    /// How far the hand-off is, as the leaving pod counts it.
    #[serde(default)]
    pub progress: HandoffProgress,
    /// Why it is stuck, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `Option<Phase>` as a structural schema: schemars renders an optional enum as `anyOf` with a
/// null branch, which the API server refuses in a CRD.
fn phase_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "nullable": true,
        "enum": ["Pending", "Progressing", "Running", "Degraded", "Stopped"],
    })
}

/// Lifecycle summary, for `kubectl get`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Objects not created yet.
    Pending,
    /// Pods are being created, rolled or are not all ready yet.
    Progressing,
    /// Every desired pod is ready and runs the current configuration.
    Running,
    /// Something needs a human: an invalid spec, a failed apply, failing pods, a missing Secret.
    Degraded,
    /// Scaled to zero replicas.
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Progressing => "Progressing",
            Phase::Running => "Running",
            Phase::Degraded => "Degraded",
            Phase::Stopped => "Stopped",
        }
    }
}
