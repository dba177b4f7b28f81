//! Fixtures of the unit tests: a tenant as the API server would hand it over.

use kube::api::ObjectMeta;

use crate::crd::{
    DatabaseSpec, IngestTenant, IngestTenantSpec, PayloadFormat, RetentionPolicySpec, TrafficStatus,
};
use crate::validate::{validate, ValidTenant};

/// `spec` as tenant `tenants/acme` (uid `1234`, generation 3), validated.
pub fn valid(spec: IngestTenantSpec) -> ValidTenant {
    validate(&tenant(spec)).unwrap_or_else(|e| panic!("test tenant invalid: {e}"))
}

/// `spec` as tenant `tenants/acme` (uid `1234`, generation 3).
pub fn tenant(spec: IngestTenantSpec) -> IngestTenant {
    let mut t = IngestTenant::new("acme", spec);
    t.metadata = ObjectMeta {
        name: Some("acme".into()),
        namespace: Some("tenants".into()),
        uid: Some("1234".into()),
        generation: Some(3),
        ..Default::default()
    };
    t
}

/// Three replicas and the database `telegraf` (policy `autogen`, 30 days).
pub fn spec() -> IngestTenantSpec {
    let mut s = IngestTenantSpec::defaults();
    s.replicas = 3;
    s.databases = vec![DatabaseSpec {
        name: "telegraf".into(),
        retention_policies: vec![RetentionPolicySpec {
            name: "autogen".into(),
            duration: "30d".into(),
            default: true,
        }],
    }];
    s
}

/// [`spec`] with autoscaling on.
pub fn autoscaled() -> IngestTenantSpec {
    let mut s = spec();
    s.autoscaling.enabled = true;
    s
}

/// Traffic of 1,234-point gzipped msgpack requests with 11.6 fields per point over 3,000
/// series, `requests` of them.
pub fn traffic(requests: i64) -> TrafficStatus {
    TrafficStatus {
        points_per_request: 1_234.4,
        fields_per_point: 11.6,
        series: 3_000,
        format: PayloadFormat::Msgpack,
        gzip: true,
        requests,
    }
}
