//! How long a link lives: `expiresIn` on uploads and blobs, and the bounds a server
//! accepts (`--min-expires-in`, `--max-expires-in`). A lifetime is a whole number and a
//! unit, `s`, `m`, `h` or `d`: `12h`, `7d`. A bare number is refused rather than read
//! in a unit the caller may not have meant.

use std::time::Duration;

const UNITS: [(char, u64); 4] = [('s', 1), ('m', 60), ('h', 3600), ('d', 86_400)];

/// `12h`, `7d`, `30m`, `45s`: more than zero, at most 100 years.
pub fn parse(text: &str) -> Result<Duration, String> {
    let wrong = || format!("'{text}' is not a lifetime like 12h or 7d (a whole number, then s, m, h or d)");
    let unit = text.chars().last().ok_or_else(wrong)?;
    let &(_, seconds) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(wrong)?;
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(wrong());
    }
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(seconds)) {
        Some(0) => Err(format!("'{text}' is no time at all")),
        Some(total) if total <= 100 * 365 * 86_400 => Ok(Duration::from_secs(total)),
        _ => Err(format!("'{text}' is longer than 100 years")),
    }
}

/// A lifetime in the largest unit that divides it: `86400s` is `1d`.
pub fn format(lifetime: Duration) -> String {
    let seconds = lifetime.as_secs();
    let (unit, size) = UNITS.iter().rev().find(|(_, size)| seconds.is_multiple_of(*size)).copied().unwrap_or(UNITS[0]);
    format!("{}{unit}", seconds / size)
}

/// The lifetimes a server accepts.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub min: Duration,
    pub max: Duration,
}

impl Limits {
    /// The lifetime `text` names, if it is one within the limits.
    pub fn check(&self, text: &str) -> Result<Duration, String> {
        let lifetime = parse(text)?;
        if lifetime < self.min || lifetime > self.max {
            return Err(format!("'{text}' is not from {} to {}", format(self.min), format(self.max)));
        }
        Ok(lifetime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_a_number_and_a_unit() {
        assert_eq!(parse("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse("007d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in ["", "h", "12", "0h", "0d", "-1h", "+1h", "1.5h", "12H", "12 h", " 12h", "1w", "abc", "1e3s", "٣h"]
        {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(parse("36500d").is_ok());
        assert!(parse("36501d").is_err());
        assert!(parse("99999999999999999999d").is_err());
        assert!(parse("18446744073709551615d").is_err(), "overflow is refused, not wrapped");
        for lifetime in ["1s", "90s", "1m", "1h", "36h", "1d", "365d"] {
            assert_eq!(format(parse(lifetime).unwrap()), lifetime);
        }
        assert_eq!(format(Duration::from_secs(86_400)), "1d");
    }

    #[test]
    fn limits_bound_lifetimes() {
        let limits = Limits { min: parse("1h").unwrap(), max: parse("365d").unwrap() };
        assert!(limits.check("1h").is_ok());
        assert!(limits.check("365d").is_ok());
        assert_eq!(limits.check("59m").unwrap_err(), "'59m' is not from 1h to 365d");
        assert_eq!(limits.check("366d").unwrap_err(), "'366d' is not from 1h to 365d");
        let short = Limits { min: Duration::from_secs(1), ..limits };
        assert_eq!(short.check("2s"), Ok(Duration::from_secs(2)));
    }
}
