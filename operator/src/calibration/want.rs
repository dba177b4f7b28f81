//! What a calibration should measure: the tenant's capacity hash (when to calibrate again)
//! and the payload its ramp sends (the spec's overrides, else the tenant's traffic, else
//! sluice-load's defaults), pure.

use std::time::Duration;

use serde_json::json;

use crate::crd::{
    IngestTenant, PayloadFormat, PayloadOverride, PayloadShape, PayloadSource, TrafficStatus,
};

/// Annotation whose value is part of the capacity hash: changing it (to a timestamp, say)
/// runs the calibration again.
pub const RECALIBRATE_ANNOTATION: &str = "sluice.dev/recalibrate";

/// sluice-load's own defaults, for a tenant without traffic yet.
pub const DEFAULT_POINTS: i64 = 5_000;
pub const DEFAULT_SERIES: i64 = 1_000;
pub const DEFAULT_FIELDS: i64 = 5;
/// Traffic counts once this many write requests were seen.
pub const MIN_REQUESTS: i64 = 20;
/// The generator pre-encodes one request per series template (`series / gcd(points, series)`
/// of them); this many field values at most over all templates keeps that within ~40 MB.
pub const MAX_TEMPLATE_FIELD_VALUES: i64 = 2_000_000;

/// A calibration the tenant should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Want {
    pub capacity_hash: String,
    pub payload: PayloadShape,
    pub timeout: Duration,
}

/// The calibration `t` should have, or `None` when it has it switched off (or autoscaling).
pub fn want(t: &IngestTenant, timeout: Duration) -> Option<Want> {
    let a = &t.spec.autoscaling;
    if !a.enabled || !a.calibration.enabled {
        return None;
    }
    let traffic = t.status.as_ref().and_then(|s| s.traffic.as_ref());
    Some(Want {
        capacity_hash: capacity_hash(t),
        payload: payload(&a.calibration.payload, traffic),
        timeout,
    })
}

/// Hash of everything that sets what one pod sustains, or how the knee is judged: the image,
/// resources, pool and limits, the p95 target, the calibration's own settings (but not
/// whether it is on) and [`RECALIBRATE_ANNOTATION`]. Replicas, databases and the rest leave
/// it alone.
pub fn capacity_hash(t: &IngestTenant) -> String {
    let s = &t.spec;
    let c = &s.autoscaling.calibration;
    let what = json!({
        "image": s.image,
        "resources": s.resources,
        "pool": s.pool,
        "limits": s.limits,
        "p95Target": s.autoscaling.p95_target,
        "calibration": {
            "timeout": c.timeout,
            "payload": c.payload,
            "loadResources": c.load_resources,
        },
        "recalibrate": t.metadata.annotations.as_ref().and_then(|a| a.get(RECALIBRATE_ANNOTATION)),
    });
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(what.to_string().as_bytes())
    )
}

/// Series the ramp uses for about `wanted`: a divisor of `points` below it (one template), or
/// a multiple of `points` above it, as many as [`MAX_TEMPLATE_FIELD_VALUES`] allows.
fn ramp_series(wanted: i64, points: i64, fields: i64) -> i64 {
    let wanted = wanted.max(1);
    if wanted <= points {
        return (1..=wanted).rev().find(|d| points % d == 0).unwrap_or(1);
    }
    let most = (MAX_TEMPLATE_FIELD_VALUES / (points * fields).max(1)).max(1);
    points * ((wanted + points - 1) / points).min(most)
}

/// The ramp's payload: the spec's overrides, the rest from the traffic when there has been
/// enough of it, else sluice-load's defaults.
pub fn payload(over: &PayloadOverride, traffic: Option<&TrafficStatus>) -> PayloadShape {
    let seen = traffic.filter(|t| t.requests >= MIN_REQUESTS);
    let cap = crate::crd::MAX_FIELD_VALUES_PER_REQUEST;
    let fields = over
        .fields
        .or(seen.map(|t| t.fields_per_point.round() as i64))
        .unwrap_or(DEFAULT_FIELDS)
        .clamp(1, 100);
    let points = over
        .points_per_request
        .or(seen.map(|t| t.points_per_request.round() as i64))
        .unwrap_or(DEFAULT_POINTS)
        .clamp(1, 100_000)
        .min(cap / fields);
    let series = over
        .series
        .or(seen.map(|t| t.series))
        .unwrap_or(DEFAULT_SERIES)
        .clamp(1, 10_000_000);
    let all_set = over.points_per_request.is_some()
        && over.series.is_some()
        && over.fields.is_some()
        && over.format.is_some()
        && over.gzip.is_some();
    PayloadShape {
        points_per_request: points,
        series: ramp_series(series, points, fields),
        fields,
        format: over
            .format
            .or(seen.map(|t| t.format))
            .unwrap_or(PayloadFormat::Lp),
        gzip: over.gzip.or(seen.map(|t| t.gzip)).unwrap_or(false),
        source: if all_set {
            PayloadSource::Spec
        } else if seen.is_some() {
            PayloadSource::Traffic
        } else {
            PayloadSource::Defaults
        },
    }
}

