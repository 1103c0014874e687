//! Record times as RFC 3339 text with milliseconds, UTC: what a reader of the
//! ledger or its JSON export expects.

pub(super) mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_rfc3339_millis(*time))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_rfc3339_weak(&text).map_err(serde::de::Error::custom)
    }
}
