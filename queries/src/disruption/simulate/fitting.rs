//! Per class, the destinations with room for one of its pods, found once per evaluation and
//! only as far down the node list as some walk reads.
//!
//! An existing-node walk keeps only the nodes that could take a pod still to place. Finding
//! them node by node in every walk made a candidate's check cost the whole cluster when its
//! pods fit almost nowhere: on the compressed DLRM trace (3,300 nodes, pods of 48–96 CPUs) that
//! node-by-node test was half of the engine's time. A class's list is shared by every walk of
//! the evaluation, and a walk jumps from one listed node to the next.

use dovetail_dataflow::model::Resources;

/// One class's destinations with room for one of its pods, known for positions below
/// `scanned`.
#[derive(Default)]
pub(super) struct Fitting {
    scanned: usize,
    at: Vec<usize>,
}

impl Fitting {
    /// Extends the list to cover positions below `end`.
    fn scan_to(&mut self, request: &Resources, free: &[Resources], end: usize) {
        let end = end.min(free.len());
        while self.scanned < end {
            if request.fits_in(&free[self.scanned]) {
                self.at.push(self.scanned);
            }
            self.scanned += 1;
        }
    }

    /// The first position at or after `from` with room for one pod.
    pub(super) fn next(
        &mut self,
        request: &Resources,
        free: &[Resources],
        from: usize,
    ) -> Option<usize> {
        loop {
            let k = self.at.partition_point(|&i| i < from);
            if let Some(&i) = self.at.get(k) {
                return Some(i);
            }
            if self.scanned >= free.len() {
                return None;
            }
            // Scan on from where the list stops (at least to `from`), a few nodes at a time.
            let step = self.scanned.max(from) + 64;
            self.scan_to(request, free, step);
        }
    }

    /// Appends the positions in `start..end` with room for one pod to `out`.
    pub(super) fn within(
        &mut self,
        request: &Resources,
        free: &[Resources],
        start: usize,
        end: usize,
        out: &mut Vec<usize>,
    ) {
        self.scan_to(request, free, end);
        let from = self.at.partition_point(|&i| i < start);
        let to = self.at.partition_point(|&i| i < end);
        out.extend_from_slice(&self.at[from..to]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(cpu: i64) -> Resources {
        Resources {
            cpu,
            memory: 1 << 30,
            pods: 110_000,
            ..Resources::default()
        }
    }

    #[test]
    fn lists_the_nodes_with_room_as_far_as_asked() {
        // Every seventh node has room for a 2-CPU pod; the others have 1 CPU free.
        let free: Vec<Resources> = (0..500)
            .map(|i| room(if i % 7 == 3 { 4_000 } else { 1_000 }))
            .collect();
        let request = room(2_000);
        let expected: Vec<usize> = (0..500).filter(|i| i % 7 == 3).collect();
        let mut f = Fitting::default();
        assert_eq!(f.next(&request, &free, 0), Some(3));
        // The list is read no further than the first answer needs.
        assert!(f.scanned < 100, "scanned {}", f.scanned);
        assert_eq!(f.next(&request, &free, 4), Some(10));
        assert_eq!(f.next(&request, &free, 497), None);
        let mut out = Vec::new();
        f.within(&request, &free, 100, 200, &mut out);
        let want: Vec<usize> = expected
            .iter()
            .copied()
            .filter(|&i| (100..200).contains(&i))
            .collect();
        assert_eq!(out, want);
        // Asked out of order, the answers are the same as a fresh scan's.
        let mut fresh = Fitting::default();
        let mut all = Vec::new();
        fresh.within(&request, &free, 0, 500, &mut all);
        assert_eq!(all, expected);
        assert_eq!(f.at, expected);
        // A pod with room nowhere finds nothing, past the end too.
        let mut none = Fitting::default();
        assert_eq!(none.next(&room(8_000), &free, 0), None);
        assert_eq!(none.next(&room(8_000), &free, 900), None);
    }
}
