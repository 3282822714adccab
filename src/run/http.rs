//! The controller's HTTP endpoints, as Karpenter serves them: Prometheus metrics on
//! `--metrics-port` (`/metrics`) and the kubelet's probes on `--health-probe-port` (`/healthz`:
//! the control loop has turned within the last 30 s; `/readyz`: the watches' first lists are in).
//! The loop publishes a rendered snapshot each turn; serving never touches the loop's state.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long the loop may go without turning before `/healthz` fails.
const ALIVE_WITHIN_MS: i64 = 30_000;

/// What the endpoints serve, written by the loop.
#[derive(Clone, Default)]
pub(crate) struct Published {
    metrics: Arc<Mutex<String>>,
    ready: Arc<AtomicBool>,
    last_turn_ms: Arc<AtomicI64>,
}

impl Published {
    pub(crate) fn metrics(&self, text: String) {
        *self.metrics.lock().unwrap_or_else(|p| p.into_inner()) = text;
    }

    pub(crate) fn ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub(crate) fn turned(&self, now_ms: i64) {
        self.last_turn_ms.store(now_ms, Ordering::Release);
    }

    fn answer(&self, path: &str, now_ms: i64) -> (&'static str, String) {
        match path {
            "/metrics" => (
                "200 OK",
                self.metrics
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
            "/healthz" => {
                let last = self.last_turn_ms.load(Ordering::Acquire);
                if last > 0 && now_ms.saturating_sub(last) <= ALIVE_WITHIN_MS {
                    ("200 OK", "ok\n".into())
                } else {
                    (
                        "503 Service Unavailable",
                        "the control loop is stuck\n".into(),
                    )
                }
            }
            "/readyz" if self.ready.load(Ordering::Acquire) => ("200 OK", "ok\n".into()),
            "/readyz" => (
                "503 Service Unavailable",
                "waiting for the watches' first lists\n".into(),
            ),
            _ => ("404 Not Found", "not found\n".into()),
        }
    }
}

/// Serves `published` on `0.0.0.0:port` (nothing for port 0). A port that cannot be bound is
/// an error: the kubelet's probes would fail anyway.
pub(crate) fn serve(
    runtime: &tokio::runtime::Runtime,
    port: u16,
    published: Published,
) -> anyhow::Result<()> {
    if port == 0 {
        return Ok(());
    }
    let listener = runtime
        .block_on(TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| anyhow::anyhow!("listening on port {port}: {e}"))?;
    runtime.spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let published = published.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut read = 0;
                while read < buf.len() {
                    match stream.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let head = String::from_utf8_lossy(&buf[..read]);
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .to_string();
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                let (status, body) = published.answer(&path, now_ms);
                let content_type = if path == "/metrics" {
                    "text/plain; version=0.0.4"
                } else {
                    "text/plain"
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_say_what_the_loop_published() {
        let p = Published::default();
        assert_eq!(p.answer("/readyz", 1_000).0, "503 Service Unavailable");
        assert_eq!(p.answer("/healthz", 1_000).0, "503 Service Unavailable");
        p.ready();
        p.turned(1_000);
        p.metrics("dovetail_up 1\n".into());
        assert_eq!(p.answer("/readyz", 1_000).0, "200 OK");
        assert_eq!(p.answer("/healthz", 20_000).0, "200 OK");
        assert_eq!(p.answer("/healthz", 40_000).0, "503 Service Unavailable");
        assert_eq!(p.answer("/metrics", 0).1, "dovetail_up 1\n");
        assert_eq!(p.answer("/nope", 0).0, "404 Not Found");
    }
}
