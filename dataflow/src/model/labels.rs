//! Well-known labels: the ones Kubernetes sets on every node and the ones Karpenter derives from
//! an instance type and offering. A pod may require a well-known label that a NodePool leaves
//! open; any other label must be defined by the NodePool (Karpenter's rule).

pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// Set when the Node registers.
pub const REGISTERED: &str = "karpenter.sh/registered";
/// Set when the Node is initialised (Ready, startup taints gone).
pub const INITIALIZED: &str = "karpenter.sh/initialized";

pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";

pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// The capacity reservation a node was launched into (Karpenter's AWS provider sets it).
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// That reservation's type: `default` or `capacity-block`.
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";

/// Annotation and taint names Karpenter uses.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";

/// dovetail's own drift hashes on a NodeClaim (Karpenter's `karpenter.sh/nodepool-hash` uses a
/// Go hash dovetail cannot reproduce, so dovetail keeps its own, from a stable hash function).
pub const NODEPOOL_HASH: &str = "dovetail.sh/nodepool-hash";
pub const NODECLASS_HASH: &str = "dovetail.sh/nodeclass-hash";
/// What dovetail launched an instance with, recorded on its NodeClaim.
pub const SUBNET_ID: &str = "dovetail.sh/subnet-id";
pub const SECURITY_GROUP_IDS: &str = "dovetail.sh/security-group-ids";
pub const ENCLAVES: &str = "dovetail.sh/enclaves";

/// Labels a NodePool may leave open and a pod may still require.
pub const WELL_KNOWN: &[&str] = &[
    ARCH,
    OS,
    HOSTNAME,
    INSTANCE_TYPE,
    INSTANCE_TYPE_BETA,
    ZONE,
    ZONE_BETA,
    REGION,
    WINDOWS_BUILD,
    ZONE_ID,
    CAPACITY_TYPE,
    NODEPOOL,
    NODECLASS,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_MEMORY,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_MEMORY,
    INSTANCE_HYPERVISOR,
    INSTANCE_LOCAL_NVME,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_ENCRYPTION_IN_TRANSIT,
];

pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN.contains(&key)
}

/// Labels that Kubernetes or Karpenter own and that a NodePool template may not set
/// (Karpenter rejects them in validation).
pub fn is_restricted(key: &str) -> bool {
    key == HOSTNAME || key == NODEPOOL || key.starts_with("karpenter.k8s.aws/instance-")
}
