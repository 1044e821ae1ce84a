//! Times in stored records and answers: RFC 3339 text, read once into milliseconds since
//! the epoch. The text is kept as it was read and written back unchanged, so old records
//! and answers are the same bytes; text that is no time is an error, never a 0.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time as RFC 3339 text and its milliseconds since the epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp {
    millis: u64,
    text: String,
}

/// Text that is not an RFC 3339 time (at or after the epoch).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an RFC 3339 time")]
pub struct BadTime(pub String);

impl Timestamp {
    /// The time `millis` milliseconds after the epoch, written with milliseconds.
    pub fn from_millis(millis: u64) -> Timestamp {
        let text = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(millis)).to_string();
        Timestamp { millis, text }
    }

    pub fn millis(&self) -> u64 {
        self.millis
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl TryFrom<String> for Timestamp {
    type Error = BadTime;

    fn try_from(text: String) -> Result<Timestamp, BadTime> {
        let since_epoch = humantime::parse_rfc3339(&text).ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok());
        match since_epoch {
            Some(d) => Ok(Timestamp { millis: d.as_millis() as u64, text }),
            None => Err(BadTime(text)),
        }
    }
}

impl From<Timestamp> for String {
    fn from(time: Timestamp) -> String {
        time.text
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_once_and_write_back_as_read() {
        for text in ["2026-11-24T10:00:00Z", "2026-11-24T10:00:00.123Z"] {
            let time: Timestamp = serde_json::from_str(&format!("\"{text}\"")).unwrap();
            assert_eq!(serde_json::to_string(&time).unwrap(), format!("\"{text}\""));
        }
        let time = Timestamp::from_millis(1_764_000_000_123);
        assert_eq!(time.as_str(), "2025-11-24T16:00:00.123Z");
        assert_eq!(Timestamp::try_from(time.to_string()).unwrap().millis(), 1_764_000_000_123);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err(), "an error, not 0");
    }
}
