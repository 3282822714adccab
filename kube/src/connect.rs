//! Where the API server is: a kubeconfig file named on the command line, else what kube-rs
//! infers (`KUBECONFIG` / `~/.kube/config`, then the in-cluster service account).

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("finding the API server (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("connecting to the API server: {0}")]
    Client(#[from] kube::Error),
}

/// The User-Agent of every request: what an API server's audit log names the controller by.
pub const USER_AGENT: &str = concat!("dovetail/", env!("CARGO_PKG_VERSION"));

/// The client configuration for `kubeconfig`, or the inferred one.
pub async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, ConnectError> {
    let mut config = located(kubeconfig).await?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

async fn located(kubeconfig: Option<&Path>) -> Result<kube::Config, ConnectError> {
    match kubeconfig {
        Some(path) => {
            let err = |source| ConnectError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(err)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(err)
        }
        None => Ok(kube::Config::infer().await?),
    }
}
