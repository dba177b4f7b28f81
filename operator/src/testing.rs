//! Fixtures of the unit tests: a tenant as the API server would hand it over.

use kube::api::ObjectMeta;

use crate::crd::{DatabaseSpec, IngestTenant, IngestTenantSpec, RetentionPolicySpec};
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
