//! Which instance type a new NodeClaim is filled up to.
//!
//! Plain first-fit decreasing lets a planned NodeClaim take pods until its largest candidate
//! type is full, so the first NodeClaims grow to whatever family is largest and the pods' mix of
//! CPU and memory decides nothing. Here a NodeClaim being opened is given a *fill type*: of the
//! types that hold the class being placed, the one that would run the pods still to place (of
//! every class that may use the NodePool) most cheaply if they were all put on copies of it —
//! its price times the copies that demand needs, rounded up — with fewer copies, then larger
//! types, first among equals. Pods then go into the NodeClaim only up to that type's room, and
//! it launches the cheapest type that holds what it got (which may be smaller than the fill
//! type: the last NodeClaims are right-sized). With much demand left this picks the family whose
//! CPU:memory ratio suits the mix best; with little left, the smallest type that holds it.

use super::cheapest::Cheapest;
use crate::types::PoolType;
use dovetail_dataflow::model::Resources;

/// How many copies of `available` the demand needs, as a fraction (resources the type lacks
/// are left out: those pods cannot use it, and another NodeClaim takes them).
fn copies_needed(demand: &Resources, available: &Resources) -> f64 {
    demand
        .iter()
        .filter(|(_, need)| *need > 0)
        .filter_map(|(r, need)| {
            let have = available.get(r);
            (have > 0).then(|| need as f64 / have as f64)
        })
        .fold(0.0, f64::max)
}

/// Of `fits` (type index, copies of the class it holds), the fill type for a NodeClaim opened
/// while `demand` is still to place, with the copies it holds (`cheapest`: the NodePool's
/// types under the NodeClaim's offering filter).
pub fn fill_type(
    fits: &[(u32, i64)],
    types: &[PoolType],
    demand: &Resources,
    cheapest: &Cheapest<'_>,
) -> Option<(u32, i64)> {
    let mut best: Option<Candidate> = None;
    for &(t, k) in fits {
        let Some(pt) = types.get(t as usize) else {
            continue;
        };
        let Some(offering) = cheapest.of(t) else {
            continue;
        };
        let needed = copies_needed(demand, &pt.available).ceil().max(1.0);
        let c = Candidate {
            cost: offering.price.0 as f64 * needed,
            needed,
            room: (pt.available.cpu, pt.available.memory),
            t,
            k,
        };
        // Among equals, fewer NodeClaims, then the larger type (more room for what comes).
        let better = best.as_ref().is_none_or(|b| {
            (c.cost, c.needed) < (b.cost, b.needed)
                || (c.cost == b.cost
                    && c.needed == b.needed
                    && (c.room, std::cmp::Reverse(c.t)) > (b.room, std::cmp::Reverse(b.t)))
        });
        if better {
            best = Some(c);
        }
    }
    best.map(|c| (c.t, c.k))
}

/// A type considered as a fill type.
struct Candidate {
    /// Its price times the copies of it the demand needs.
    cost: f64,
    needed: f64,
    /// Its room (CPU, memory).
    room: (i64, i64),
    t: u32,
    /// Copies of the class being placed it holds.
    k: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(cpu: i64, memory: i64) -> Resources {
        Resources {
            cpu,
            memory,
            ..Resources::default()
        }
    }

    #[test]
    fn a_mix_short_of_memory_needs_copies_by_its_cpu() {
        assert_eq!(copies_needed(&res(8000, 8), &res(4000, 16)), 2.0);
        assert_eq!(copies_needed(&res(1000, 64), &res(4000, 16)), 4.0);
    }

    #[test]
    fn resources_the_type_lacks_do_not_count() {
        let mut demand = res(2000, 2);
        demand.extended.insert("nvidia.com/gpu".into(), 4000);
        assert_eq!(copies_needed(&demand, &res(4000, 4)), 0.5);
    }
}
