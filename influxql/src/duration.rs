//! InfluxQL durations: `10s`, `1h30m`, `1596240000000ms`, `10u`/`10µ`, `1w`. Grafana sends its
//! time range as epoch milliseconds in this form, so the same literal is both a span and an
//! instant; the AST keeps plain nanoseconds and leaves the meaning to the executor.

use std::fmt;

const NS: i64 = 1;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;
const M: i64 = 60 * S;
const H: i64 = 60 * M;
const D: i64 = 24 * H;
const W: i64 = 7 * D;

/// A signed span in nanoseconds, as Go's `time.Duration`. Zero in a retention policy means
/// infinite, as in InfluxDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub i64);

impl Duration {
    pub fn from_nanos(nanos: i64) -> Duration {
        Duration(nanos)
    }

    pub fn as_nanos(self) -> i64 {
        self.0
    }
}

/// Why a duration literal was rejected, in InfluxDB's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DurationError {
    Invalid,
    Overflow { measure: String, unit: String },
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid => f.write_str("invalid duration"),
            DurationError::Overflow { measure, unit } => write!(
                f,
                "overflowed duration {measure}{unit}: choose a smaller duration or INF"
            ),
        }
    }
}

/// Parses the text of a duration token (an optional leading `-`, then number-unit pairs).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 2 {
        return Err(DurationError::Invalid);
    }
    let negative = chars[0] == '-';
    let mut i = usize::from(negative);
    let mut total: i64 = 0;
    // As in InfluxDB, a malformed literal is reported as such even when an earlier part
    // overflowed; the overflow names the last number and unit.
    let mut overflowed = false;
    let mut last = (String::new(), "");
    while i < chars.len() {
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        if i >= chars.len() || i == start {
            return Err(DurationError::Invalid);
        }
        let digits: String = chars[start..i].iter().collect();
        let n: i64 = digits.parse().map_err(|_| DurationError::Invalid)?;
        let next = chars.get(i + 1).copied();
        let (unit, width, len) = match (chars[i], next) {
            ('n', Some('s')) => ("ns", NS, 2),
            ('n', _) => return Err(DurationError::Invalid),
            ('u', _) => ("u", US, 1),
            ('µ', _) => ("µ", US, 1),
            ('m', Some('s')) => ("ms", MS, 2),
            ('m', _) => ("m", M, 1),
            ('s', _) => ("s", S, 1),
            ('h', _) => ("h", H, 1),
            ('d', _) => ("d", D, 1),
            ('w', _) => ("w", W, 1),
            _ => return Err(DurationError::Invalid),
        };
        match n
            .checked_mul(width)
            .and_then(|part| total.checked_add(part))
        {
            Some(t) => total = t,
            None => overflowed = true,
        }
        last = (digits, unit);
        i += len;
    }
    if overflowed {
        return Err(DurationError::Overflow {
            measure: last.0,
            unit: last.1.to_string(),
        });
    }
    Ok(Duration(if negative { -total } else { total }))
}

/// InfluxQL's rendering: the largest unit that divides the span exactly (`90s` is `90s`,
/// `3600s` is `1h`), so a parsed literal prints back as an equivalent literal.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d == 0 {
            return f.write_str("0s");
        }
        for (width, unit) in [
            (W, "w"),
            (D, "d"),
            (H, "h"),
            (M, "m"),
            (S, "s"),
            (MS, "ms"),
            (US, "u"),
        ] {
            if d % width == 0 {
                return write!(f, "{}{unit}", d / width);
            }
        }
        write!(f, "{d}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> i64 {
        parse_duration(s)
            .map(Duration::as_nanos)
            .unwrap_or(i64::MIN)
    }

    #[test]
    fn units() {
        assert_eq!(ok("10ns"), 10);
        assert_eq!(ok("10u"), 10 * US);
        assert_eq!(ok("10µ"), 10 * US);
        assert_eq!(ok("100ms"), 100 * MS);
        assert_eq!(ok("10s"), 10 * S);
        assert_eq!(ok("5m"), 5 * M);
        assert_eq!(ok("1h"), H);
        assert_eq!(ok("1d"), D);
        assert_eq!(ok("1w"), W);
        assert_eq!(ok("1h30m"), H + 30 * M);
        assert_eq!(ok("-5m"), -5 * M);
        assert_eq!(ok("1596240000000ms"), 1_596_240_000_000 * MS);
    }

    #[test]
    fn rejects_like_influxdb() {
        for bad in [
            "", "3", "1000", "w", "ms", "1.2w", "10x", "10n", "10sx", "1h30",
        ] {
            assert_eq!(parse_duration(bad), Err(DurationError::Invalid), "{bad}");
        }
        let e = parse_duration("15251w").map_err(|e| e.to_string());
        assert_eq!(
            e,
            Err("overflowed duration 15251w: choose a smaller duration or INF".into())
        );
        assert!(parse_duration("99999999999999999999s").is_err());
        assert_eq!(
            parse_duration("18446744073709551u15"),
            Err(DurationError::Invalid)
        );
    }

    #[test]
    fn renders_in_the_largest_exact_unit() {
        for (nanos, text) in [
            (0, "0s"),
            (W, "1w"),
            (2 * D, "2d"),
            (H, "1h"),
            (90 * S, "90s"),
            (10 * S, "10s"),
            (1_500 * MS, "1500ms"),
            (7 * US, "7u"),
            (5, "5ns"),
            (-5 * M, "-5m"),
        ] {
            assert_eq!(Duration(nanos).to_string(), text);
        }
    }
}
