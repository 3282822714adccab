//! Existing nodes in chunks: the solver fills existing nodes first-fit in name order before it
//! opens any NodeClaim, so that part runs chunk by chunk over the node list, each chunk taking
//! what the ones before it left, stopping once every pod has a place.

use dovetail_dataflow::stable_hash::stable_hash;

/// Average nodes per chunk of an existing-node run.
pub(super) const CHUNK: u64 = 32;

/// A run of consecutive destinations. A chunk ends at a node whose name's hash says so (about
/// one in [`CHUNK`]), so that a node joining or leaving moves one boundary, not every later one.
pub(super) struct Chunk {
    /// Destination indices `start..end`.
    pub(super) start: usize,
    pub(super) end: usize,
    /// A hash of every destination's fingerprint up to the end of this chunk.
    pub(super) prefix: u64,
}

/// Whether a chunk ends at the node of this name (about one in [`CHUNK`]).
pub fn ends_chunk(name: &str) -> bool {
    stable_hash(name).is_multiple_of(CHUNK)
}

/// Cuts the destinations into chunks, given where they may end ([`ends_chunk`]).
pub(super) fn chunks(ends: &[bool], fingerprints: &[u64]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prefix = 0u64;
    for (i, &end) in ends.iter().enumerate() {
        if !(end || i + 1 == ends.len()) {
            continue;
        }
        prefix = stable_hash(&(prefix, &fingerprints[start..=i]));
        out.push(Chunk {
            start,
            end: i + 1,
            prefix,
        });
        start = i + 1;
    }
    out
}
