//! Why an AWS call or its answer failed: the action, the API's error code and message, or the
//! object and field of an answer that does not make sense.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use dovetail_dataflow::catalog::CatalogError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum AwsError {
    /// The API answered with an error (after the retries [`crate::calls`] allows).
    #[error("{action}: {code}: {message}")]
    Call {
        action: &'static str,
        /// The API's error code (`InvalidSubnetID.NotFound`, `RequestLimitExceeded`), or the
        /// transport failure's kind (`dispatch`, `timeout`) when the API never answered.
        code: String,
        message: String,
    },
    /// An answer lacks a field it must have, or has one that does not parse.
    #[error("{action}: {object}: {field}: {reason}")]
    Response {
        action: &'static str,
        /// What the field belongs to (`instance type m5.large`, `instance i-0abc…`).
        object: String,
        field: String,
        reason: String,
    },
    /// An EC2NodeClass cannot be resolved or launched with (no subnet, no AMI).
    #[error("EC2NodeClass {name}: {field}: {reason}")]
    NodeClass {
        name: String,
        field: String,
        reason: String,
    },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl AwsError {
    /// An answer's missing or malformed field.
    pub fn response(
        action: &'static str,
        object: impl Into<String>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> AwsError {
        AwsError::Response {
            action,
            object: object.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The API's error code, when the API answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Call { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Throttling and transient failures: the call may succeed if made again later.
    pub fn is_retryable(&self) -> bool {
        self.code().is_some_and(is_retryable_code)
    }
}

/// EC2's throttling codes, its 5xx-class codes, and transport failures.
pub fn is_retryable_code(code: &str) -> bool {
    matches!(
        code,
        "RequestLimitExceeded"
            | "Throttling"
            | "ThrottlingException"
            | "RequestThrottled"
            | "ServiceUnavailable"
            | "Unavailable"
            | "InternalError"
            | "InternalFailure"
            | "dispatch"
            | "timeout"
            | "response"
            | "http-503"
            | "http-500"
    )
}

/// An SDK error as an [`AwsError::Call`]: the service's code when it answered with one, the HTTP
/// status when it answered without one, the transport failure's kind otherwise. (EC2's and SQS's
/// `SdkError` are the same type.)
pub fn from_sdk<E>(
    action: &'static str,
    err: aws_sdk_ec2::error::SdkError<E, aws_sdk_ec2::config::http::HttpResponse>,
) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_ec2::error::SdkError;
    let message = match &err {
        SdkError::ServiceError(e) => e.err().message().unwrap_or_default().to_string(),
        _ => aws_sdk_ec2::error::DisplayErrorContext(&err).to_string(),
    };
    let code = match &err {
        SdkError::ServiceError(e) => match e.err().code() {
            Some(c) => c.to_string(),
            None => format!("http-{}", e.raw().status().as_u16()),
        },
        SdkError::TimeoutError(_) => "timeout".to_string(),
        SdkError::DispatchFailure(_) => "dispatch".to_string(),
        SdkError::ResponseError(_) => "response".to_string(),
        SdkError::ConstructionFailure(_) => "construction".to_string(),
        _ => "unknown".to_string(),
    };
    AwsError::Call {
        action,
        code,
        message,
    }
}
