//! NodeOverlay semantics (Karpenter's alpha API): an overlay whose requirements select an
//! instance type (its labels, plus the NodePool's template labels) adds capacity and sets or
//! adjusts the price of the offerings it selects. The heaviest overlay wins per field.

use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, ZONE, ZONE_ID};
use dovetail_dataflow::model::resources::MEMORY;
use dovetail_dataflow::model::{InstanceType, NodeOverlay, NodePool, Price, Requirements};
use std::collections::BTreeSet;

/// True when the overlay's non-offering requirements admit the type on this NodePool.
fn selects_type(overlay: &NodeOverlay, it: &InstanceType, pool: &NodePool) -> bool {
    overlay.requirements.0.iter().all(|(key, req)| {
        if key == ZONE || key == CAPACITY_TYPE || key == ZONE_ID {
            return true;
        }
        if let Some(v) = pool.template_labels.get(key) {
            return req.has(v);
        }
        match it.requirements.get(key) {
            Some(tr) => !tr.intersection(req).is_empty(),
            None => matches!(
                req.operator(),
                dovetail_dataflow::model::Operator::NotIn
                    | dovetail_dataflow::model::Operator::DoesNotExist
            ),
        }
    })
}

/// Applies a price adjustment as written: `+10%`, `-5%`, `+0.02`, `-0.01`. The result is
/// clamped to `0..=Price::CEILING` (an adjustment too large to add saturates at the ceiling, it
/// never wraps to a negative price read as free); text that is not a finite number leaves the
/// price as it was (the loader refuses such overlays).
fn adjust(price: Price, adjustment: &str) -> Price {
    let s = adjustment.trim();
    let number = |t: &str| t.parse::<f64>().ok().filter(|n| !n.is_nan());
    if let Some(pct) = s.strip_suffix('%') {
        if let Some(p) = number(pct) {
            return Price::clamped_micros((price.0 as f64) * (1.0 + p / 100.0));
        }
    } else if let Some(d) = number(s) {
        return Price::clamped_micros(price.0 as f64 + d * 1_000_000.0);
    }
    price
}

/// The instance type as the NodePool sees it once overlays apply.
pub fn apply_overlays(
    it: &InstanceType,
    pool: &NodePool,
    overlays: &[&NodeOverlay],
) -> InstanceType {
    let mut out = it.clone();
    let mut selecting: Vec<&NodeOverlay> = overlays
        .iter()
        .copied()
        .filter(|o| selects_type(o, it, pool))
        .collect();
    if selecting.is_empty() {
        return out;
    }
    selecting.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    let mut set: BTreeSet<&str> = BTreeSet::new();
    for o in &selecting {
        for (resource, value) in &o.capacity {
            if !set.insert(resource.as_str()) {
                continue;
            }
            out.capacity.set(resource, *value);
            // Hugepages are carved out of memory.
            if resource.starts_with("hugepages-") {
                let mem = out.capacity.get(MEMORY).saturating_sub(*value);
                out.capacity.set(MEMORY, mem);
            }
        }
    }
    for offering in out.offerings.iter_mut() {
        let mut only_offering = Requirements::new();
        for o in &selecting {
            only_offering.0.clear();
            for key in [ZONE, CAPACITY_TYPE, ZONE_ID] {
                if let Some(r) = o.requirements.get(key) {
                    only_offering.add(key, r.clone());
                }
            }
            if !offering_allowed(offering, &only_offering) {
                continue;
            }
            if let Some(p) = o.price {
                offering.price = Price::clamped(i128::from(p));
                break;
            }
            if let Some(adj) = &o.price_adjustment {
                offering.price = adjust(offering.price, adj);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::{Offering, Requirement};

    fn it() -> InstanceType {
        let mut reqs = Requirements::new();
        reqs.add(
            "karpenter.k8s.aws/instance-family",
            Requirement::single("m5"),
        );
        InstanceType {
            name: "m5.large".into(),
            requirements: reqs,
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: vec![
                Offering {
                    zone: "a".into(),
                    zone_id: String::new(),
                    capacity_type: "spot".into(),
                    price: Price(100),
                    available: true,
                },
                Offering {
                    zone: "a".into(),
                    zone_id: String::new(),
                    capacity_type: "on-demand".into(),
                    price: Price(200),
                    available: true,
                },
            ],
        }
    }

    #[test]
    fn heaviest_overlay_sets_price_of_selected_offerings_only() {
        let mut spot_only = Requirements::new();
        spot_only.add(CAPACITY_TYPE, Requirement::single("spot"));
        let light = NodeOverlay {
            name: "light".into(),
            requirements: spot_only.clone(),
            price_adjustment: Some("+50%".into()),
            weight: 1,
            ..Default::default()
        };
        let heavy = NodeOverlay {
            name: "heavy".into(),
            requirements: spot_only,
            price: Some(42),
            weight: 10,
            ..Default::default()
        };
        let out = apply_overlays(&it(), &NodePool::default(), &[&light, &heavy]);
        assert_eq!(out.offerings[0].price, Price(42));
        assert_eq!(out.offerings[1].price, Price(200));
        let out = apply_overlays(&it(), &NodePool::default(), &[&light]);
        assert_eq!(out.offerings[0].price, Price(150));
    }

    #[test]
    fn adjustments_too_large_to_add_saturate_instead_of_making_types_free() {
        let overlay = |adjustment: &str| NodeOverlay {
            name: "o".into(),
            price_adjustment: Some(adjustment.into()),
            ..Default::default()
        };
        for huge in ["+1e300", "9223372036854775807", "+1e400%", "inf", "+1e30%"] {
            let out = apply_overlays(&it(), &NodePool::default(), &[&overlay(huge)]);
            for o in &out.offerings {
                assert_eq!(o.price, Price::CEILING, "{huge}: {o:?}");
            }
        }
        // Below zero clamps to zero, as it always did; NaN leaves the price alone.
        let out = apply_overlays(&it(), &NodePool::default(), &[&overlay("-1e300")]);
        assert_eq!(out.offerings[0].price, Price(0));
        let out = apply_overlays(&it(), &NodePool::default(), &[&overlay("NaN%")]);
        assert_eq!(out.offerings[0].price, Price(100));
        let set = NodeOverlay {
            name: "set".into(),
            price: Some(i64::MAX),
            ..Default::default()
        };
        let out = apply_overlays(&it(), &NodePool::default(), &[&set]);
        assert_eq!(out.offerings[1].price, Price::CEILING);
    }

    #[test]
    fn hugepages_reduce_memory_and_unselected_types_are_untouched() {
        let mut reqs = Requirements::new();
        reqs.add(
            "karpenter.k8s.aws/instance-family",
            Requirement::single("c5"),
        );
        let other = NodeOverlay {
            name: "c5".into(),
            requirements: reqs,
            price: Some(1),
            ..Default::default()
        };
        assert_eq!(apply_overlays(&it(), &NodePool::default(), &[&other]), it());
        let mut base = it();
        base.capacity.set(MEMORY, 8_000);
        let huge = NodeOverlay {
            name: "huge".into(),
            capacity: [("hugepages-2Mi".to_string(), 1_000)].into(),
            ..Default::default()
        };
        let out = apply_overlays(&base, &NodePool::default(), &[&huge]);
        assert_eq!(out.capacity.get(MEMORY), 7_000);
        assert_eq!(out.capacity.get("hugepages-2Mi"), 1_000);
    }
}
