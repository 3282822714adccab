//! `dovetail-bench-packing`: packing cost on real pod sizes, dovetail against a Karpenter-style
//! first-fit decreasing and a fixed bound (issue 20). See `bench/README.md`.

use anyhow::Result;
use clap::Parser;
use dovetail_bench::packing::{measure, workload, PackingRow};
use std::path::PathBuf;

#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Packing cost on real pod sizes: dovetail vs Karpenter-style FFD vs a bound")]
struct Args {
    /// The openb pod list (Alibaba cluster-trace-gpu-v2023).
    #[arg(
        long,
        default_value = "../shared/data/traces/alibaba_openb_pod_list_default.csv"
    )]
    openb: PathBuf,
    /// Where to write `results.json` and `table.md`.
    #[arg(long, default_value = "bench/results/packing")]
    out: PathBuf,
}

fn table(rows: &[PackingRow]) -> String {
    let mut s = String::from(
        "| workload | pods | dovetail $/h | Karpenter-style FFD $/h | bound $/h | dovetail / bound | FFD / bound | dovetail / FFD | NodeClaims (dovetail, FFD) | dovetail's own bound $/h |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | **{:.3}** | {:.3} | {:.3} | {}, {} | {:.2} |\n",
            r.workload,
            r.pods,
            r.dovetail_cost,
            r.karpenter_ffd_cost,
            r.bound,
            r.dovetail_vs_bound,
            r.karpenter_ffd_vs_bound,
            r.dovetail_vs_karpenter_ffd,
            r.dovetail_nodeclaims,
            r.karpenter_ffd_nodeclaims,
            r.dovetail_bound,
        ));
    }
    s
}

fn main() -> Result<()> {
    let args = Args::parse();
    let pods = workload::read_openb(&args.openb)?;
    let cpu: Vec<_> = pods.iter().filter(|p| p.gpus == 0).copied().collect();
    let manifests = |pods: &[workload::OpenbPod], pools: Vec<serde_json::Value>| {
        let mut objects = pools;
        objects.push(workload::nodeclass());
        objects.extend(
            pods.iter()
                .enumerate()
                .map(|(i, p)| workload::pod_manifest(i, p)),
        );
        objects
    };
    let mut rows = Vec::new();
    for (name, objects) in [
        (
            "openb CPU pods, getting-started NodePool",
            manifests(&cpu, workload::getting_started_pools()),
        ),
        (
            "openb CPU + whole-GPU pods, spot / arm64 / on-demand / GPU NodePools",
            manifests(&pods, workload::several_pools()),
        ),
    ] {
        eprintln!("dovetail-bench-packing: {name} ...");
        let row = measure(name, objects)?;
        eprintln!(
            "  dovetail {:.2} $/h ({:.3} x bound), Karpenter-style FFD {:.2} $/h ({:.3} x bound), {:.1} s",
            row.dovetail_cost, row.dovetail_vs_bound, row.karpenter_ffd_cost, row.karpenter_ffd_vs_bound, row.dovetail_seconds
        );
        rows.push(row);
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    let t = table(&rows);
    std::fs::write(args.out.join("table.md"), &t)?;
    print!("{t}");
    Ok(())
}
