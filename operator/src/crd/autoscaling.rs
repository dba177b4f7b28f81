//! What a tenant says about its autoscaling (`spec.autoscaling`, its calibration included) and
//! what the operator reports of it (`status.knee`, `status.calibration`, `status.traffic`,
//! `status.lastScaling`, `status.plateau`).
//!
//! Who writes which status field matters, because two writers share the status: the
//! reconciler owns `calibration` (it runs the calibration pod), the autoscaler loop owns
//! `knee`, `rate`, `p95`, `traffic`, `lastScaling` and `plateau` (it reads the pods' metrics
//! and the calibration's result). Each leaves the other's fields alone.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::Rule;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rule_duration;

/// The longest calibration allowed, and the shortest: enough for a pod to start and a ramp
/// of a few steps, and short enough that a forgotten one does not hold a node's CPU for long.
pub const CALIBRATION_TIMEOUT_PATTERN: &str = "^([0-9]{1,4}(s|m))+$";

fn rule_calibration_timeout() -> Rule {
    Rule::new(format!(
        "self.matches('{CALIBRATION_TIMEOUT_PATTERN}') && duration(self) >= duration('1m') && duration(self) <= duration('30m')"
    ))
    .message("must be a duration in seconds and minutes between 1m and 30m, such as 5m or 2m30s")
}

/// The most field values one calibration request may carry: the generator keeps a request per
/// busy connection in memory (about 20 bytes per field value in line protocol).
pub const MAX_FIELD_VALUES_PER_REQUEST: i64 = 1_000_000;

fn rule_payload_size() -> Rule {
    Rule::new(format!(
        "!has(self.pointsPerRequest) || !has(self.fields) || self.pointsPerRequest * self.fields <= {MAX_FIELD_VALUES_PER_REQUEST}"
    ))
    .message(
        "payload.pointsPerRequest x payload.fields must be at most 1000000 field values per \
         request (the load generator holds a request per connection in memory)",
    )
}

/// Autoscaling on the measured latency knee.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingSpec {
    /// Let the operator set `spec.replicas` from the measured knee and p95 latency.
    #[serde(default)]
    pub enabled: bool,
    /// Write latency (p95) the autoscaler keeps below; also the p95 bound of the knee.
    #[serde(default = "default_p95_target")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rule_duration())]
    pub p95_target: String,
    /// A scale-down follows the highest replica count recommended over this long, so that a
    /// lull does not remove a pod that the next burst needs.
    #[serde(default = "default_scale_down_window")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rule_duration())]
    pub scale_down_window: String,
    /// No scale-down sooner than this after any change of replicas (one pod at a time).
    #[serde(default = "default_scale_down_cooldown")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rule_duration())]
    pub scale_down_cooldown: String,
    /// Measuring one pod's knee before live traffic has: a calibration pod runs a short ramp
    /// when the tenant is created and when what sets a pod's capacity changes.
    #[serde(default)]
    pub calibration: CalibrationSpec,
}

impl Default for AutoscalingSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            p95_target: default_p95_target(),
            scale_down_window: default_scale_down_window(),
            scale_down_cooldown: default_scale_down_cooldown(),
            calibration: CalibrationSpec::default(),
        }
    }
}

/// The calibration: with autoscaling on, when the tenant is created and whenever its image,
/// resources, pool, limits, p95 target or these settings change, one scratch pod (the
/// tenant's image, resources and configuration, in no Service) runs `sluice-load --search`
/// against a server of its own, reports the knee through its termination message and is
/// removed. Its knee is where the autoscaler starts from; live traffic corrects it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CalibrationSpec {
    /// Run calibrations (off: the knee comes from live traffic only).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The longest a calibration may take, the pod's start included; it is removed then and
    /// the calibration counts as failed. Between 1m and 30m.
    #[serde(default = "default_calibration_timeout")]
    #[schemars(length(min = 2, max = 16))]
    #[x_kube(validation = rule_calibration_timeout())]
    pub timeout: String,
    /// What the ramp writes. A field left out follows the tenant's traffic as its pods
    /// observed it (`status.traffic`), or sluice-load's defaults before there is any.
    #[serde(default)]
    pub payload: PayloadOverride,
    /// CPU and memory of the load generator's container. Default: requests 100m CPU and
    /// 128Mi, limits 1 CPU and 512Mi. (The server container gets the tenant's `resources`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_resources: Option<ResourceRequirements>,
}

impl Default for CalibrationSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: default_calibration_timeout(),
            payload: PayloadOverride::default(),
            load_resources: None,
        }
    }
}

