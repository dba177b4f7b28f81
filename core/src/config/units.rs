//! The units a configuration is written in: InfluxDB-style durations (`90s`, `1h30m`, `30d`,
//! `inf`) and byte sizes (`64MiB`, `64Mi`, `1GB`), each read from a string or a number and
//! written back in the shortest form that reads the same.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ConfigError;

/// A retention duration; `None` is infinite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionDuration(pub Option<Duration>);

impl RetentionDuration {
    pub fn infinite() -> Self {
        Self(None)
    }
}

impl Default for RetentionDuration {
    fn default() -> Self {
        Self::infinite()
    }
}

impl fmt::Display for RetentionDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("inf"),
            Some(d) => f.write_str(&format_duration(d)),
        }
    }
}

impl std::str::FromStr for RetentionDuration {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("inf") || t.eq_ignore_ascii_case("infinite") {
            return Ok(Self(None));
        }
        let d = parse_duration(t)?;
        Ok(Self(if d.is_zero() { None } else { Some(d) }))
    }
}

impl Serialize for RetentionDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for RetentionDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A byte count that reads `67108864`, `"64MiB"`, `"64Mi"` or `"64MB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{}", self.0 / size, unit);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for ByteSize {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| ConfigError::BadSize(s.to_string()))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "K" | "KB" => 1_000,
            "Ki" | "KiB" => 1 << 10,
            "M" | "MB" => 1_000_000,
            "Mi" | "MiB" => 1 << 20,
            "G" | "GB" => 1_000_000_000,
            "Gi" | "GiB" => 1 << 30,
            "T" | "TB" => 1_000_000_000_000,
            "Ti" | "TiB" => 1 << 40,
            _ => return Err(ConfigError::BadSize(s.to_string())),
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| ConfigError::BadSize(s.to_string()))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(ByteSize(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

pub(super) mod duration_str {
    use super::*;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// Parses an InfluxDB-style duration: one or more `<integer><unit>` groups.
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::BadDuration(s.to_string());
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u128 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ns: u128 = match unit {
            "ns" => 1,
            "u" | "us" | "µ" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "d" => 86_400 * 1_000_000_000,
            "w" => 7 * 86_400 * 1_000_000_000,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(ns)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// The shortest exact rendering in the largest units, e.g. `30d`, `1h30m`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let mut ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    const UNITS: [(&str, u128); 7] = [
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    let mut out = String::new();
    for (unit, size) in UNITS {
        if ns >= size {
            out.push_str(&format!("{}{}", ns / size, unit));
            ns %= size;
        }
    }
    out
}
