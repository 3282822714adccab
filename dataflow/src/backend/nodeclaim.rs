//! A NodeClaim as actuation writes it: created before the cloud is called (the durable record of
//! the intent to launch), given its instance's shape once CreateFleet answers, registered when
//! its Node joins.

use crate::decisions::Launch;
use crate::model::{Node, Taint};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeClaim {
    /// Unique among the NodeClaims that exist.
    pub name: String,
    pub nodepool: String,
    /// What the engine decided: requirements, instance types, zones, capacity types (the spec).
    pub launch: Launch,
    /// `metadata.creationTimestamp`, ms.
    pub created_ms: i64,
    /// `spec.startupTaints`: removed from the Node when it is initialised.
    pub startup_taints: Vec<Taint>,
    /// Once launched: the Node it registers as (provider id, labels, taints, capacity, the
    /// annotations recorded at launch), with `in_flight` set until it registers.
    pub status: Option<Node>,
    /// The Node has registered (`Registered` condition).
    pub registered: bool,
    /// `metadata.annotations` not carried by `status`.
    pub annotations: BTreeMap<String, String>,
}

impl NodeClaim {
    /// The instance id, from the status's provider id (`aws:///zone/i-…`).
    pub fn instance_id(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .provider_id
            .as_deref()?
            .rsplit('/')
            .next()
    }

    /// The name of the Node it registers (or registered) as.
    pub fn node_name(&self) -> Option<&str> {
        self.status.as_ref().map(|n| n.name.as_str())
    }
}
