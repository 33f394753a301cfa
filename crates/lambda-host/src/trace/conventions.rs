//! The names our spans carry, as OpenTelemetry's semantic conventions and
//! ADOT's Application Signals attributes spell them: the resource, the
//! attributes the same on every span of a kind (encoded once per process),
//! and those of each AWS call and function ARN (encoded on their first
//! use, a bounded number kept). docs/tracing.md lists them span by span.

use std::sync::{Arc, Mutex, PoisonError};

use super::otlp::{self, Value, Writer};

/// Lambda's and OpenTelemetry's variables for the service's name, in the
/// order they win: OpenTelemetry's own, then the name Powertools gives the
/// log lines and metrics, then the function's.
pub(super) fn service_name<'a>(
    otel: Option<&'a str>,
    powertools: Option<&'a str>,
    function: Option<&'a str>,
) -> &'a str {
    otel.or(powertools).or(function).unwrap_or("lambda-function")
}

/// How many spans an invocation was refused past its cap, on its SERVER
/// span.
pub(super) const SPANS_DROPPED: &str = "lambda_host.spans_dropped";

/// The annotations the host itself writes on every SERVER span, first in
/// `aws.xray.annotations`.
const HOST_ANNOTATIONS: [&str; 2] = ["ColdStart", "Status"];

/// At most this many AWS calls (operation, region, resource) and function
/// ARNs keep their encoded attributes; others are encoded per call, so a
/// function that names tables without end cannot grow the process.
pub(super) const MAX_KNOWN: usize = 32;

/// A function ARN and its attributes, encoded.
type KnownFunction = (String, Vec<u8>);

/// What every span of a kind carries, and the caches of what an AWS call
/// or a function ARN decides.
#[derive(Debug)]
pub(super) struct Conventions {
    /// The SERVER span's name: the function's name, as ADOT and the FaaS
    /// conventions name it (the service's when there is no function).
    pub(super) server_name: String,
    constant: Constant,
    /// Those of each AWS call, encoded on its first.
    #[cfg(feature = "sdk")]
    calls: Mutex<Vec<Arc<AwsCall>>>,
    /// `cloud.resource_id` and `cloud.account.id` of each function ARN
    /// invoked (with or without an alias or version), encoded on its first.
    functions: Mutex<Vec<Arc<KnownFunction>>>,
}

/// Attributes (as `Span` field 9) that never change in a process.
#[derive(Debug)]
struct Constant {
    /// `faas.trigger`, `aws.local.service`, `aws.local.operation`,
    /// `aws.span.kind` `LOCAL_ROOT`.
    server: Vec<u8>,
    /// `aws.local.service`, `aws.local.operation`, `aws.span.kind` `CLIENT`.
    client: Vec<u8>,
    /// `aws.trace.flag.sampled`, false and true.
    sampled: [Vec<u8>; 2],
    /// `faas.coldstart` and the `ColdStart` annotation, false and true.
    cold_start: [Vec<u8>; 2],
    /// `aws.xray.annotations` of a SERVER span without the function's own.
    annotations: Vec<u8>,
}

impl Conventions {
    pub(super) fn new(service: &str, function: Option<&str>) -> Self {
        let local_operation = format!("{}/FunctionHandler", function.unwrap_or(service));
        let local = |kind| {
            [
                ("aws.local.service", Value::Str(service)),
                ("aws.local.operation", Value::Str(&local_operation)),
                ("aws.span.kind", Value::Str(kind)),
            ]
        };
        let server = [&[("faas.trigger", Value::Str("http"))][..], &local("LOCAL_ROOT")].concat();
        let constant = Constant {
            server: attributes(&server),
            client: attributes(&local("CLIENT")),
            sampled: [false, true]
                .map(|sampled| attributes(&[("aws.trace.flag.sampled", Value::Bool(sampled))])),
            cold_start: [false, true].map(|cold| {
                attributes(&[
                    ("faas.coldstart", Value::Bool(cold)),
                    ("ColdStart", Value::Bool(cold)),
                ])
            }),
            annotations: attributes(&[("aws.xray.annotations", Value::Strs(&HOST_ANNOTATIONS))]),
        };
        Self {
            server_name: function.unwrap_or(service).to_owned(),
            constant,
            #[cfg(feature = "sdk")]
            calls: Mutex::new(Vec::new()),
            functions: Mutex::new(Vec::new()),
        }
    }

