//! Timestamp precision of a write request.
//!
//! InfluxDB clients send integer timestamps in a unit chosen per request
//! (`?precision=`); storage is always nanoseconds since the Unix epoch. The
//! conversion is checked because a large timestamp in a coarse unit (e.g.
//! hours) silently wrapping around `i64` would store data at a bogus time.

use std::fmt;
use std::str::FromStr;

/// Unit of the integer timestamps in a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Nanoseconds (the InfluxDB default when no precision is given).
    #[default]
    Nanosecond,
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
}

/// Why a precision name or a timestamp conversion was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrecisionError {
    #[error("unknown precision {0:?}: expected one of n, ns, u, us, µ, ms, s, m, h")]
    Unknown(String),
    #[error("timestamp {value} in precision {precision} does not fit in 64-bit nanoseconds")]
    Overflow { value: i64, precision: Precision },
}

impl Precision {
    /// Parses the precision names of InfluxDB 1.x (`n`, `ns`, `u`, `us`,
    /// `µ`, `ms`, `s`, `m`, `h`) and 2.x (`ns`, `us`, `ms`, `s`).
    ///
    /// Both the micro sign (U+00B5) and the Greek small mu (U+03BC) are
    /// accepted because clients and shells produce either one. An empty
    /// string is an error: the caller decides what "absent" means.
    pub fn parse(s: &str) -> Result<Precision, PrecisionError> {
        Ok(match s {
            "n" | "ns" => Precision::Nanosecond,
            "u" | "us" | "\u{b5}" | "\u{b5}s" | "\u{3bc}" | "\u{3bc}s" => Precision::Microsecond,
            "ms" => Precision::Millisecond,
            "s" => Precision::Second,
            "m" => Precision::Minute,
            "h" => Precision::Hour,
            other => return Err(PrecisionError::Unknown(other.to_owned())),
        })
    }

    /// Number of nanoseconds in one unit of this precision.
    pub const fn multiplier_ns(self) -> i64 {
        match self {
            Precision::Nanosecond => 1,
            Precision::Microsecond => 1_000,
            Precision::Millisecond => 1_000_000,
            Precision::Second => 1_000_000_000,
            Precision::Minute => 60_000_000_000,
            Precision::Hour => 3_600_000_000_000,
        }
    }

    /// Converts a timestamp in this precision to nanoseconds, failing
    /// instead of wrapping when the result does not fit in an `i64`.
    pub fn to_ns(self, value: i64) -> Result<i64, PrecisionError> {
        value
            .checked_mul(self.multiplier_ns())
            .ok_or(PrecisionError::Overflow {
                value,
                precision: self,
            })
    }

    /// Rounds a nanosecond timestamp down to a whole unit of this precision.
    ///
    /// InfluxDB 1.8 truncates the server-assigned time of points written
    /// without a timestamp to the request precision; we do the same so that
    /// `precision=s` writes without timestamps land on whole seconds.
    /// Near `i64::MIN` where rounding down would overflow, it rounds up
    /// instead (such times are rejected later anyway).
    pub const fn truncate_ns(self, ns: i64) -> i64 {
        let m = self.multiplier_ns();
        let r = ns.rem_euclid(m);
        match ns.checked_sub(r) {
            Some(v) => v,
            None => ns + (m - r),
        }
    }

    /// The canonical short name (`ns`, `us`, `ms`, `s`, `m`, `h`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Precision::Nanosecond => "ns",
            Precision::Microsecond => "us",
            Precision::Millisecond => "ms",
            Precision::Second => "s",
            Precision::Minute => "m",
            Precision::Hour => "h",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = PrecisionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Precision::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_names() {
        let cases = [
            ("n", Precision::Nanosecond),
            ("ns", Precision::Nanosecond),
            ("u", Precision::Microsecond),
            ("us", Precision::Microsecond),
            ("µ", Precision::Microsecond),
            ("μ", Precision::Microsecond),
            ("µs", Precision::Microsecond),
            ("ms", Precision::Millisecond),
            ("s", Precision::Second),
            ("m", Precision::Minute),
            ("h", Precision::Hour),
        ];
        for (name, want) in cases {
            assert_eq!(Precision::parse(name), Ok(want), "{name}");
            assert_eq!(name.parse::<Precision>(), Ok(want), "{name}");
        }
    }

    #[test]
    fn rejects_unknown_names() {
        for name in ["", "NS", "sec", "d", "mu", " s"] {
            assert!(
                matches!(Precision::parse(name), Err(PrecisionError::Unknown(_))),
                "{name}"
            );
        }
    }

    #[test]
    fn converts_with_overflow_check() {
        assert_eq!(Precision::Second.to_ns(2), Ok(2_000_000_000));
        assert_eq!(Precision::Hour.to_ns(-1), Ok(-3_600_000_000_000));
        assert_eq!(Precision::Nanosecond.to_ns(i64::MAX), Ok(i64::MAX));
        assert!(Precision::Millisecond.to_ns(i64::MAX / 1_000).is_err());
        assert!(Precision::Hour.to_ns(i64::MIN / 1_000).is_err());
        let err = Precision::Second.to_ns(i64::MAX).unwrap_err();
        assert!(err.to_string().contains("precision s"), "{err}");
    }

    #[test]
    fn truncates_towards_negative_infinity() {
        assert_eq!(Precision::Second.truncate_ns(1_999_999_999), 1_000_000_000);
        assert_eq!(Precision::Second.truncate_ns(-1), -1_000_000_000);
        assert_eq!(Precision::Nanosecond.truncate_ns(17), 17);
        let near_min = Precision::Hour.truncate_ns(i64::MIN);
        assert_eq!(near_min.rem_euclid(3_600_000_000_000), 0);
    }

    #[test]
    fn display_round_trips() {
        for p in [
            Precision::Nanosecond,
            Precision::Microsecond,
            Precision::Millisecond,
            Precision::Second,
            Precision::Minute,
            Precision::Hour,
        ] {
            assert_eq!(Precision::parse(&p.to_string()), Ok(p));
        }
    }
}
