//! The Powertools settings (the `service` key, the metric namespace,
//! metrics on or off), checked once at start-up against what CloudWatch
//! takes; [`crate::config`] reads them from the environment.

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

/// Which Powertools setting CloudWatch would refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TelemetrySettingError {
    ServiceName,
    Namespace,
}

impl TelemetrySettings {
    /// A service name and a namespace (the defaults when `None`), trimmed,
    /// with metrics on. CloudWatch would drop, one invocation at a time and
    /// silently, every document whose namespace or dimension value it
    /// refuses, so those are checked here, once.
    pub fn new(service: Option<&str>, namespace: Option<&str>) -> Result<Self, TelemetrySettingError> {
        let service = service.map_or(DEFAULT_SERVICE, str::trim).to_owned();
        // CloudWatch dimension values: 1 to 1024 ASCII characters, not only
        // blanks; we also refuse control characters, which no log reader wants.
        if service.len() > 1024
            || !service
                .bytes()
                .all(|byte| byte.is_ascii_graphic() || byte == b' ')
        {
            return Err(TelemetrySettingError::ServiceName);
        }
        let namespace = namespace.map_or(DEFAULT_NAMESPACE, str::trim).to_owned();
        // CloudWatch namespaces: up to 255 of these characters, and the
        // `AWS/` prefix belongs to AWS services.
        let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b".-_/#: ".contains(&byte);
        if namespace.len() > 255 || !namespace.bytes().all(allowed) || namespace.starts_with("AWS/") {
            return Err(TelemetrySettingError::Namespace);
        }
        Ok(Self {
            service,
            namespace,
            metrics: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_service_or_namespace_gives_the_documented_defaults() {
        assert_eq!(
            TelemetrySettings::new(None, None),
            Ok(TelemetrySettings::default())
        );
        assert_eq!(TelemetrySettings::default().service, "plant-store");
        assert_eq!(TelemetrySettings::default().namespace, "PlantStore");
    }

    #[test]
    fn a_service_and_a_namespace_are_kept_trimmed() {
        assert_eq!(
            TelemetrySettings::new(Some(" plants-eu "), Some("Shop/Plants")),
            Ok(TelemetrySettings {
                service: "plants-eu".to_owned(),
                namespace: "Shop/Plants".to_owned(),
                metrics: true,
            })
        );
    }

    #[test]
    fn values_cloudwatch_would_refuse_stop_the_function_at_start() {
        let long = "n".repeat(256);
        let cases = [
            (None, Some("AWS/Lambda"), TelemetrySettingError::Namespace),
            (None, Some("Plänts"), TelemetrySettingError::Namespace),
            (None, Some(long.as_str()), TelemetrySettingError::Namespace),
            (Some("plant\u{7}store"), None, TelemetrySettingError::ServiceName),
            (Some("plänt-store"), None, TelemetrySettingError::ServiceName),
        ];
        for (service, namespace, error) in cases {
            assert_eq!(
                TelemetrySettings::new(service, namespace),
                Err(error),
                "{service:?} {namespace:?}"
            );
        }
    }
}
