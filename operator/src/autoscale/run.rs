//! The autoscaler's loop: every few seconds, for each tenant with `autoscaling.enabled`, scrape
//! its Ready pods' `/metrics`, move the knee estimate by the windows since the last scrape,
//! decide, and report: `status.knee`, `status.rate`, `status.p95`, `status.traffic` and, when
//! the decision changes the replica count, `spec.replicas` (the field `/scale` writes; the
//! reconciler rolls the StatefulSet), `status.lastScaling` and an Event. It runs beside the
//! reconciler under the same leader election and writes no other object.
//!
//! The knee starts from the calibration: a new result in `status.calibration` (the
//! reconciler's calibration stage runs the pod and records it) resets the estimate, aged by
//! how long ago it was measured; live windows move it from there. Without a calibration the
//! knee comes from live traffic alone, and without either the autoscaler acts on distress.
//! Scale-down lowers `spec.replicas` like any other client; the reconciler's decommission
//! stage then keeps the leaving pod until it has handed its data over.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;
use serde_json::{json, Value};
use tracing::{debug, info, warn};

use super::decide::{decide, Decision, History, Observed, Policy};
use super::estimate::{Estimate, Exclusion, Rules, Source, Verdict, Window};
use super::pods::{ready, settling, warming};
use super::scrape::{parse, window, Payload, PodSample};
pub use super::scrape::{HttpScrape, Scrape};
use crate::builders;
use crate::controller::Context;
use crate::crd::{CalibrationPhase, IngestTenant};

/// What the loop remembers of a tenant between ticks.
struct TenantState {
    /// Per pod (by UID): its last sample and when it was taken.
    samples: HashMap<String, (PodSample, f64)>,
    estimate: Estimate,
    history: History,
    /// When the calibration the estimate was last reset with finished.
    calibrated_at: Option<Time>,
    /// When this loop last saw a scale-down's hand-off under way (seconds on its clock).
    handoff_seen_s: Option<f64>,
}

pub async fn run(
    ctx: Arc<Context>,
    scraper: Arc<dyn Scrape>,
    every: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let clock = Instant::now();
    let mut tenants: HashMap<String, TenantState> = HashMap::new();
    let tick = async {
        loop {
            if let Err(e) = tick(&ctx, scraper.as_ref(), clock, &mut tenants).await {
                warn!(error = %e, "autoscaler: cannot list tenants");
            }
            tokio::time::sleep(every).await;
        }
    };
    tokio::select! {
        _ = tick => {}
        _ = shutdown => {}
    }
}

async fn tick(
    ctx: &Context,
    scraper: &dyn Scrape,
    clock: Instant,
    tenants: &mut HashMap<String, TenantState>,
) -> Result<(), kube::Error> {
    let api: Api<IngestTenant> = match &ctx.options.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let list = api.list(&ListParams::default()).await?;
    let enabled: Vec<&IngestTenant> = list
        .items
        .iter()
        .filter(|t| t.spec.autoscaling.enabled && t.metadata.deletion_timestamp.is_none())
        .collect();
    tenants.retain(|k, _| enabled.iter().any(|t| builders::tenant_key(t) == *k));
    for t in enabled {
        let state = tenants
            .entry(builders::tenant_key(t))
            .or_insert_with(|| TenantState {
                samples: HashMap::new(),
                estimate: Estimate::unknown(),
                history: History::default(),
                calibrated_at: None,
                handoff_seen_s: None,
            });
        if let Err(e) = step(ctx, scraper, clock, t, state).await {
            warn!(tenant = %builders::tenant_key(t), error = %e, "autoscaler step failed");
        }
    }
    Ok(())
}

/// A window that took the knee down, or would have if it were confirmed, with its figures: the
/// knee decides how many pods the tenant keeps, and a wrong one must be traceable to its window.
fn log_lowered(
    t: &IngestTenant,
    w: &Window,
    verdict: Verdict,
    before: Option<f64>,
    after: Option<f64>,
) {
    let lowered = matches!((before, after), (Some(b), Some(a)) if a < b - 0.5)
        || (before.is_none() && after.is_some());
    let unconfirmed = verdict == Verdict::Ignored(Exclusion::Unconfirmed);
    if !(lowered && verdict == Verdict::FellBehind || unconfirmed) {
        return;
    }
    info!(
        tenant = %builders::tenant_key(t),
        pod = %w.pod,
        counted = !unconfirmed,
        offered_pps = w.offered_pps.round(),
        answered_pps = w.acked_pps.round(),
        p95_ms = ?w.p95_ms,
        refused = w.refused,
        backlog_bytes_per_s = w.backlog_slope.round(),
        knee_before = ?before.map(f64::round),
        knee_after = ?after.map(f64::round),
        "autoscaler: a pod fell behind",
    );
}

