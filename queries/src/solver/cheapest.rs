//! Each NodePool type's cheapest offering under an offering filter, and the zones and
//! capacity types of the offerings the filter admits, looked up once and kept.
//!
//! Opening a NodeClaim prices every type that fits it (to choose its fill type, see `shape`),
//! and launching one prices its candidate types again. A run opens many NodeClaims under the
//! same few filters (a NodePool's requirements, perhaps narrowed to a zone), and a disruption
//! evaluation runs the solver many times over the same NodePools: without this, every opening
//! walked every offering of every fitting type again (a sixth of the time of the minute's
//! consolidation evaluations at 100k pods).

use crate::types::PoolTypes;
use dovetail_dataflow::model::instance_type::{OfferingFilter, OfferingKey};
use dovetail_dataflow::model::Offering;
use std::cell::RefCell;

/// Not looked up yet.
const UNKNOWN: u32 = u32::MAX;
/// Looked up: no available offering passes the filter.
const NONE: u32 = u32::MAX - 1;

/// The cheapest offerings found so far, per NodePool and filter. A NodePool is known by the
/// address of its [`PoolTypes`], so whoever keeps one of these must keep every `PoolTypes` it
/// is asked about alive and unchanged while it lives (a solver run, or a disruption evaluation
/// whose runs all borrow the same NodePools).
#[derive(Default)]
pub struct CheapestOfferings {
    tables: RefCell<Vec<Table>>,
}

struct Table {
    pool: *const PoolTypes,
    filter: OfferingKey,
    /// Per type index: the index of its cheapest offering, or `UNKNOWN` / `NONE`.
    cheapest: Vec<u32>,
    /// Per type index, once looked up: the zones (low bits, indices into `zones`) and capacity
    /// types (from bit `CAPACITY_BIT`) of its available offerings the filter admits; `None`
    /// inside when the table ran out of bits (then a launch gathers them itself).
    places: Vec<Option<Option<u64>>>,
    zones: Vec<String>,
    capacity_types: Vec<String>,
}

/// Where the capacity types start in a [`Table`]'s place masks.
const CAPACITY_BIT: usize = 48;

impl Table {
    fn intern(names: &mut Vec<String>, name: &str, room: usize) -> Option<usize> {
        match names.iter().position(|n| n == name) {
            Some(i) => Some(i),
            None if names.len() < room => {
                names.push(name.to_string());
                Some(names.len() - 1)
            }
            None => None,
        }
    }

    /// The place mask of type `t` (see `places`).
    fn places_of(
        &mut self,
        pool: &PoolTypes,
        filter: &OfferingFilter<'_>,
        t: usize,
    ) -> Option<u64> {
        if let Some(known) = self.places.get(t).copied().flatten() {
            return known;
        }
        let mut mask = Some(0u64);
        for o in pool.types.get(t)?.instance_type.offerings.iter() {
            if !(o.available && filter.allows(o)) {
                continue;
            }
            let zone = Self::intern(&mut self.zones, &o.zone, CAPACITY_BIT);
            let capacity = Self::intern(
                &mut self.capacity_types,
                &o.capacity_type,
                64 - CAPACITY_BIT,
            );
            mask = match (mask, zone, capacity) {
                (Some(m), Some(z), Some(c)) => Some(m | 1 << z | 1 << (CAPACITY_BIT + c)),
                _ => None,
            };
        }
        if let Some(slot) = self.places.get_mut(t) {
            *slot = Some(mask);
        }
        mask
    }
}

impl CheapestOfferings {
    /// The cheapest offerings of `pool`'s types that `filter` admits.
    pub fn under<'c>(
        &'c self,
        pool: &'c PoolTypes,
        filter: &'c OfferingFilter<'c>,
    ) -> Cheapest<'c> {
        let address = pool as *const PoolTypes;
        let mut tables = self.tables.borrow_mut();
        let table = match tables
            .iter()
            .position(|t| t.pool == address && filter.is(&t.filter))
        {
            Some(at) => at,
            None => {
                tables.push(Table {
                    pool: address,
                    filter: filter.key(),
                    cheapest: vec![UNKNOWN; pool.types.len()],
                    places: vec![None; pool.types.len()],
                    zones: Vec::new(),
                    capacity_types: Vec::new(),
                });
                tables.len() - 1
            }
        };
        Cheapest {
            cache: self,
            pool,
            table,
            filter,
        }
    }
}

