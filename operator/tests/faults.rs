//! Faults a real API server will not produce on demand (a 409 on an apply, a 500), injected
//! through a hand-written tower service in place of the HTTP connection. Everything else about
//! the operator is tested against a real API server in `tests/cluster.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::api::ObjectMeta;
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::Client;
use serde_json::{json, Value};
use sluice_operator::controller::{self, Context, Options};
use sluice_operator::crd::{IngestTenant, IngestTenantSpec, FINALIZER};
use sluice_operator::metrics::Metrics;

type Log = Arc<Mutex<Vec<(Method, String, Value)>>>;

fn status_body(code: u16, reason: &str) -> Vec<u8> {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "message": format!("injected {reason}"), "reason": reason, "code": code})
    .to_string()
    .into_bytes()
}

/// A fake API server: the ConfigMap apply fails with `fault`; everything the reconcile then
/// does to report the failure (read the StatefulSet, write the status, publish an Event)
/// succeeds; any other request is answered 500 and recorded as unexpected.
fn fake_client(fault: u16, log: Log) -> Client {
    let svc = tower::service_fn(move |req: Request<Body>| {
        let log = log.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let path = parts.uri.path().to_string();
            log.lock().unwrap_or_else(|e| e.into_inner()).push((
                parts.method.clone(),
                path.clone(),
                value.clone(),
            ));
            let (code, body) = match (&parts.method, path.as_str()) {
                (&Method::GET, "/api/v1/namespaces/ns/configmaps/acme-config") => {
                    (404, status_body(404, "NotFound"))
                }
                (&Method::PATCH, "/api/v1/namespaces/ns/configmaps/acme-config") => (
                    fault,
                    status_body(
                        fault,
                        if fault == 409 {
                            "Conflict"
                        } else {
                            "InternalError"
                        },
                    ),
                ),
                (&Method::GET, "/apis/apps/v1/namespaces/ns/statefulsets/acme") => {
                    (404, status_body(404, "NotFound"))
                }
                (
                    &Method::PATCH,
                    "/apis/sluice.dev/v1alpha1/namespaces/ns/ingesttenants/acme/status",
                ) => (200, serde_json::to_vec(&tenant()).unwrap_or_default()),
                (&Method::POST, "/apis/events.k8s.io/v1/namespaces/ns/events") => {
                    (201, bytes.to_vec())
                }
                _ => (500, status_body(500, "Unexpected")),
            };
            let resp = Response::builder()
                .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .header("content-type", "application/json")
                .body(Body::from(body));
            Ok::<_, std::convert::Infallible>(resp.unwrap_or_else(|_| Response::new(Body::empty())))
        }
    });
    Client::new(svc, "ns")
}

fn tenant() -> IngestTenant {
    let mut t = IngestTenant::new("acme", IngestTenantSpec::defaults());
    t.metadata = ObjectMeta {
        name: Some("acme".into()),
        namespace: Some("ns".into()),
        uid: Some("u-1".into()),
        generation: Some(1),
        resource_version: Some("7".into()),
        finalizers: Some(vec![FINALIZER.into()]),
        ..Default::default()
    };
    t
}

async fn reconcile_with(fault: u16) -> (Result<Action, controller::Error>, Action, Metrics, Log) {
    let log: Log = Arc::default();
    let metrics = Metrics::new().expect("metrics");
    let ctx = Context::new(
        fake_client(fault, log.clone()),
        metrics.clone(),
        Options::default(),
    );
    let t = Arc::new(tenant());
    let result = controller::reconcile(t.clone(), ctx.clone()).await;
    let action = match &result {
        Err(e) => controller::error_policy(t, e, ctx),
        Ok(a) => a.clone(),
    };
    (result, action, metrics, log)
}

fn status_patch(log: &Log) -> Value {
    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    let unexpected: Vec<_> = log
        .iter()
        .filter(|(m, p, _)| {
            !(p.contains("configmaps")
                || p.contains("statefulsets")
                || p.ends_with("/status")
                || (m == Method::POST && p.ends_with("/events")))
        })
        .collect();
    assert!(unexpected.is_empty(), "unexpected requests: {unexpected:?}");
    log.iter()
        .find(|(m, p, _)| m == Method::PATCH && p.ends_with("/status"))
        .map(|(_, _, v)| v.clone())
        .expect("the status was written")
}

fn degraded(status: &Value) -> &Value {
    status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Degraded"))
        .expect("Degraded condition")
}

#[tokio::test]
async fn a_conflict_is_reported_and_retried_at_once() {
    let (result, action, metrics, log) = reconcile_with(409).await;
    let err = result.expect_err("the injected conflict fails the reconcile");
    assert_eq!(err.metric_label(), "Conflict");
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    assert_eq!(metrics.failures.with_label_values(&["Conflict"]).get(), 1);
    let status = status_patch(&log);
    let d = degraded(&status);
    assert_eq!(d["status"], "True");
    assert_eq!(d["reason"], "ApplyFailed");
    assert!(
        d["message"]
            .as_str()
            .unwrap_or("")
            .contains("ConfigMap acme-config"),
        "{d}"
    );
    assert_eq!(status["status"]["phase"], "Degraded");
}

#[tokio::test]
async fn a_server_error_is_reported_and_backed_off() {
    let (result, action, metrics, log) = reconcile_with(500).await;
    let err = result.expect_err("the injected 500 fails the reconcile");
    assert_eq!(err.metric_label(), "ApplyFailed");
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    assert_eq!(
        metrics.failures.with_label_values(&["ApplyFailed"]).get(),
        1
    );
    assert_eq!(degraded(&status_patch(&log))["reason"], "ApplyFailed");
}