/// What one tick's scrapes gave: a window per Ready pod scraped before, the traffic payloads,
/// how many pods were Ready and how many of those had no earlier sample.
struct Scraped {
    windows: Vec<Window>,
    payloads: Vec<Payload>,
    ready: i32,
    unmeasured: i32,
}

/// Scrapes every Ready pod of `pods` and makes its window since the last scrape, excluded
/// while the tenant settles or the pod warms; forgets the samples of pods that are gone.
async fn scrape_windows(
    scraper: &dyn Scrape,
    pods: &[Pod],
    state: &mut TenantState,
    now_s: f64,
    settling: bool,
) -> Scraped {
    let mut windows: Vec<Window> = Vec::new();
    let mut payloads = Vec::new();
    let mut ready_pods = 0;
    let mut unmeasured = 0;
    for p in pods.iter().filter(|p| ready(p)) {
        ready_pods += 1;
        let uid = p.uid().unwrap_or_default();
        let sample = match scraper
            .scrape(p)
            .await
            .and_then(|text| parse(&text).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => {
                debug!(pod = %p.name_any(), error = %e, "autoscaler: cannot scrape");
                continue;
            }
        };
        payloads.push(sample.payload.clone());
        match state.samples.insert(uid, (sample.clone(), now_s)) {
            Some((prev, prev_s)) => {
                let excluded = if settling {
                    Some(Exclusion::Settling)
                } else {
                    warming(p).then_some(Exclusion::Warming)
                };
                windows.push(window(
                    &p.name_any(),
                    &prev,
                    prev_s,
                    &sample,
                    now_s,
                    excluded,
                ));
            }
            None => unmeasured += 1,
        }
    }
    state
        .samples
        .retain(|uid, _| pods.iter().any(|p| p.uid().as_deref() == Some(uid)));
    Scraped {
        windows,
        payloads,
        ready: ready_pods,
        unmeasured,
    }
}

