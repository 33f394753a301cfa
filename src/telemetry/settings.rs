//! The Powertools settings (`POWERTOOLS_SERVICE_NAME`,
//! `POWERTOOLS_METRICS_NAMESPACE`, `POWERTOOLS_METRICS_DISABLED`), read and
//! checked once at start-up.

use crate::config::parse_switch;

/// The `service` key and dimension when `POWERTOOLS_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE: &str = "plant-store";
/// The metric namespace when `POWERTOOLS_METRICS_NAMESPACE` is unset.
pub const DEFAULT_NAMESPACE: &str = "PlantStore";

/// The Powertools settings, read once at start-up with the rest of
/// [`crate::config::Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// `POWERTOOLS_SERVICE_NAME`: the `service` log key and metric dimension.
    pub service: String,
    /// `POWERTOOLS_METRICS_NAMESPACE`.
    pub namespace: String,
    /// False when `POWERTOOLS_METRICS_DISABLED` is true.
    pub metrics: bool,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            service: DEFAULT_SERVICE.to_owned(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            metrics: true,
        }
    }
}

/// Which Powertools variable is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TelemetrySettingError {
    ServiceName,
    Namespace,
    MetricsDisabled,
}

impl TelemetrySettings {
    /// Reads the Powertools variables through `get`, which treats empty
    /// values as unset. CloudWatch would drop, one invocation at a time and
    /// silently, every document whose namespace or dimension value it
    /// refuses, so those are checked here, once.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, TelemetrySettingError> {
        let service = get("POWERTOOLS_SERVICE_NAME")
            .map_or_else(|| DEFAULT_SERVICE.to_owned(), |value| value.trim().to_owned());
        // CloudWatch dimension values: 1 to 1024 ASCII characters, not only
        // blanks; we also refuse control characters, which no log reader wants.
        if service.len() > 1024
            || !service
                .bytes()
                .all(|byte| byte.is_ascii_graphic() || byte == b' ')
        {
            return Err(TelemetrySettingError::ServiceName);
        }
        let namespace = get("POWERTOOLS_METRICS_NAMESPACE")
            .map_or_else(|| DEFAULT_NAMESPACE.to_owned(), |value| value.trim().to_owned());
        // CloudWatch namespaces: up to 255 of these characters, and the
        // `AWS/` prefix belongs to AWS services.
        let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b".-_/#: ".contains(&byte);
        if namespace.len() > 255 || !namespace.bytes().all(allowed) || namespace.starts_with("AWS/") {
            return Err(TelemetrySettingError::Namespace);
        }
        // Powertools reads only "true" as off; anything unreadable is a
        // mistake worth stopping for rather than guessing.
        let metrics = match get("POWERTOOLS_METRICS_DISABLED") {
            None => true,
            Some(value) => !parse_switch(&value).ok_or(TelemetrySettingError::MetricsDisabled)?,
        };
        Ok(Self {
            service,
            namespace,
            metrics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<TelemetrySettings, TelemetrySettingError> {
        TelemetrySettings::from_lookup(&|name: &str| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn unset_powertools_variables_give_the_documented_defaults() {
        assert_eq!(
            settings(&[]),
            Ok(TelemetrySettings {
                service: "plant-store".to_owned(),
                namespace: "PlantStore".to_owned(),
                metrics: true,
            })
        );
    }

    #[test]
    fn the_service_namespace_and_switch_come_from_the_powertools_variables() {
        let read = settings(&[
            ("POWERTOOLS_SERVICE_NAME", " plants-eu "),
            ("POWERTOOLS_METRICS_NAMESPACE", "Shop/Plants"),
            ("POWERTOOLS_METRICS_DISABLED", "TRUE"),
        ]);
        assert_eq!(
            read,
            Ok(TelemetrySettings {
                service: "plants-eu".to_owned(),
                namespace: "Shop/Plants".to_owned(),
                metrics: false,
            })
        );
        for off in ["false", "0", "No"] {
            let read = settings(&[("POWERTOOLS_METRICS_DISABLED", off)]).map(|read| read.metrics);
            assert_eq!(read, Ok(true), "{off}");
        }
    }

    #[test]
    fn values_cloudwatch_would_refuse_stop_the_function_at_start() {
        let long = "n".repeat(256);
        let cases = [
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                "AWS/Lambda",
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                "Plänts",
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_METRICS_NAMESPACE",
                long.as_str(),
                TelemetrySettingError::Namespace,
            ),
            (
                "POWERTOOLS_SERVICE_NAME",
                "plant\u{7}store",
                TelemetrySettingError::ServiceName,
            ),
            (
                "POWERTOOLS_SERVICE_NAME",
                "plänt-store",
                TelemetrySettingError::ServiceName,
            ),
            (
                "POWERTOOLS_METRICS_DISABLED",
                "maybe",
                TelemetrySettingError::MetricsDisabled,
            ),
        ];
        for (name, value, error) in cases {
            assert_eq!(settings(&[(name, value)]), Err(error), "{name}={value}");
        }
    }
}
