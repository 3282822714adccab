//! Resource lists and a pod's effective requests.

use crate::error::FieldResult;
use crate::fields::At;
use dovetail_dataflow::model::pod::{pod_requests, ContainerRequests};
use dovetail_dataflow::model::{Milli, Resources};
use std::collections::BTreeMap;

/// A resource list as [`Resources`]; names other than cpu, memory, pods and ephemeral-storage
/// (GPUs, hugepages, anything a device plugin advertises) land in `extended`.
pub(crate) fn to_resources(list: &BTreeMap<String, Milli>) -> Resources {
    let mut out = Resources::default();
    for (name, value) in list {
        out.set(name, *value);
    }
    out
}

/// A container's requests. A resource with a limit but no request is requested at its limit, as
/// the API server defaults it.
pub(crate) fn container_requests(container: &At) -> FieldResult<Resources> {
    let Some(res) = container.obj("resources")? else {
        return Ok(Resources::default());
    };
    let mut requests = res.quantity_map("requests")?;
    for (name, limit) in res.quantity_map("limits")? {
        requests.entry(name).or_insert(limit);
    }
    Ok(to_resources(&requests))
}

/// A pod spec's effective requests: containers, init containers (`restartPolicy: Always` ones
/// are sidecars that keep running) and `overhead`, as kube-scheduler sums them.
pub(crate) fn pod_spec_requests(spec: &At) -> FieldResult<Resources> {
    let containers = spec
        .req_list("containers")?
        .iter()
        .map(container_requests)
        .collect::<FieldResult<Vec<_>>>()?;
    let init = spec
        .list("initContainers")?
        .iter()
        .map(|c| {
            Ok(ContainerRequests {
                requests: container_requests(c)?,
                sidecar: c.str("restartPolicy")?.as_deref() == Some("Always"),
            })
        })
        .collect::<FieldResult<Vec<_>>>()?;
    let overhead = to_resources(&spec.quantity_map("overhead")?);
    Ok(pod_requests(&containers, &init, &overhead))
}