async fn step(
    ctx: &Context,
    scraper: &dyn Scrape,
    clock: Instant,
    t: &IngestTenant,
    state: &mut TenantState,
) -> Result<(), kube::Error> {
    let ns = t.namespace().unwrap_or_default();
    let name = t.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = pods
        .list(&ListParams::default().labels(&builders::selector_string(&name)))
        .await?;
    let now_s = clock.elapsed().as_secs_f64();
    let rules = Rules::new(p95_target_ms(t));
    let recalibrated = recalibrate(state, t, now_s);
    if t.status.as_ref().is_some_and(|s| s.decommission.is_some()) {
        state.handoff_seen_s = Some(now_s);
    }
    let settling = settling(t, Utc::now(), state.handoff_seen_s.map(|seen| now_s - seen));
    let Scraped {
        windows,
        payloads,
        ready: ready_pods,
        unmeasured,
    } = scrape_windows(scraper, &listed.items, state, now_s, settling).await;
    let api: Api<IngestTenant> = Api::namespaced(ctx.client.clone(), &ns);
    let traffic = super::traffic::aggregate(&payloads)
        .filter(|tr| t.status.as_ref().and_then(|s| s.traffic.as_ref()) != Some(tr));
    let tenant_now = Tenant {
        now_s,
        replicas: t.spec.replicas,
        ready: ready_pods,
        unmeasured,
    };
    let Some(obs) = observed(&tenant_now, &windows, &rules) else {
        // No live window to judge, but a new calibration or a new shape of traffic to report.
        let mut status = json!({});
        if recalibrated {
            status["knee"] = knee_status(&state.estimate, now_s, &rules);
        }
        // (A reset always leaves a knee: the calibration's.)
        if let Some(tr) = &traffic {
            status["traffic"] = json!(tr);
        }
        if status.as_object().is_some_and(|o| !o.is_empty()) {
            api.patch_status(
                &name,
                &params(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await?;
        }
        return Ok(());
    };
    for w in &windows {
        let before = state.estimate.knee(now_s, &rules);
        let verdict = state.estimate.observe(w, &rules);
        log_lowered(t, w, verdict, before, state.estimate.knee(now_s, &rules));
    }
    let knee = state.estimate.knee(now_s, &rules);
    let d = decide(&policy(t, &rules), &obs, knee, &mut state.history);
    export(ctx, &builders::tenant_key(t), &obs, &d, knee, &rules);
    let now = Time(Utc::now());
    let mut status = json!({
        "rate": obs.offered_pps.round(),
        "p95": obs.p95_ms.map(|p| format!("{}ms", p.round())),
    });
    // Without an estimate (a restarted operator before any window) the last knee stays.
    let k = knee_status(&state.estimate, now_s, &rules);
    if !k.is_null() {
        status["knee"] = k;
    }
    if let Some(tr) = &traffic {
        status["traffic"] = json!(tr);
    }
    let plateau = t.status.as_ref().and_then(|s| s.plateau.as_ref());
    status["plateau"] = match (d.reason == super::decide::Reason::Plateau, plateau) {
        // Kept as first found, so that its time says since when.
        (true, Some(p)) => json!(p),
        (true, None) => json!({
            "since": now,
            "message": format!(
                "the last pods added gave less than a quarter of the throughput they should have (acknowledged {:.0} points/s at {} replicas): the node's CPU or disk is the limit, so the autoscaler adds no more",
                obs.acked_pps, obs.replicas
            ),
        }),
        (false, _) => Value::Null,
    };
    if d.replicas != t.spec.replicas {
        let note = format!(
            "from {} to {} replicas: {} (offered {:.0} points/s, acknowledged {:.0}, knee {}, p95 {})",
            t.spec.replicas,
            d.replicas,
            d.reason.as_str(),
            obs.offered_pps,
            obs.acked_pps,
            knee.map_or("unknown".into(), |k| format!("{k:.0} points/s per pod")),
            obs.p95_ms.map_or("unknown".into(), |p| format!("{p:.0} ms")),
        );
        api.patch(
            &name,
            &params(),
            &Patch::Merge(&json!({ "spec": { "replicas": d.replicas } })),
        )
        .await?;
        status["lastScaling"] = json!({
            "time": now, "from": t.spec.replicas, "to": d.replicas, "reason": d.reason.as_str()
        });
        ctx.event(t, EventType::Normal, "Autoscaled", "Scale", note)
            .await;
    }
    api.patch_status(
        &name,
        &params(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await?;
    Ok(())
}

/// The tenant's pods at a tick, as listed.
struct Tenant {
    now_s: f64,
    /// `spec.replicas`.
    replicas: i32,
    ready: i32,
    /// Ready pods scraped for the first time at this tick: no window yet.
    unmeasured: i32,
}

/// The decision's policy for `t`: its `scaling` bounds and scale-down timing.
fn policy(t: &IngestTenant, rules: &Rules) -> Policy {
    let (min, max) = t
        .spec
        .scaling
        .as_ref()
        .map_or((t.spec.replicas, t.spec.replicas), |s| {
            (s.min_replicas, s.max_replicas)
        });
    let mut policy = Policy::new(min, max, rules.criteria.p95_max_ms);
    // Removing a pod is safe: the reconciler decommissions it first.
    policy.scale_down = true;
    let a = &t.spec.autoscaling;
    policy.down_stabilisation_s = seconds(&a.scale_down_window, policy.down_stabilisation_s);
    policy.cooldown_s = seconds(&a.scale_down_cooldown, policy.cooldown_s);
    policy
}

/// The operator's autoscaler metrics for tenant `key` after a decision.
fn export(
    ctx: &Context,
    key: &str,
    obs: &Observed,
    d: &Decision,
    knee: Option<f64>,
    rules: &Rules,
) {
    let m = &ctx.metrics;
    m.autoscaler_decisions
        .with_label_values(&[d.reason.as_str()])
        .inc();
    m.autoscaler_offered
        .with_label_values(&[key])
        .set(obs.offered_pps);
    m.autoscaler_desired
        .with_label_values(&[key])
        .set(d.replicas as f64);
    m.autoscaler_at_max
        .with_label_values(&[key])
        .set(f64::from(u8::from(
            d.reason == super::decide::Reason::AtMax,
        )));
    m.autoscaler_p95_target
        .with_label_values(&[key])
        .set(rules.criteria.p95_max_ms / 1000.0);
    if let Some(k) = knee {
        m.autoscaler_knee.with_label_values(&[key]).set(k);
    }
    if let Some(p) = obs.p95_ms {
        m.autoscaler_p95.with_label_values(&[key]).set(p / 1000.0);
    }
}

/// What the decision sees of the tenant in this tick's windows; `None` when no window counts
/// (all pods settling after a scale-down, restarted, or not measured yet).
///
/// A warming pod's window counts in the rates but not in p95 or the backlog: its latency says
/// nothing about the tenant's capacity, but the load it carries is the tenant's. Left out of the
/// rates, a scale-up hid the new pod's share for its first 30 s: the tenant looked half as
/// loaded and the pod just added as if it had added no throughput (a plateau), so the next
/// scale-up waited for the warming to end while p95 stayed over its target. A Ready pod without
/// a window yet counts as not Ready: its share of the load is not known before its second
/// scrape.
fn observed(tenant: &Tenant, windows: &[Window], rules: &Rules) -> Option<Observed> {
    let rated: Vec<&Window> = windows
        .iter()
        .filter(|w| matches!(w.excluded, None | Some(Exclusion::Warming)))
        .collect();
    if rated.is_empty() {
        return None;
    }
    let judged = || rated.iter().filter(|w| w.excluded.is_none());
    Some(Observed {
        now_s: tenant.now_s,
        replicas: tenant.replicas,
        ready: tenant.ready - tenant.unmeasured,
        offered_pps: rated.iter().map(|w| w.offered_pps).sum(),
        acked_pps: rated.iter().map(|w| w.acked_pps).sum(),
        p95_ms: judged().filter_map(|w| w.p95_ms).reduce(f64::max),
        backlog_growing: judged().any(|w| w.backlog_slope > rules.max_backlog_slope),
    })
}

/// Resets the estimate with the tenant's latest calibration when it is new to this loop (a
/// calibration finished, or the operator restarted), aged by how long ago it finished. True
/// when it did.
fn recalibrate(state: &mut TenantState, t: &IngestTenant, now_s: f64) -> bool {
    let Some(c) = t
        .status
        .as_ref()
        .and_then(|s| s.calibration.as_ref())
        .filter(|c| c.phase == CalibrationPhase::Succeeded)
    else {
        return false;
    };
    let (Some(pps), Some(at)) = (c.points_per_second, c.finished_at.as_ref()) else {
        return false;
    };
    if state.calibrated_at.as_ref() == Some(at) {
        return false;
    }
    let age_s = ((Utc::now() - at.0).num_milliseconds() as f64 / 1000.0).max(0.0);
    let p95_ms = c
        .p95_at_knee
        .as_deref()
        .and_then(|p| sluice_core::config::parse_duration(p).ok())
        .map(|d| d.as_secs_f64() * 1000.0);
    state.estimate = Estimate::calibrated(pps, p95_ms, now_s - age_s);
    state.calibrated_at = Some(at.clone());
    true
}

/// `status.knee` from the estimate: the knee, the p95 where it was seen, when and how it was
/// measured; `null` while there is none.
fn knee_status(e: &Estimate, now_s: f64, rules: &Rules) -> Value {
    let (Some(k), Some(ev)) = (e.knee(now_s, rules), e.evidence(now_s, rules)) else {
        return Value::Null;
    };
    let ago = k8s_openapi::chrono::Duration::milliseconds(((now_s - ev.at_s) * 1000.0) as i64);
    json!({
        "pointsPerSecond": k.round(),
        "p95AtKnee": ev.p95_ms.map(|p| format!("{}ms", p.round())),
        "measuredAt": Time(Utc::now() - ago),
        "source": match ev.source {
            Source::Calibration => "calibration",
            Source::Live => "live",
        },
    })
}

/// Writes as `sluice-autoscaler`, so that the reconciler's status applies leave its fields alone.
fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// The autoscaler's field manager.
pub const FIELD_MANAGER: &str = "sluice-autoscaler";

/// A duration of `spec.autoscaling` in seconds (`default` when it does not parse; validation
/// refuses that).
fn seconds(s: &str, default: f64) -> f64 {
    sluice_core::config::parse_duration(s).map_or(default, |d| d.as_secs_f64())
}

/// `autoscaling.p95Target` in ms (250 when it does not parse; validation refuses that).
fn p95_target_ms(t: &IngestTenant) -> f64 {
    sluice_core::config::parse_duration(&t.spec.autoscaling.p95_target)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(250.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::decide::Reason;

    fn window(offered: f64, p95: f64, excluded: Option<Exclusion>) -> Window {
        Window {
            pod: "p-0".into(),
            end_s: 100.0,
            offered_pps: offered,
            acked_pps: offered,
            p95_ms: Some(p95),
            refused: 0,
            backlog_slope: if excluded.is_some() { 5e7 } else { 0.0 },
            excluded,
        }
    }

    fn two_pods() -> Tenant {
        Tenant {
            now_s: 100.0,
            replicas: 2,
            ready: 2,
            unmeasured: 0,
        }
    }

    #[test]
    fn a_warming_pod_counts_in_the_rates_not_in_latency() {
        let rules = Rules::new(500.0);
        let ws = [
            window(16_000.0, 6_554.0, None),
            window(15_000.0, 9_000.0, Some(Exclusion::Warming)),
        ];
        let o = observed(&two_pods(), &ws, &rules).unwrap();
        assert_eq!((o.offered_pps, o.acked_pps), (31_000.0, 31_000.0));
        assert_eq!(o.p95_ms, Some(6_554.0));
        assert!(
            !o.backlog_growing,
            "the warming pod's backlog is its replay's"
        );
        // Only warming pods: rates, no latency.
        let o = observed(&two_pods(), &ws[1..], &rules).unwrap();
        assert_eq!((o.offered_pps, o.p95_ms), (15_000.0, None));
    }

    #[test]
    fn settling_restarted_or_unmeasured_pods_say_nothing() {
        let rules = Rules::new(500.0);
        for x in [Exclusion::Settling, Exclusion::Restarted] {
            assert_eq!(
                observed(&two_pods(), &[window(9.0, 9.0, Some(x))], &rules),
                None
            );
        }
        let fresh = Tenant {
            unmeasured: 1,
            ..two_pods()
        };
        let o = observed(&fresh, &[window(16_000.0, 300.0, None)], &rules).unwrap();
        assert_eq!(
            o.ready, 1,
            "a pod without a window waits like one not Ready"
        );
    }

    /// The tenant of a failed run: 1 -> 2 pods at 17,000 points/s against a knee of 15,000,
    /// then 31,000 offered while the new pod warms and p95 is 6.5 s. Judged without the new
    /// pod's share the tenant looked like 16,000 points/s, and the pod just added like a
    /// plateau; with it, the autoscaler adds pods at once.
    #[test]
    fn a_scale_up_is_not_held_while_the_pod_it_added_warms() {
        let rules = Rules::new(500.0);
        let mut policy = Policy::new(1, 4, 500.0);
        policy.scale_down = true;
        let mut history = History::default();
        let before = Observed {
            now_s: 30.0,
            replicas: 1,
            ready: 1,
            offered_pps: 17_000.0,
            acked_pps: 17_000.0,
            p95_ms: Some(400.0),
            backlog_growing: false,
        };
        assert_eq!(
            decide(&policy, &before, Some(15_000.0), &mut history).replicas,
            2
        );
        let ws = [
            window(16_000.0, 6_554.0, None),
            window(15_000.0, 9_000.0, Some(Exclusion::Warming)),
        ];
        let o = observed(&two_pods(), &ws, &rules).unwrap();
        let d = decide(&policy, &o, Some(15_000.0), &mut history.clone());
        assert_eq!((d.replicas, d.reason), (3, Reason::Forecast), "{d:?}");
        // What the warming pod's exclusion from the rates made of it.
        let without = observed(&two_pods(), &ws[..1], &rules).unwrap();
        let d = decide(&policy, &without, Some(15_000.0), &mut history);
        assert_eq!(d.reason, Reason::Plateau);
    }
}
