//! Bad tenants are refused by the API server (OpenAPI and CEL), with their message.

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use sluice_operator::crd::{self, IngestTenant};

use crate::harness::*;

#[tokio::test]
async fn invalid_tenants_are_refused_by_the_api_server_with_their_message() {
    with_harness("invalid", false, |h| {
        Box::pin(async move {
            let api = h.api::<IngestTenant>();
            let cases: Vec<(&str, Value, &str)> = vec![
                ("bounds", json!({"replicas": 3, "scaling": {"minReplicas": 5, "maxReplicas": 2}}),
                 "scaling.minReplicas must be less than or equal to scaling.maxReplicas"),
                ("defaults", json!({"databases": [{"name": "db", "retentionPolicies": [
                    {"name": "a", "duration": "1d", "default": true}, {"name": "b", "duration": "2d", "default": true}]}]}),
                 "exactly one retention policy of a database must have default: true"),
                ("nodefault", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "a", "duration": "1d"}]}]}),
                 "exactly one retention policy of a database must have default: true"),
                ("duration", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "a", "duration": "30 days", "default": true}]}]}),
                 "must be 'inf' or a duration such as 30d"),
                ("dbname", json!({"databases": [{"name": "bad name"}]}),
                 "must start with a letter or '_' and contain only letters, digits"),
                ("rpname", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "9lives", "default": true}]}]}),
                 "must start with a letter or '_'"),
                ("dupdb", json!({"databases": [{"name": "db"}, {"name": "db"}]}), "Duplicate value"),
                ("interval", json!({"pool": {"flushInterval": "soon"}}), "must be a positive duration such as 250ms"),
                ("interval0", json!({"pool": {"flushInterval": "0s"}}), "must be a positive duration such as 250ms"),
                ("p95", json!({"autoscaling": {"p95Target": "0ms"}}), "must be a positive duration"),
                ("connections", json!({"pool": {"connections": 0}}), "should be greater than or equal to 1"),
                ("replicas", json!({"replicas": -1}), "should be greater than or equal to 0"),
                ("size", json!({"limits": {"maxBodyBytes": "lots"}}), "must be a byte count or a number with a unit"),
                ("storage", json!({"storage": {"size": "ten gigs"}}), "must be a positive Kubernetes quantity"),
                ("reclaim", json!({"storage": {"reclaimPolicy": "Recycle"}}), "Unsupported value: \"Recycle\""),
                ("clustertag", json!({"series": {"clusterTag": ""}}), "should be at least 1 chars long"),
                ("autoscale", json!({"autoscaling": {"enabled": true}}),
                 "autoscaling.enabled needs scaling.minReplicas and scaling.maxReplicas"),
                ("grace", json!({"terminationGracePeriodSeconds": 1}), "should be greater than or equal to 15"),
                ("calshort", json!({"autoscaling": {"calibration": {"timeout": "45s"}}}),
                 "must be a duration in seconds and minutes between 1m and 30m"),
                ("calunit", json!({"autoscaling": {"calibration": {"timeout": "1h"}}}),
                 "must be a duration in seconds and minutes between 1m and 30m"),
                ("calsize", json!({"autoscaling": {"calibration": {"payload": {"pointsPerRequest": 100000, "fields": 11}}}}),
                 "payload.pointsPerRequest x payload.fields must be at most 1000000"),
                ("calformat", json!({"autoscaling": {"calibration": {"payload": {"format": "json"}}}}),
                 "Unsupported value: \"json\""),
                ("calpoints", json!({"autoscaling": {"calibration": {"payload": {"pointsPerRequest": 0}}}}),
                 "should be greater than or equal to 1"),
            ];
            // Sent as raw JSON (as kubectl would), not through the Rust types, which could not
            // even represent some of these.
            let ar = kube::core::ApiResource::erase::<IngestTenant>(&());
            let raw: Api<kube::core::DynamicObject> = Api::namespaced_with(h.client.clone(), &h.ns, &ar);
            let mut failures = Vec::new();
            for (name, spec, want) in &cases {
                let obj = kube::core::DynamicObject::new(&format!("bad-{name}"), &ar).data(json!({ "spec": spec }));
                match raw.create(&PostParams::default(), &obj).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains(want) => {}
                    Err(e) => failures.push(format!("{name}: wanted 422 with {want:?}, got {e}")),
                    Ok(_) => failures.push(format!("{name}: accepted, wanted {want:?}")),
                }
            }
            // Names that would overflow the StatefulSet's labels or are not DNS-1035 labels.
            for (name, what) in [("a".repeat(53), "long"), ("acme.example".to_string(), "dotted")] {
                let t = IngestTenant::new(&name, serde_json::from_value(json!({})).expect("spec"));
                match api.create(&PostParams::default(), &t).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("must be a DNS-1035 label") => {}
                    other => failures.push(format!("{what} name: wanted the DNS-1035 message, got {other:?}")),
                }
            }
            assert!(failures.is_empty(), "{}", failures.join("\n"));

            // Immutable storage: accepted once, then every change refused.
            let t: IngestTenant = serde_json::from_value(json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "IngestTenant",
                "metadata": {"name": "fixed"}, "spec": {"storage": {"storageClassName": "standard", "size": "1Gi"}},
            }))
            .expect("tenant JSON");
            api.create(&PostParams::default(), &t).await.expect("a valid tenant is accepted");
            for (patch, want) in [
                (json!({"spec": {"storage": {"storageClassName": "fast"}}}), "storage.storageClassName is immutable"),
                (json!({"spec": {"storage": {"storageClassName": null}}}), "storage.storageClassName is immutable"),
                (json!({"spec": {"storage": {"size": "2Gi"}}}), "storage.size is immutable"),
                // A tenant made with plain series ids keeps them.
                (json!({"spec": {"series": {"clusterTag": "region"}}}), "series.clusterTag is immutable"),
            ] {
                match api.patch("fixed", &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains(want) => {}
                    other => panic!("{patch}: wanted {want:?}, got {other:?}"),
                }
            }
            // And one made with ids clustered by a tag keeps that tag.
            let t: IngestTenant = serde_json::from_value(json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "IngestTenant",
                "metadata": {"name": "clustered"}, "spec": {"series": {"clusterTag": "region"}},
            }))
            .expect("tenant JSON");
            api.create(&PostParams::default(), &t).await.expect("a clustered tenant is accepted");
            for patch in [json!({"spec": {"series": {"clusterTag": "dc"}}}), json!({"spec": {"series": {"clusterTag": null}}})] {
                match api.patch("clustered", &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("series.clusterTag is immutable") => {}
                    other => panic!("{patch}: wanted series.clusterTag is immutable, got {other:?}"),
                }
            }
            // The reclaim policy may change (the StatefulSet's retention policy is mutable).
            api.patch("fixed", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"storage": {"reclaimPolicy": "Delete"}}})))
                .await
                .expect("reclaimPolicy is mutable");
            // Defaults are filled in by the API server.
            let stored = api.get("fixed").await.expect("get");
            assert_eq!(stored.spec.pool.flush_interval, "1s");
            assert_eq!(stored.spec.replicas, 1);
            assert_eq!(stored.spec.image, crd::DEFAULT_IMAGE);
        })
    })
    .await;
}
