//! The SDK clients (EC2, SQS, SSM, IAM), from the SDK's standard configuration chain: region, credentials (environment,
//! profile, IRSA web identity, EKS Pod Identity / container credentials, instance metadata) and
//! endpoint (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_EC2`, profiles). The SDK's own retries are
//! off: [`crate::calls`] retries, so every attempt is paced and counted.

use crate::error::AwsError;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use std::time::Duration;

/// EC2, SQS, SSM and IAM clients for one region.
#[derive(Debug, Clone)]
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub region: String,
}

/// What overrides the standard chain (flags; tests).
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    pub region: Option<String>,
    /// An endpoint for every service (tests point it at their EC2 API server).
    pub endpoint_url: Option<String>,
    /// Static credentials (tests); the chain's otherwise.
    pub static_credentials: Option<(String, String)>,
}

/// Loads the configuration and builds the clients. Fails when no region is configured.
pub async fn load(options: &ClientOptions) -> Result<Clients, AwsError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                // SQS long polls for 20 s.
                .operation_attempt_timeout(Duration::from_secs(40))
                .build(),
        );
    if let Some(region) = &options.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &options.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    if let Some((id, secret)) = &options.static_credentials {
        loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
            id.clone(),
            secret.clone(),
            None,
            None,
            "dovetail-static",
        ));
    }
    let config = loader.load().await;
    let region = config
        .region()
        .map(ToString::to_string)
        .ok_or_else(|| AwsError::Call {
            action: "LoadConfig",
            code: "NoRegion".to_string(),
            message: "no AWS region configured (--region, AWS_REGION or a profile)".to_string(),
        })?;
    Ok(Clients {
        ec2: aws_sdk_ec2::Client::new(&config),
        sqs: aws_sdk_sqs::Client::new(&config),
        ssm: aws_sdk_ssm::Client::new(&config),
        iam: aws_sdk_iam::Client::new(&config),
        region,
    })
}
