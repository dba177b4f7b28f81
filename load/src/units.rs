//! Parsing of the human-friendly numbers on the command line: durations (`250ms`, `10s`,
//! `1m30s`), counts with SI suffixes (`200k`, `1.5M`) and ramps (`start:step:max`). Kept apart
//! from clap so each rule is unit-tested and errors name the value.

use std::time::Duration;

use crate::error::{invalid, Result};

/// `250ms`, `10s`, `1.5s`, `2m`, `1h`, `1m30s`, `500us`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let s = text.trim();
    if s.is_empty() {
        return Err(invalid("duration", text, "empty"));
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs).ok_or_else(|| invalid("duration", text, "out of range"));
    }
    let mut total = 0.0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| invalid("duration", text, "missing unit (ms, s, m, h)"))?;
        if num_len == 0 {
            return Err(invalid("duration", text, "expected a number"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| invalid("duration", text, "bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(invalid(
                    "duration",
                    text,
                    format!("unknown unit {other:?} (ns, us, ms, s, m, h)"),
                ))
            }
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total).ok_or_else(|| invalid("duration", text, "out of range"))
}

fn secs_to_duration(secs: f64) -> Option<Duration> {
    if secs.is_finite() && (0.0..1e9).contains(&secs) {
        Some(Duration::from_secs_f64(secs))
    } else {
        None
    }
}

/// A non-negative count with an optional SI suffix: `200000`, `200k`, `1.5M`, `2G`.
pub fn parse_count(text: &str) -> Result<f64> {
    let s = text.trim().replace('_', "");
    let (digits, scale) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1e3),
        Some('m' | 'M') => (&s[..s.len() - 1], 1e6),
        Some('g' | 'G') => (&s[..s.len() - 1], 1e9),
        _ => (s.as_str(), 1.0),
    };
    let v: f64 = digits
        .parse()
        .map_err(|_| invalid("number", text, "expected e.g. 200000, 200k or 1.5M"))?;
    let v = v * scale;
    if !v.is_finite() || v < 0.0 {
        return Err(invalid("number", text, "must be a finite number >= 0"));
    }
    Ok(v)
}

/// `start:step:max` (each with SI suffixes) into the list of step values, `start` first and
/// `max` last when the steps land on it. A single number is a one-step ramp.
pub fn parse_ramp(text: &str) -> Result<Vec<f64>> {
    let parts: Vec<&str> = text.split(':').collect();
    let (start, step, max) = match parts.as_slice() {
        [one] => {
            let v = parse_count(one)?;
            (v, 1.0, v)
        }
        [a, b, c] => (parse_count(a)?, parse_count(b)?, parse_count(c)?),
        _ => return Err(invalid("ramp", text, "expected start:step:max")),
    };
    if start <= 0.0 {
        return Err(invalid("ramp", text, "start must be > 0"));
    }
    if step <= 0.0 {
        return Err(invalid("ramp", text, "step must be > 0"));
    }
    if max < start {
        return Err(invalid("ramp", text, "max must be >= start"));
    }
    let n = ((max - start) / step + 1e-9).floor() as usize + 1;
    if n > 10_000 {
        return Err(invalid("ramp", text, "more than 10000 steps"));
    }
    // Multiply rather than accumulate so 0.1-sized steps do not drift.
    Ok((0..n).map(|i| start + step * i as f64).collect())
}

/// `start:max` of a knee search (each with SI suffixes), `0 < start <= max`.
pub fn parse_span(text: &str) -> Result<(f64, f64)> {
    let Some((a, b)) = text.split_once(':') else {
        return Err(invalid("search", text, "expected start:max"));
    };
    let (start, max) = (parse_count(a)?, parse_count(b)?);
    if start <= 0.0 {
        return Err(invalid("search", text, "start must be > 0"));
    }
    if max < start {
        return Err(invalid("search", text, "max must be >= start"));
    }
    Ok((start, max))
}

/// Like [`parse_ramp`] but for whole numbers (virtual users).
pub fn parse_int_ramp(text: &str) -> Result<Vec<usize>> {
    let steps = parse_ramp(text)?;
    if steps.iter().any(|v| v.fract() != 0.0) {
        return Err(invalid("count", text, "must be whole numbers"));
    }
    Ok(steps.into_iter().map(|v| v as usize).collect())
}

/// `1234567.8` as `1,234,568`, for tables a person reads.
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let n = v.round() as i128;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1500000` as `1.5M`, for axis labels.
pub fn si(v: f64) -> String {
    let (x, suffix) = if v.abs() >= 1e9 {
        (v / 1e9, "G")
    } else if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").ok(), Some(Duration::from_secs(10)));
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_duration("1m30s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("1.5").ok(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_duration("500us").ok(),
            Some(Duration::from_micros(500))
        );
        for bad in ["", "ms", "10x", "-1s", "1s5", "1e99"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_and_ramps() {
        assert_eq!(parse_count("200k").ok(), Some(200_000.0));
        assert_eq!(parse_count("1.5M").ok(), Some(1_500_000.0));
        assert_eq!(parse_count("3_000").ok(), Some(3000.0));
        assert!(parse_count("abc").is_err());
        assert!(parse_count("-5").is_err());
        let r = parse_ramp("200k:200k:3M").unwrap_or_default();
        assert_eq!(r.len(), 15);
        assert_eq!(r.first().copied(), Some(200_000.0));
        assert_eq!(r.last().copied(), Some(3_000_000.0));
        assert_eq!(parse_ramp("1:2:6").unwrap_or_default(), vec![1.0, 3.0, 5.0]);
        assert_eq!(parse_ramp("0.1:0.1:0.3").map(|v| v.len()).ok(), Some(3));
        assert_eq!(parse_ramp("5k").unwrap_or_default(), vec![5000.0]);
        assert!(parse_ramp("1:0:5").is_err());
        assert!(parse_ramp("5:1:1").is_err());
        assert!(parse_ramp("1:2").is_err());
        assert_eq!(
            parse_int_ramp("1:1:4").unwrap_or_default(),
            vec![1, 2, 3, 4]
        );
        assert!(parse_int_ramp("1:0.5:2").is_err());
        assert_eq!(parse_span("10k:50M").ok(), Some((10_000.0, 50_000_000.0)));
        for bad in ["10k", "0:5", "5:1", "a:b", "1:2:3"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(1234567.8), "1,234,568");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1000.0), "-1,000");
        assert_eq!(si(1_500_000.0), "1.5M");
        assert_eq!(si(200_000.0), "200k");
        assert_eq!(si(12.0), "12");
    }
}
