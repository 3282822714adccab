//! The disruption benchmark: a large cluster of managed nodes with bound pods, evaluated cold,
//! then single changes (a pod deleted, a node added, a price changed) applied incrementally and
//! compared with a from-scratch evaluation in the same run.

pub mod cluster;
pub mod measure;
pub mod report;