/// The calibration ramp's requests; whatever is left out follows the tenant's traffic.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_payload_size())]
pub struct PayloadOverride {
    /// Points per write request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub points_per_request: Option<i64>,
    /// Distinct series the ramp's points spread over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10_000_000))]
    pub series: Option<i64>,
    /// Float fields per point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub fields: Option<i64>,
    /// Body format: `lp` (line protocol) or `msgpack` (columnar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_format_schema")]
    pub format: Option<PayloadFormat>,
    /// Gzip the bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gzip: Option<bool>,
}

/// A write body's format, as the server's metrics and `sluice-load --format` name it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PayloadFormat {
    /// Line protocol.
    #[default]
    #[serde(rename = "lp")]
    Lp,
    /// Columnar msgpack.
    #[serde(rename = "msgpack")]
    Msgpack,
}

impl PayloadFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadFormat::Lp => "lp",
            PayloadFormat::Msgpack => "msgpack",
        }
    }
}

/// `Option<PayloadFormat>` as a structural schema (schemars' `anyOf` with a null branch is
/// refused by the API server in a CRD).
fn optional_format_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "nullable": true, "enum": ["lp", "msgpack"]})
}

/// The write rate per replica at which p95 latency starts to climb.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KneeStatus {
    /// Points per second one pod sustains.
    pub points_per_second: f64,
    /// p95 write latency at that rate, e.g. `40ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_at_knee: Option<String>,
    /// When the evidence the knee rests on was measured (it counts less as it ages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<Time>,
    /// `calibration` (the calibration pod's ramp) or `live` (a window of live traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_knee_source_schema")]
    pub source: Option<KneeSource>,
}

/// Where a knee comes from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KneeSource {
    Calibration,
    Live,
}

fn optional_knee_source_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "nullable": true, "enum": ["calibration", "live"]})
}

/// One scaling decision.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingDecision {
    pub time: Time,
    pub from: i32,
    pub to: i32,
    pub reason: String,
}

/// A capacity plateau, as the autoscaler found it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlateauStatus {
    pub since: Time,
    pub message: String,
}

/// The last calibration, or the one under way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CalibrationStatus {
    /// Hash of what sets a pod's capacity (image, resources, pool, limits, p95 target, the
    /// calibration settings, the `sluice.dev/recalibrate` annotation) as this calibration
    /// measured it: a tenant whose hash differs is calibrated again.
    pub capacity_hash: String,
    /// Running, Succeeded or Failed.
    #[schemars(schema_with = "calibration_phase_schema")]
    pub phase: CalibrationPhase,
    /// The calibration pod (removed once it has reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The knee the ramp found, points per second per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points_per_second: Option<f64>,
    /// p95 write latency at the knee, e.g. `40ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_at_knee: Option<String>,
    /// What the ramp wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<PayloadShape>,
    /// The ramp's steps in short, or why the calibration failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How a calibration stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CalibrationPhase {
    Running,
    Succeeded,
    Failed,
}

fn calibration_phase_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["Running", "Succeeded", "Failed"]})
}

/// A calibration ramp's requests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PayloadShape {
    pub points_per_request: i64,
    pub series: i64,
    pub fields: i64,
    #[schemars(schema_with = "format_schema")]
    pub format: PayloadFormat,
    pub gzip: bool,
    /// Where what the spec leaves open came from: `traffic` (the pods' metrics) or `defaults`
    /// (no traffic yet); `spec` when the spec sets it all.
    #[schemars(schema_with = "payload_source_schema")]
    pub source: PayloadSource,
}

fn format_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["lp", "msgpack"]})
}

/// Where a calibration payload's shape came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PayloadSource {
    Spec,
    Traffic,
    Defaults,
}

fn payload_source_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["spec", "traffic", "defaults"]})
}

/// The shape of the writes the tenant's pods have taken since they started (set by the
/// autoscaler from their `/metrics`); the calibration copies it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrafficStatus {
    /// Mean points per write request.
    pub points_per_request: f64,
    /// Mean field values per point.
    pub fields_per_point: f64,
    /// Distinct series of the pod that knows most.
    pub series: i64,
    /// The body format most requests used.
    #[schemars(schema_with = "format_schema")]
    pub format: PayloadFormat,
    /// Whether most requests were gzipped.
    pub gzip: bool,
    /// Write requests the figures come from.
    pub requests: i64,
}

fn default_true() -> bool {
    true
}
fn default_p95_target() -> String {
    "250ms".into()
}
fn default_scale_down_window() -> String {
    "5m".into()
}
fn default_scale_down_cooldown() -> String {
    "2m".into()
}
/// A pod of two full CPUs searches for up to 23 steps of 10 s with up to four pauses of 15 s
/// (about five minutes), and needs its start-up on top.
fn default_calibration_timeout() -> String {
    "8m".into()
}
