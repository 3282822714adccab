//! CreateFleet's ClientToken: never launch twice. It hashes the NodeClaim's identity (its name
//! and creation time, which stand in for its uid: a name can recur) *and* the overrides. A retry
//! of the same call reuses the token and EC2 returns the fleet it already made; a launch retried
//! after a capacity error keeps its NodeClaim but not its overrides, and gets a new token (the old
//! one would return the old, failed answer, or IdempotentParameterMismatch).

use dovetail_dataflow::backend::FleetRequest;
use dovetail_dataflow::stable_hash::stable_hash;

/// 39 characters: `dovetail-` and 128 bits in hex (EC2 allows 64 ASCII characters).
pub fn client_token(request: &FleetRequest) -> String {
    let what: Vec<(&str, &str, &str)> = request
        .overrides
        .iter()
        .map(|o| {
            (
                o.key.instance_type.as_str(),
                o.key.zone.as_str(),
                o.key.capacity_type.as_str(),
            )
        })
        .collect();
    let identity = (
        request.client_token.as_str(),
        request.capacity_type.as_str(),
        &what,
    );
    let high = stable_hash(&(0u8, &identity));
    let low = stable_hash(&(1u8, &identity));
    format!("dovetail-{high:016x}{low:014x}")
        .chars()
        .take(39)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::backend::{FleetOverride, OfferingKey};
    use dovetail_dataflow::model::Price;

    fn request(token: &str, types: &[&str]) -> FleetRequest {
        FleetRequest {
            labels: Default::default(),
            taints: Vec::new(),
            nodeclaim: "default-abc12".into(),
            nodepool: "default".into(),
            node_class: Some("default".into()),
            client_token: token.into(),
            capacity_type: "spot".into(),
            overrides: types
                .iter()
                .map(|t| FleetOverride {
                    key: OfferingKey::new(*t, "us-east-1a", "spot"),
                    zone_id: String::new(),
                    price: Price::from_dollars(0.1),
                })
                .collect(),
        }
    }

    #[test]
    fn the_same_claim_and_overrides_give_the_same_token() {
        let a = client_token(&request("default-abc12@1000", &["m5.large", "m5.xlarge"]));
        let b = client_token(&request("default-abc12@1000", &["m5.large", "m5.xlarge"]));
        assert_eq!(a, b);
        assert!(a.len() <= 64 && a.is_ascii());
    }

    #[test]
    fn other_overrides_or_a_recurring_name_give_another_token() {
        let a = client_token(&request("default-abc12@1000", &["m5.large", "m5.xlarge"]));
        let fewer = client_token(&request("default-abc12@1000", &["m5.xlarge"]));
        let recreated = client_token(&request("default-abc12@2000", &["m5.large", "m5.xlarge"]));
        assert_ne!(a, fewer);
        assert_ne!(a, recreated);
    }
}