/// One NodePool's types under one filter (see [`CheapestOfferings::under`]).
pub struct Cheapest<'c> {
    cache: &'c CheapestOfferings,
    pool: &'c PoolTypes,
    table: usize,
    filter: &'c OfferingFilter<'c>,
}

impl<'c> Cheapest<'c> {
    /// The NodePool this was made for.
    pub fn pool(&self) -> &'c PoolTypes {
        self.pool
    }

    /// Type `t`'s cheapest available offering the filter admits.
    pub fn of(&self, t: u32) -> Option<&'c Offering> {
        let pool = self.pool;
        let offerings = &pool.types.get(t as usize)?.instance_type.offerings;
        let mut tables = self.cache.tables.borrow_mut();
        let slot = tables.get_mut(self.table)?.cheapest.get_mut(t as usize)?;
        if *slot == UNKNOWN {
            *slot = pool.types[t as usize]
                .instance_type
                .cheapest_offering_in(self.filter)
                .and_then(|o| offerings.iter().position(|x| std::ptr::eq(x, o)))
                .map_or(NONE, |i| i as u32);
        }
        match *slot {
            NONE => None,
            i => offerings.get(i as usize),
        }
    }

    /// The zones and the capacity types, each sorted, of the available offerings of `types`
    /// that the filter admits: where a launch of them may land. Sixty types of a dozen
    /// offerings each name the same few zones, so each type's are looked up once.
    pub fn places(&self, types: impl Iterator<Item = u32> + Clone) -> (Vec<String>, Vec<String>) {
        let mut tables = self.cache.tables.borrow_mut();
        let Some(table) = tables.get_mut(self.table) else {
            return (Vec::new(), Vec::new());
        };
        let mut mask = Some(0u64);
        for t in types.clone() {
            mask = mask
                .zip(table.places_of(self.pool, self.filter, t as usize))
                .map(|(a, b)| a | b);
        }
        let (zones, capacity_types): (
            std::collections::BTreeSet<&str>,
            std::collections::BTreeSet<&str>,
        ) = match mask {
            Some(mask) => (
                bits(mask, 0, &table.zones).collect(),
                bits(mask, CAPACITY_BIT, &table.capacity_types).collect(),
            ),
            // More zones than bits: gathered the long way.
            None => {
                let admitted = || {
                    types.clone().flat_map(|t| {
                        self.pool
                            .types
                            .get(t as usize)
                            .into_iter()
                            .flat_map(|pt| pt.instance_type.offerings.iter())
                            .filter(|o| o.available && self.filter.allows(o))
                    })
                };
                (
                    admitted().map(|o| o.zone.as_str()).collect(),
                    admitted().map(|o| o.capacity_type.as_str()).collect(),
                )
            }
        };
        (
            zones.into_iter().map(str::to_string).collect(),
            capacity_types.into_iter().map(str::to_string).collect(),
        )
    }
}

