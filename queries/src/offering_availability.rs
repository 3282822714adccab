//! Query — which offerings can be launched now: each instance type as its EC2NodeClass resolves
//! it, with the offerings that have a capacity error in force marked unavailable.
//!
//! Rule: an offering (type, zone, capacity type) that answered with a capacity error at `at` is
//! unavailable from `at` until the error's `until` (Karpenter's unavailable-offerings cache,
//! 3 minutes), on the engine's clock: the window opens and closes as timers (`temporal::during`),
//! so nothing polls a wall clock and an expiry re-offers the pool by itself. An instance type no
//! error in force names passes through unchanged.

use differential_dataflow::VecCollection;
use dovetail_dataflow::backend::OfferingKey;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::InstanceType;
use dovetail_dataflow::temporal::during;

/// `instance_types`: (EC2NodeClass, type); `capacity_errors`: (offering, at ms, until ms).
pub fn offering_availability<'s>(
    instance_types: VecCollection<'s, Epoch, (String, InstanceType)>,
    capacity_errors: VecCollection<'s, Epoch, (OfferingKey, i64, i64)>,
) -> VecCollection<'s, Epoch, (String, InstanceType)> {
    let in_force = during(capacity_errors, |(_, at, until)| (*at, Some(*until)))
        .map(|(k, _, _)| (k.instance_type, (k.zone, k.capacity_type)))
        .distinct();
    let by_type = instance_types.map(|(class, it)| (it.name.clone(), (class, it)));
    let errored = in_force.clone().map(|(t, _)| t).distinct();
    let untouched = by_type
        .clone()
        .antijoin(errored)
        .map(|(_, class_and_type)| class_and_type);
    let unavailable = in_force.reduce_named("UnavailableOfferings", |_t, offerings, out| {
        let set: Vec<(String, String)> = offerings.iter().map(|(o, _)| (*o).clone()).collect();
        out.push((set, 1));
    });
    let marked = by_type.join_map(unavailable, |_t, (class, it), offerings| {
        let mut it = it.clone();
        for o in it.offerings.iter_mut() {
            if offerings
                .iter()
                .any(|(zone, ct)| *zone == o.zone && *ct == o.capacity_type)
            {
                o.available = false;
            }
        }
        (class.clone(), it)
    });
    untouched.concat(marked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::decisions::Decision;
    use dovetail_dataflow::engine::Engine;
    use dovetail_dataflow::facts::Fact;
    use dovetail_dataflow::model::{Offering, Price};

    /// The engine reports how many offerings are unavailable, as a price (a carrier).
    fn engine() -> Engine {
        Engine::start(1, |facts| {
            let types = facts.clone().flat_map(|f| match f {
                Fact::InstanceType {
                    node_class,
                    instance_type,
                } => Some((node_class, instance_type)),
                _ => None,
            });
            let errors = facts.flat_map(|f| match f {
                Fact::CapacityError {
                    offering,
                    at_ms,
                    until_ms,
                } => Some((offering, at_ms, until_ms)),
                _ => None,
            });
            offering_availability(types, errors)
                .flat_map(|(_, it)| {
                    it.offerings
                        .into_iter()
                        .filter(|o| !o.available)
                        .map(move |o| format!("{}/{}/{}", it.name, o.zone, o.capacity_type))
                        .collect::<Vec<_>>()
                })
                .map(|_| ())
                .count()
                .map(|((), n)| Decision::LowerBound(Price(n as i64)))
        })
        .expect("engine starts")
    }

    fn m5() -> Fact {
        let offering = |zone: &str, ct: &str| Offering {
            zone: zone.into(),
            zone_id: String::new(),
            capacity_type: ct.into(),
            price: Price(1),
            available: true,
        };
        Fact::InstanceType {
            node_class: "default".into(),
            instance_type: InstanceType {
                name: "m5.large".into(),
                requirements: Default::default(),
                capacity: Default::default(),
                overhead: Default::default(),
                offerings: vec![
                    offering("us-east-1a", "spot"),
                    offering("us-east-1a", "on-demand"),
                    offering("us-east-1b", "spot"),
                ],
            },
        }
    }

    fn error(zone: &str, at: i64, until: i64) -> Fact {
        Fact::CapacityError {
            offering: OfferingKey::new("m5.large", zone, "spot"),
            at_ms: at,
            until_ms: until,
        }
    }

    #[test]
    fn an_offering_is_unavailable_while_its_capacity_error_is_in_force() {
        let mut e = engine();
        let d = e
            .advance(1_000, vec![(m5(), 1), (error("us-east-1a", 0, 180_000), 1)])
            .expect("advance");
        assert_eq!(d, vec![(Decision::LowerBound(Price(1)), 1)]);
        // A second pool errs; the first's window is still open.
        let d = e
            .advance(60_000, vec![(error("us-east-1b", 59_000, 239_000), 1)])
            .expect("advance");
        assert_eq!(
            d,
            vec![
                (Decision::LowerBound(Price(1)), -1),
                (Decision::LowerBound(Price(2)), 1)
            ]
        );
        // At 180 s the first pool is offered again, by the engine's clock alone.
        let d = e.advance(180_001, vec![]).expect("advance");
        assert_eq!(
            d,
            vec![
                (Decision::LowerBound(Price(1)), 1),
                (Decision::LowerBound(Price(2)), -1)
            ]
        );
        let d = e.advance(300_000, vec![]).expect("advance");
        assert_eq!(d, vec![(Decision::LowerBound(Price(1)), -1)]);
    }
}
