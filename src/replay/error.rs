//! Why a replay stopped.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("simulated cloud: {0}")]
    Cloud(String),
    #[error("engine: {0}")]
    Engine(#[from] dovetail_dataflow::engine::EngineError),
    #[error("trace line {line}: t={t} is past the trace horizon of {horizon} ms (10 years)")]
    PastHorizon { line: u64, t: u64, horizon: u64 },
    #[error("catalogue: {0}")]
    Catalog(#[from] dovetail_dataflow::catalog::CatalogError),
}