    /// The attributes every SERVER span of this process carries (encoded).
    pub(super) fn server_attributes(&self) -> &[u8] {
        &self.constant.server
    }

    /// The attributes every CLIENT span of this process carries (encoded).
    pub(super) fn client_attributes(&self) -> &[u8] {
        &self.constant.client
    }

    /// `aws.trace.flag.sampled` (encoded).
    pub(super) fn sampled_attribute(&self, sampled: bool) -> &[u8] {
        let [off, on] = &self.constant.sampled;
        if sampled { on } else { off }
    }

    /// `faas.coldstart` and `ColdStart` (encoded).
    pub(super) fn cold_start_attributes(&self, cold_start: bool) -> &[u8] {
        let [warm, cold] = &self.constant.cold_start;
        if cold_start { cold } else { warm }
    }

    /// Writes `aws.xray.annotations`: the host's, then `keys`, the
    /// function's own (X-Ray indexes what the list names).
    pub(super) fn annotations_attribute(&self, writer: &mut Writer<'_>, keys: &[&str]) {
        if keys.is_empty() {
            writer.raw(&self.constant.annotations);
            return;
        }
        let mut all: Vec<&str> = Vec::with_capacity(HOST_ANNOTATIONS.len() + keys.len());
        all.extend_from_slice(&HOST_ANNOTATIONS);
        all.extend(keys.iter().filter(|key| !HOST_ANNOTATIONS.contains(key)));
        writer.attribute(9, "aws.xray.annotations", Value::Strs(&all));
    }

    /// The span name and attributes of an AWS SDK call, encoded on the
    /// first call to that operation, region and resource: `rpc.*`,
    /// `aws.region`, `aws.remote.service`, `aws.remote.operation`, and
    /// what `enrich` (the service's own module) adds. Encoded outside the
    /// cache's lock.
    #[cfg(feature = "sdk")]
    pub(super) fn aws_call(&self, key: &CallKey<'_>, enrich: impl FnOnce(&mut Writer<'_>)) -> Arc<AwsCall> {
        if let Some(known) = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|call| call.is(key))
        {
            return Arc::clone(known);
        }
        let call = Arc::new(AwsCall::new(key, enrich));
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if calls.len() < MAX_KNOWN && !calls.iter().any(|known| known.is(key)) {
            calls.push(Arc::clone(&call));
        }
        call
    }

    /// Calls `write` with `cloud.resource_id` (the ARN without an alias or
    /// version, as the FaaS conventions want it on Lambda) and
    /// `cloud.account.id` of the invoked function's `arn`, encoded on its
    /// first invocation, outside the cache's lock.
    pub(super) fn function_attributes(&self, arn: &str, write: impl FnOnce(&[u8])) {
        let known = self
            .functions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|known| known.0 == arn)
            .map(Arc::clone);
        if let Some(known) = known {
            write(&known.1);
            return;
        }
        let unqualified = arn
            .match_indices(':')
            .nth(6)
            .and_then(|(colon, _)| arn.get(..colon))
            .unwrap_or(arn);
        let mut pairs = vec![("cloud.resource_id", Value::Str(unqualified))];
        if let Some(account) = arn.split(':').nth(4) {
            pairs.push(("cloud.account.id", Value::Str(account)));
        }
        let encoded = attributes(&pairs);
        write(&encoded);
        let mut functions = self.functions.lock().unwrap_or_else(PoisonError::into_inner);
        if functions.len() < MAX_KNOWN && !functions.iter().any(|known| known.0 == arn) {
            functions.push(Arc::new((arn.to_owned(), encoded)));
        }
    }

    #[cfg(test)]
    pub(super) fn known(&self) -> (usize, usize) {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner).len();
        let functions = self
            .functions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (calls, functions)
    }
}

