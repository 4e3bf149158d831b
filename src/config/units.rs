//! The small value syntaxes of the configuration: durations (`250ms`, `5s`, `2m`, `30d`), byte sizes
//! (`1MiB`, `512KB`) and rates (`20/s`, `5/m burst 10`).
//!
//! Each is a newtype that deserializes from a string, so a bad value is reported by the loader with
//! the key it sits under.

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;

/// A duration written with a unit: `ms`, `s`, `m`, `h` or `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub struct ConfigDuration(pub Duration);

impl TryFrom<serde_json::Value> for ConfigDuration {
    type Error = String;
    fn try_from(value: serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::String(text) => parse_duration(&text).map(ConfigDuration),
            other => parse_duration(&other.to_string()).map(ConfigDuration),
        }
    }
}

/// Parses `250ms`, `5s`, `2m`, `1h`, `30d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| {
        format!("duration `{text}` has no unit: write e.g. 250ms, 5s, 2m, 1h or 30d")
    })?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("duration `{text}` must start with a whole number, e.g. 5s"))?;
    let per_unit_ms: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "duration `{text}` has unknown unit `{other}`: use ms, s, m, h or d"
            ));
        }
    };
    n.checked_mul(per_unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration `{text}` is too large"))
}

/// A size in bytes: a number with an optional unit `B`, `KB`, `KiB`, `MB`, `MiB`, `GB`, `GiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub struct ByteSize(pub u64);

impl TryFrom<serde_json::Value> for ByteSize {
    type Error = String;
    fn try_from(value: serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(ByteSize)
                .ok_or_else(|| format!("size {n} must be a whole number of bytes")),
            serde_json::Value::String(s) => parse_byte_size(&s).map(ByteSize),
            other => Err(format!("size must be a string like 1MiB, not {other}")),
        }
    }
}

/// Parses `1MiB`, `512KB`, `4096`.
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("size `{text}` must start with a whole number, e.g. 1MiB"))?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "size `{text}` has unknown unit `{other}`: use B, KB, KiB, MB, MiB, GB or GiB"
            ));
        }
    };
    n.checked_mul(multiplier)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

/// A rate limit: `N/s`, `N/m` or `N/h`, optionally followed by `burst M`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Rate {
    /// Calls admitted per `per`.
    pub count: NonZeroU32,
    pub per: Duration,
    /// Calls that may arrive at once; defaults to `count`.
    pub burst: NonZeroU32,
}

impl TryFrom<String> for Rate {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        parse_rate(&text)
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        parse_rate(text)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)?;
        if self.burst != self.count {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

/// Parses `20/s`, `5/m burst 10`.
pub fn parse_rate(text: &str) -> Result<Rate, String> {
    let bad = || {
        format!(
            "rate `{text}` must look like `20/s`, `100/m` or `1000/h`, optionally with ` burst N`"
        )
    };
    let mut words = text.split_whitespace();
    let head = words.next().ok_or_else(bad)?;
    let (count, unit) = head.split_once('/').ok_or_else(bad)?;
    let count: NonZeroU32 = count.parse().map_err(|_| bad())?;
    let per = match unit {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        _ => return Err(bad()),
    };
    let burst = match (words.next(), words.next(), words.next()) {
        (None, _, _) => count,
        (Some("burst"), Some(n), None) => n.parse().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    Ok(Rate { count, per, burst })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_every_unit_and_reject_missing_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86400)));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("5 weeks")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn sizes_parse_binary_and_decimal_units() {
        assert_eq!(parse_byte_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_byte_size("4 MiB"), Ok(4 << 20));
        assert_eq!(parse_byte_size("1KB"), Ok(1000));
        assert_eq!(parse_byte_size("17"), Ok(17));
        assert!(parse_byte_size("1XB").is_err());
    }

    #[test]
    fn rates_parse_with_and_without_burst() {
        let r = parse_rate("20/s burst 40").expect("valid rate");
        assert_eq!(
            (r.count.get(), r.per, r.burst.get()),
            (20, Duration::from_secs(1), 40)
        );
        let r = parse_rate("5/m").expect("valid rate");
        assert_eq!((r.count.get(), r.burst.get()), (5, 5));
        assert_eq!(r.to_string(), "5/m");
        assert!(parse_rate("0/s").is_err());
        assert!(parse_rate("5/d").is_err());
        assert!(parse_rate("5/s burst").is_err());
        assert!(parse_rate("5/s surge 3").is_err());
    }
}