/// The names of the bits of `mask` from `from` on, one per name in `names`.
fn bits(mask: u64, from: usize, names: &[String]) -> impl Iterator<Item = &str> {
    names
        .iter()
        .enumerate()
        .filter(move |(i, _)| mask & 1 << (from + i) != 0)
        .map(|(_, n)| n.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PoolType;
    use dovetail_dataflow::model::labels::ZONE;
    use dovetail_dataflow::model::{
        InstanceType, NodePool, Price, Requirement, Requirements, Resources,
    };
    use std::sync::Arc;

    fn offering(zone: &str, price: i64, available: bool) -> Offering {
        Offering {
            zone: zone.into(),
            zone_id: String::new(),
            capacity_type: "on-demand".into(),
            price: Price(price),
            available,
        }
    }

    fn pool(offerings: Vec<Vec<Offering>>) -> PoolTypes {
        PoolTypes {
            nodepool: NodePool::default(),
            types: offerings
                .into_iter()
                .enumerate()
                .map(|(i, offerings)| PoolType {
                    instance_type: Arc::new(InstanceType {
                        name: format!("t{i}"),
                        requirements: Requirements::new(),
                        capacity: Resources::default(),
                        overhead: Resources::default(),
                        offerings,
                    }),
                    available: Resources::default(),
                })
                .collect(),
            not_ready: None,
        }
    }

    fn in_zone(zone: &str) -> Requirements {
        let mut r = Requirements::new();
        r.add(ZONE, Requirement::single(zone));
        r
    }

    #[test]
    fn gives_what_the_type_itself_gives_under_each_filter() {
        let p = pool(vec![
            vec![offering("a", 5, true), offering("b", 3, true)],
            vec![offering("a", 2, false), offering("b", 4, true)],
            vec![offering("a", 1, true)],
        ]);
        let cache = CheapestOfferings::default();
        for reqs in [Requirements::new(), in_zone("a"), in_zone("b")] {
            let filter = OfferingFilter::new(&reqs);
            // Asked twice: the second answer comes from the table.
            for _ in 0..2 {
                let cheapest = cache.under(&p, &filter);
                for t in 0..4u32 {
                    let direct = p
                        .types
                        .get(t as usize)
                        .and_then(|pt| pt.instance_type.cheapest_offering_in(&filter));
                    assert_eq!(cheapest.of(t), direct, "type {t}");
                }
            }
        }
        assert_eq!(cache.tables.borrow().len(), 3, "one table per filter");
        let a = in_zone("a");
        let filter = OfferingFilter::new(&a);
        assert_eq!(cache.under(&p, &filter).of(1), None);
        assert_eq!(
            cache.under(&p, &filter).of(0).map(|o| o.price),
            Some(Price(5))
        );
    }

    /// A launch's zones and capacity types are those of its types' admitted, available
    /// offerings, whether the table's bits hold them all or not.
    #[test]
    fn places_are_the_admitted_offerings_zones_and_capacity_types() {
        let mut spot = offering("c", 1, true);
        spot.capacity_type = "spot".into();
        let p = pool(vec![
            vec![offering("a", 5, true), offering("b", 3, false)],
            vec![offering("b", 4, true), spot],
            vec![offering("d", 1, true)],
        ]);
        let cache = CheapestOfferings::default();
        let reqs = Requirements::new();
        let filter = OfferingFilter::new(&reqs);
        let cheapest = cache.under(&p, &filter);
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cheapest.places([0u32, 1].into_iter()),
            (strings(&["a", "b", "c"]), strings(&["on-demand", "spot"]))
        );
        let b = in_zone("b");
        let only_b = OfferingFilter::new(&b);
        assert_eq!(
            cache.under(&p, &only_b).places([0u32, 1, 2].into_iter()),
            (strings(&["b"]), strings(&["on-demand"]))
        );
        // Past the bits a table has for zones, the long way gives the same answer.
        let many: Vec<Vec<Offering>> = (0..CAPACITY_BIT + 2)
            .map(|z| vec![offering(&format!("z{z:02}"), 1, true)])
            .collect();
        let wide = pool(many);
        let all: Vec<u32> = (0..wide.types.len() as u32).collect();
        let (zones, capacity) = cache.under(&wide, &filter).places(all.iter().copied());
        let expected: Vec<String> = (0..CAPACITY_BIT + 2).map(|z| format!("z{z:02}")).collect();
        assert_eq!((zones, capacity), (expected, strings(&["on-demand"])));
    }

    #[test]
    fn keeps_nodepools_apart() {
        let cheap = pool(vec![vec![offering("a", 1, true)]]);
        let dear = pool(vec![vec![offering("a", 9, true)]]);
        let cache = CheapestOfferings::default();
        let reqs = Requirements::new();
        let filter = OfferingFilter::new(&reqs);
        assert_eq!(
            cache.under(&cheap, &filter).of(0).map(|o| o.price),
            Some(Price(1))
        );
        assert_eq!(
            cache.under(&dear, &filter).of(0).map(|o| o.price),
            Some(Price(9))
        );
    }
}
