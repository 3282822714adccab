//! dovetail's AWS backend: the second implementation of the `Cloud` interface, beside the
//! simulator's. It fills the catalogue from EC2 (instance types, zone offerings, zone ids),
//! resolves EC2NodeClass selector terms into their status (subnets, security groups, AMIs),
//! launches with CreateFleet `Type=instant` through launch templates it manages, terminates with
//! TerminateInstances, keeps a cache of this cluster's instances from DescribeInstances, and reads
//! interruption messages from Karpenter's SQS queue.
//!
//! Every call goes through [`calls`]: a per-action rate limit, retries with backoff on
//! throttling and transient failures, and metrics by action and result code. The SDK's own
//! configuration chain (environment, profiles, IRSA web identity, EKS Pod Identity) gives
//! credentials, region and endpoint, so any EC2-compatible endpoint works unchanged
//! (`AWS_ENDPOINT_URL`).

pub mod ami_alias;
pub mod calls;
pub mod client_token;
pub mod cloud;
pub mod discovery;
pub mod error;
pub mod fleet;
pub mod instance_profile;
pub mod instances;
pub mod interruption_queue;
pub mod launch_template;
pub mod sdk;
pub mod selectors;
pub mod settings;
pub mod test_peer;
pub mod user_data;

pub use cloud::Ec2Cloud;
pub use error::AwsError;
pub use settings::AwsSettings;
