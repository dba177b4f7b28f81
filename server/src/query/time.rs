//! Timestamps as InfluxQL writes and answers them: RFC 3339 strings in conditions, and the
//! `time` column as RFC 3339 (trailing zeros of the fraction dropped, as Go's `RFC3339Nano`)
//! or as an integer in the unit of the request's `epoch`.

use serde_json::Value;

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Nanoseconds since the epoch of `2020-08-01T00:00:00Z`, `2020-08-01T02:00:00.5+02:00`,
/// `2020-08-01 00:00:00` (UTC) or `2020-08-01`, as InfluxDB accepts them in a condition.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, rest) = match s.find(['T', ' ']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    let mut parts = date.splitn(3, '-');
    let (y, m, d) = (
        digits(parts.next()?)?,
        digits(parts.next()?)?,
        digits(parts.next()?)?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    let mut nanos = 0i64;
    if !rest.is_empty() {
        let (clock, zone) = match rest.find(['Z', 'z', '+', '-']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (hms, frac) = match clock.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (clock, None),
        };
        let mut f = hms.splitn(3, ':');
        let (h, mi, se) = (digits(f.next()?)?, digits(f.next()?)?, digits(f.next()?)?);
        if h > 23 || mi > 59 || se > 60 {
            return None;
        }
        secs += h * 3600 + mi * 60 + se;
        if let Some(frac) = frac {
            if frac.is_empty() || frac.len() > 9 {
                return None;
            }
            nanos = digits(frac)? * 10i64.pow(9 - frac.len() as u32);
        }
        match zone {
            "" | "Z" | "z" => {}
            z => {
                let sign = if z.starts_with('-') { -1 } else { 1 };
                let (zh, zm) = z[1..].split_once(':')?;
                secs -= sign * (digits(zh)? * 3600 + digits(zm)? * 60);
            }
        }
    }
    secs.checked_mul(NANOS_PER_SEC)?.checked_add(nanos)
}

/// `2020-08-01T00:00:00.5Z`: RFC 3339 with as many fraction digits as needed, like Go's
/// `time.RFC3339Nano` that InfluxDB answers with.
pub fn format_rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(NANOS_PER_SEC);
    let frac = ns.rem_euclid(NANOS_PER_SEC);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    );
    if frac != 0 {
        let f = format!("{frac:09}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// The unit of the `epoch` parameter, in nanoseconds; `None` for an absent or empty one (RFC
/// 3339 strings then). As in InfluxDB, a value it does not know is nanoseconds; `µ`, `µs` and
/// `us`, which InfluxDB 1.8 also takes as nanoseconds, are microseconds here.
pub fn epoch_unit(epoch: Option<&str>) -> Option<i64> {
    Some(match epoch.filter(|e| !e.is_empty())? {
        "u" | "µ" | "µs" | "us" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        _ => 1,
    })
}

/// The `time` value of an answer row: an integer in the epoch unit (cut toward zero, as Go's
/// division in InfluxDB cuts a time before 1970), or an RFC 3339 string.
pub fn time_value(ns: i64, unit: Option<i64>) -> Value {
    match unit {
        Some(u) => Value::from(ns / u),
        None => Value::from(format_rfc3339(ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for (s, ns) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2020-08-01T00:00:00Z", 1_596_240_000 * NANOS_PER_SEC),
            (
                "2020-08-01T00:00:00.5Z",
                1_596_240_000 * NANOS_PER_SEC + 500_000_000,
            ),
            ("1969-12-31T23:59:59.999999999Z", -1),
            ("2262-04-11T23:47:16.854775807Z", i64::MAX),
        ] {
            assert_eq!(parse_rfc3339(s), Some(ns), "{s}");
            assert_eq!(format_rfc3339(ns), s);
        }
    }

    #[test]
    fn rfc3339_accepts_what_influxdb_does_and_nothing_else() {
        let t = 1_596_240_000 * NANOS_PER_SEC;
        assert_eq!(parse_rfc3339("2020-08-01T02:00:00+02:00"), Some(t));
        assert_eq!(parse_rfc3339("2020-08-01 00:00:00"), Some(t));
        assert_eq!(parse_rfc3339("2020-08-01"), Some(t));
        assert_eq!(
            parse_rfc3339("2020-08-01T00:00:00.123456789Z"),
            Some(t + 123_456_789)
        );
        for bad in [
            "",
            "now",
            "2020-13-01",
            "2020-08-01T25:00:00Z",
            "2020-08-01T00:00Z",
            "2020-08-01T00:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    /// As a running InfluxDB 1.8.10 answers: a point at -1.5 s is -1 with `epoch=s`.
    #[test]
    fn epoch_units_cut_toward_zero() {
        assert_eq!(
            time_value(1_999_999, epoch_unit(Some("ms"))),
            Value::from(1)
        );
        assert_eq!(
            time_value(-1_500_000_000, epoch_unit(Some("s"))),
            Value::from(-1)
        );
        assert_eq!(time_value(-1, epoch_unit(Some("s"))), Value::from(0));
        assert_eq!(time_value(5, epoch_unit(Some("ns"))), Value::from(5));
        assert_eq!(time_value(5, epoch_unit(Some("foo"))), Value::from(5));
        for none in [None, Some("")] {
            assert_eq!(
                time_value(0, epoch_unit(none)),
                Value::from("1970-01-01T00:00:00Z")
            );
        }
    }
}