/// What decides an AWS call's span name and attributes.
#[cfg(feature = "sdk")]
#[derive(Debug, Clone, Copy)]
pub(super) struct CallKey<'a> {
    pub(super) service: &'a str,
    pub(super) operation: &'a str,
    pub(super) region: Option<&'a str>,
    /// The resource the call is on, as the service's enrichment names it
    /// (a DynamoDB table).
    pub(super) resource: Option<&'a str>,
}

/// An AWS SDK call's span name (`DynamoDB.PutItem`) and the attributes
/// its key decides, encoded.
#[cfg(feature = "sdk")]
#[derive(Debug)]
pub(super) struct AwsCall {
    service: String,
    operation: String,
    region: Option<String>,
    resource: Option<String>,
    pub(super) name: String,
    pub(super) attributes: Vec<u8>,
}

#[cfg(feature = "sdk")]
impl AwsCall {
    fn new(key: &CallKey<'_>, enrich: impl FnOnce(&mut Writer<'_>)) -> Self {
        let CallKey {
            service,
            operation,
            region,
            resource,
        } = *key;
        let remote = format!("AWS::{service}");
        let mut bytes = Vec::new();
        let mut writer = Writer::new(&mut bytes);
        writer.attribute(9, "rpc.system", Value::Str("aws-api"));
        writer.attribute(9, "rpc.service", Value::Str(service));
        writer.attribute(9, "rpc.method", Value::Str(operation));
        if let Some(region) = region {
            writer.attribute(9, "aws.region", Value::Str(region));
        }
        enrich(&mut writer);
        writer.attribute(9, "aws.remote.service", Value::Str(&remote));
        writer.attribute(9, "aws.remote.operation", Value::Str(operation));
        Self {
            service: service.to_owned(),
            operation: operation.to_owned(),
            region: region.map(str::to_owned),
            resource: resource.map(str::to_owned),
            name: format!("{service}.{operation}"),
            attributes: bytes,
        }
    }

    fn is(&self, key: &CallKey<'_>) -> bool {
        self.operation == key.operation
            && self.resource.as_deref() == key.resource
            && self.service == key.service
            && self.region.as_deref() == key.region
    }
}

