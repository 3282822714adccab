//! Each NodePool type's cheapest offering under an offering filter, looked up once and kept.
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

    /// The filter this was made for.
    pub fn filter(&self) -> &'c OfferingFilter<'c> {
        self.filter
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
