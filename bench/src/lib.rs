//! dovetail's benchmarks: Karpenter's scheduling-benchmark mix run through the engine, cold and
//! incrementally, against from-scratch recomputation.

pub mod churn;
pub mod churn_chart;
pub mod disruption;
pub mod measure;
pub mod packing;
pub mod plan_cluster;
pub mod processes;
pub mod report;
pub mod workload;

/// The `dovetail` binary a bench runs: `given`, or the one beside the bench's own binary.
pub fn dovetail_binary(given: Option<&std::path::Path>) -> anyhow::Result<std::path::PathBuf> {
    let dovetail = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("dovetail"),
    };
    if !dovetail.exists() {
        anyhow::bail!(
            "{} not found: build it (`cargo build --release --workspace`) or pass --dovetail",
            dovetail.display()
        );
    }
    Ok(dovetail)
}