/// Whether the traffic now asks for a payload so unlike the last calibration's that its knee
/// no longer describes the pods: another format or encoding, more than twice (or half) the
/// points per request or fields per point, or ten times the series.
pub fn drifted(calibrated: &PayloadShape, now: &PayloadShape) -> bool {
    let ratio = |a: i64, b: i64| a.max(b) as f64 / a.min(b).max(1) as f64;
    calibrated.source != PayloadSource::Spec
        && now.source == PayloadSource::Traffic
        && (calibrated.format != now.format
            || calibrated.gzip != now.gzip
            || ratio(calibrated.points_per_request, now.points_per_request) > 2.0
            || ratio(calibrated.fields, now.fields) > 2.0
            || ratio(calibrated.series, now.series) > 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::IngestTenantSpec;
    use crate::testing::{autoscaled, spec, tenant, traffic};

    #[test]
    fn only_what_sets_capacity_changes_the_hash() {
        let base = capacity_hash(&tenant(autoscaled()));
        let mut s = autoscaled();
        s.replicas = 7;
        s.databases.clear();
        s.autoscaling.scale_down_window = "1m".into();
        s.autoscaling.calibration.enabled = false;
        assert_eq!(capacity_hash(&tenant(s)), base);
        let changes: [fn(&mut IngestTenantSpec); 6] = [
            |s| s.image = "sluice-server:9".into(),
            |s| s.pool.flush_workers = 7,
            |s| s.limits.max_series = 17,
            |s| s.autoscaling.p95_target = "100ms".into(),
            |s| s.autoscaling.calibration.payload.fields = Some(9),
            |s| {
                s.resources = Some(Default::default());
            },
        ];
        for change in changes {
            let mut s = autoscaled();
            change(&mut s);
            assert_ne!(capacity_hash(&tenant(s)), base);
        }
        let mut t = tenant(autoscaled());
        t.metadata.annotations = Some([(RECALIBRATE_ANNOTATION.to_string(), "1".into())].into());
        assert_ne!(capacity_hash(&t), base);
    }

    #[test]
    fn nothing_is_wanted_without_autoscaling_or_with_calibration_off() {
        assert!(want(&tenant(spec()), Duration::from_secs(60)).is_none());
        let mut s = autoscaled();
        s.autoscaling.calibration.enabled = false;
        assert!(want(&tenant(s), Duration::from_secs(60)).is_none());
    }

    #[test]
    fn the_payload_follows_the_spec_then_the_traffic_then_the_defaults() {
        let none = PayloadOverride::default();
        let p = payload(&none, None);
        assert_eq!(
            (
                p.points_per_request,
                p.series,
                p.fields,
                p.format,
                p.gzip,
                p.source
            ),
            (
                5000,
                1000,
                5,
                PayloadFormat::Lp,
                false,
                PayloadSource::Defaults
            )
        );
        // Too little traffic to go by.
        assert_eq!(
            payload(&none, Some(&traffic(3))).source,
            PayloadSource::Defaults
        );
        let p = payload(&none, Some(&traffic(500)));
        assert_eq!(
            (p.points_per_request, p.fields, p.format, p.gzip, p.source),
            (
                1234,
                12,
                PayloadFormat::Msgpack,
                true,
                PayloadSource::Traffic
            )
        );
        // 3,000 series over 1,234-point requests: three templates' worth.
        assert_eq!(p.series, 3 * 1234);
        let mut over = PayloadOverride {
            points_per_request: Some(100),
            fields: Some(2),
            ..Default::default()
        };
        let p = payload(&over, Some(&traffic(500)));
        assert_eq!((p.points_per_request, p.fields), (100, 2));
        assert_eq!(p.source, PayloadSource::Traffic);
        over.series = Some(30);
        over.format = Some(PayloadFormat::Lp);
        over.gzip = Some(false);
        let p = payload(&over, Some(&traffic(500)));
        // 30 series do not divide 100-point requests: 25 do (one template).
        assert_eq!((p.series, p.source), (25, PayloadSource::Spec));
    }

    #[test]
    fn series_keep_the_pre_encoded_requests_small() {
        assert_eq!(ramp_series(1000, 5000, 5), 1000);
        assert_eq!(ramp_series(1001, 5000, 5), 1000);
        assert_eq!(ramp_series(7, 5000, 5), 5);
        assert_eq!(ramp_series(12_000, 5000, 5), 15_000);
        // 10 M series of 50,000 x 10 field values: at most 4 templates.
        assert_eq!(ramp_series(10_000_000, 50_000, 10), 200_000);
    }

    #[test]
    fn traffic_that_changed_shape_drifts() {
        let none = PayloadOverride::default();
        let first = payload(&none, None);
        let now = payload(&none, Some(&traffic(500)));
        assert!(drifted(&first, &now));
        assert!(!drifted(&now, &now));
        // Defaults against defaults (no traffic yet) never drift.
        assert!(!drifted(&first, &first));
        let mut close = now.clone();
        close.points_per_request = 2000;
        close.series = 20_000;
        assert!(!drifted(&now, &close));
        close.points_per_request = 3000;
        assert!(drifted(&now, &close));
    }
}
