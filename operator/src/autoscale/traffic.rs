//! What a tenant's writes look like, from its pods' `/metrics`: points per request, fields per
//! point, series, the body format and encoding most requests use. The calibration's ramp sends
//! the same (`status.traffic`), so that the knee it measures is the knee of this traffic: a
//! pod takes many more points per second in large requests than in small ones.
//!
//! The figures are totals since each pod started, summed over the pods (series: the pod that
//! knows most, since writes spread over the pods and each sees about all of them).

use super::scrape::Payload;
use crate::crd::{PayloadFormat, TrafficStatus};

/// The tenant's traffic over `pods`, or `None` before any pod has taken a write.
pub fn aggregate<'a>(pods: impl IntoIterator<Item = &'a Payload>) -> Option<TrafficStatus> {
    let (mut requests, mut points, mut fields, mut series) = (0.0, 0.0, 0.0, 0f64);
    let (mut msgpack, mut gzip) = (0.0, 0.0);
    for p in pods {
        for k in &p.kinds {
            requests += k.requests;
            points += k.points;
            if k.format == PayloadFormat::Msgpack.as_str() {
                msgpack += k.requests;
            }
            if k.gzip {
                gzip += k.requests;
            }
        }
        fields += p.field_values;
        series = series.max(p.series);
    }
    if requests < 1.0 || points < 1.0 {
        return None;
    }
    Some(TrafficStatus {
        points_per_request: (points / requests).round(),
        fields_per_point: (fields / points * 10.0).round() / 10.0,
        series: series as i64,
        format: if msgpack * 2.0 > requests {
            PayloadFormat::Msgpack
        } else {
            PayloadFormat::Lp
        },
        gzip: gzip * 2.0 > requests,
        requests: requests as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::scrape::PayloadKind;

    fn kind(format: &str, gzip: bool, requests: f64, points: f64) -> PayloadKind {
        PayloadKind {
            format: format.into(),
            gzip,
            requests,
            points,
        }
    }

    #[test]
    fn pods_add_up_to_the_tenants_traffic() {
        let a = Payload {
            kinds: vec![
                kind("lp", false, 10.0, 50_000.0),
                kind("msgpack", true, 2.0, 200.0),
            ],
            field_values: 250_600.0,
            series: 900.0,
        };
        let b = Payload {
            kinds: vec![kind("lp", false, 8.0, 40_000.0)],
            field_values: 200_000.0,
            series: 1000.0,
        };
        let t = aggregate([&a, &b]).unwrap_or_else(|| panic!("traffic"));
        assert_eq!(t.requests, 20);
        assert_eq!(t.points_per_request, 4510.0);
        assert_eq!(t.fields_per_point, 5.0);
        assert_eq!(t.series, 1000);
        assert_eq!((t.format, t.gzip), (PayloadFormat::Lp, false));
        // Mostly gzipped msgpack.
        let c = Payload {
            kinds: vec![kind("msgpack", true, 30.0, 3000.0)],
            field_values: 6000.0,
            series: 5.0,
        };
        let t = aggregate([&a, &c]).unwrap_or_else(|| panic!("traffic"));
        assert_eq!((t.format, t.gzip), (PayloadFormat::Msgpack, true));
        assert_eq!(aggregate([&Payload::default()]), None);
    }
}
