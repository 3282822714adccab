//! The nodes an evaluation's earlier commands took, indexed as they grow, and what one
//! simulation leaves out.

use rustc_hash::FxHashSet as HashSet;
use std::collections::BTreeSet;

/// The nodes earlier commands of an evaluation disrupt or fill, left out of every later
/// simulation of it. It grows one command at a time while thousands of candidates are checked
/// against it, so it is indexed as it grows ([`World::take`]), not rebuilt per check.
///
/// Every candidate asks whether it is taken, so the names are hashed, not ordered, and the keys
/// naming the sets are sums of their names' hashes, which need no order. What each of these cost
/// before: `docs/disruption-profiling.md`.
#[derive(Debug, Default)]
pub struct Taken {
    pub(super) names: HashSet<String>,
    /// The [`stable_hash`]es of `names`: most candidates are not taken, and asking by a hash
    /// kept with the candidate spares reading its name.
    pub(super) hashes: HashSet<u64>,
    /// Their positions among the destinations of the evaluation's [`World`].
    pub(super) gone: BTreeSet<usize>,
    /// `gone` in order, each with the sum of [`mix`] over it and every earlier one: every
    /// check asks for the sum below its end.
    pub(super) gone_sums: Vec<(usize, u64)>,
    /// Those whose allocatable counts against a NodePool limit.
    pub(super) limited: HashSet<String>,
    /// Hashes naming `names` and `limited`.
    pub(super) key: u64,
    pub(super) limited_key: u64,
}

impl Taken {
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// [`Taken::contains`] given the name's [`stable_hash`] too.
    pub fn contains_hashed(&self, name: &str, hash: u64) -> bool {
        self.hashes.contains(&hash) && self.names.contains(name)
    }
}

/// SplitMix64's finaliser: a cheap, well-mixed hash of a position (checks hash every taken
/// position before the end of what they read, thousands of times per evaluation).
pub(super) fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hash of the removed destinations before position `end`, taken and own (which never
/// overlap): a sum of one hash per position, so the parts add up in any order.
pub(super) fn removed_before(taken: &Taken, own: impl Iterator<Item = usize>, end: usize) -> u64 {
    let below = taken.gone_sums.partition_point(|&(i, _)| i < end);
    let taken_sum = below
        .checked_sub(1)
        .and_then(|k| taken.gone_sums.get(k))
        .map_or(0, |&(_, sum)| sum);
    own.filter(|&i| i < end)
        .fold(taken_sum, |h, i| h.wrapping_add(mix(i as u64)))
}

/// What one simulation leaves out: the evaluation's taken nodes and the check's own.
pub(super) struct Removed<'r> {
    pub(super) taken: &'r Taken,
    /// The check's own nodes that are not taken already, in name order.
    pub(super) own: Vec<&'r str>,
    /// Their destination positions.
    pub(super) own_gone: Vec<usize>,
}

impl Removed<'_> {
    pub(super) fn contains(&self, name: &str) -> bool {
        self.taken.contains(name) || self.own.contains(&name)
    }

    pub(super) fn contains_index(&self, i: usize) -> bool {
        self.taken.gone.contains(&i) || self.own_gone.contains(&i)
    }

    pub(super) fn hash_before(&self, end: usize) -> u64 {
        removed_before(self.taken, self.own_gone.iter().copied(), end)
    }
}