/// Attributes as a span's (field 9).
pub(super) fn attributes(pairs: &[(&str, Value<'_>)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut writer = Writer::new(&mut bytes);
    for (key, value) in pairs {
        writer.attribute(9, key, *value);
    }
    bytes
}

/// The Lambda environment the resource attributes come from, as ADOT's
/// Lambda layer sets `OTEL_RESOURCE_ATTRIBUTES` from it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ResourceOf<'a> {
    pub(super) service: &'a str,
    pub(super) region: Option<&'a str>,
    pub(super) function_name: Option<&'a str>,
    pub(super) function_version: Option<&'a str>,
    pub(super) log_stream_name: Option<&'a str>,
    pub(super) log_group_name: Option<&'a str>,
}

/// The resource attributes ADOT's Lambda layer sets (`service.name`,
/// `cloud.*`, `faas.*`, `aws.log.group.names`) and those an SDK gives
/// (`telemetry.sdk.*`), with ADOT's `aws.local.service`.
pub(super) fn resource(of: &ResourceOf<'_>) -> Vec<u8> {
    let mut attributes = vec![
        ("service.name", Value::Str(of.service)),
        ("telemetry.sdk.name", Value::Str(env!("CARGO_PKG_NAME"))),
        ("telemetry.sdk.language", Value::Str("rust")),
        ("telemetry.sdk.version", Value::Str(env!("CARGO_PKG_VERSION"))),
        ("cloud.provider", Value::Str("aws")),
        ("cloud.platform", Value::Str("aws_lambda")),
    ];
    for (key, value) in [
        ("cloud.region", of.region),
        ("faas.name", of.function_name),
        ("faas.version", of.function_version),
        ("faas.instance", of.log_stream_name),
        // A string, as ADOT sends it and Application Signals documents it
        // (several names joined by `&`), not the conventions' string[]:
        // docs/tracing.md, "Decisions".
        ("aws.log.group.names", of.log_group_name),
    ] {
        if let Some(value) = value {
            attributes.push((key, Value::Str(value)));
        }
    }
    attributes.push(("aws.local.service", Value::Str(of.service)));
    otlp::resource(&attributes)
}

/// The instrumentation scope of every span: this crate.
pub(super) fn scope() -> Vec<u8> {
    otlp::scope(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::daemon as decode;

    /// Attributes encoded as a span's (field 9), decoded as a `Span`'s.
    fn span_attributes(encoded: &[u8]) -> serde_json::Value {
        use prost::Message as _;
        let span = opentelemetry_proto::tonic::trace::v1::Span::decode(encoded).expect("span attributes");
        decode::attributes(&span.attributes)
    }

    #[test]
    fn the_service_is_named_by_opentelemetry_then_powertools_then_the_function() {
        assert_eq!(service_name(Some("o"), Some("p"), Some("f")), "o");
        assert_eq!(service_name(None, Some("p"), Some("f")), "p");
        assert_eq!(service_name(None, None, Some("f")), "f");
        assert_eq!(service_name(None, None, None), "lambda-function");
    }

    #[test]
    fn an_aws_calls_attributes_are_encoded_once_and_a_process_keeps_a_bounded_number() {
        let conventions = Conventions::new("s", None);
        fn key<'a>(region: Option<&'a str>, resource: Option<&'a str>) -> CallKey<'a> {
            CallKey {
                service: "Lambda",
                operation: "Invoke",
                region,
                resource,
            }
        }
        let first = conventions.aws_call(&key(Some("eu-west-1"), Some("a")), |_| {});
        let again = conventions.aws_call(&key(Some("eu-west-1"), Some("a")), |_| panic!("encoded twice"));
        assert!(Arc::ptr_eq(&first, &again));
        let elsewhere = conventions.aws_call(&key(Some("us-east-1"), Some("a")), |_| {});
        assert!(!Arc::ptr_eq(&first, &elsewhere));
        assert_eq!(first.name, "Lambda.Invoke");
        assert_eq!(
            span_attributes(&first.attributes),
            serde_json::json!({
                "rpc.system": "aws-api", "rpc.service": "Lambda", "rpc.method": "Invoke",
                "aws.region": "eu-west-1", "aws.remote.service": "AWS::Lambda", "aws.remote.operation": "Invoke",
            })
        );

        for n in 0..3 * MAX_KNOWN {
            let resource = format!("r-{n}");
            let call = conventions.aws_call(&key(None, Some(&resource)), |writer| {
                writer.attribute(9, "extra", Value::Str(&resource));
            });
            assert_eq!(span_attributes(&call.attributes)["extra"], resource.as_str());
        }
        for n in 0..3 * MAX_KNOWN {
            let arn = format!("arn:aws:lambda:eu-west-1:123456789012:function:f:{n}");
            let mut encoded = Vec::new();
            conventions.function_attributes(&arn, |bytes| encoded.extend_from_slice(bytes));
            let attributes = span_attributes(&encoded);
            assert_eq!(
                attributes["cloud.resource_id"],
                "arn:aws:lambda:eu-west-1:123456789012:function:f"
            );
            assert_eq!(attributes["cloud.account.id"], "123456789012");
        }
        assert_eq!(conventions.known(), (MAX_KNOWN, MAX_KNOWN));
    }

    #[test]
    fn the_annotations_list_names_the_hosts_then_the_functions_once_each() {
        let conventions = Conventions::new("s", None);
        let mut bytes = Vec::new();
        conventions.annotations_attribute(&mut Writer::new(&mut bytes), &["Tier", "Status"]);
        assert_eq!(
            span_attributes(&bytes)["aws.xray.annotations"],
            serde_json::json!(["ColdStart", "Status", "Tier"])
        );
    }
}
