//! The controller's HTTP endpoints, as Karpenter serves them: Prometheus metrics on
//! `--metrics-port` (`/metrics`) and the kubelet's probes on `--health-probe-port` (`/healthz`:
//! the control loop has turned within the last 30 s; `/readyz`: the watches' first lists are in).
//! With `--explain`, `/explain/...` on the metrics port (see `explain.rs`).
//! The loop publishes a rendered snapshot each turn; serving never touches the loop's state.

use super::explain::{Answer, Explained};
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
    pub(crate) explained: Explained,
}

/// What the server reads of a request.
#[derive(Debug, PartialEq)]
struct Request {
    path: String,
    /// `?o=json` (or `output=json`), or `Accept: application/json`.
    json: bool,
}

impl Request {
    fn parse(head: &str) -> Request {
        let target = head.split_whitespace().nth(1).unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let asked = query
            .split('&')
            .any(|kv| matches!(kv, "o=json" | "output=json"));
        let accepts = head.lines().skip(1).any(|line| {
            line.split_once(':').is_some_and(|(name, value)| {
                name.trim().eq_ignore_ascii_case("accept") && value.contains("application/json")
            })
        });
        Request {
            path: path.to_string(),
            json: asked || accepts,
        }
    }
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

    fn answer(&self, request: &Request, now_ms: i64) -> Answer {
        let plain = |status, body: &str| Answer {
            status,
            content_type: "text/plain",
            body: body.to_string(),
        };
        match request.path.as_str() {
            "/metrics" => Answer {
                status: "200 OK",
                content_type: "text/plain; version=0.0.4",
                body: self
                    .metrics
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            },
            "/healthz" => {
                let last = self.last_turn_ms.load(Ordering::Acquire);
                if last > 0 && now_ms.saturating_sub(last) <= ALIVE_WITHIN_MS {
                    plain("200 OK", "ok\n")
                } else {
                    plain("503 Service Unavailable", "the control loop is stuck\n")
                }
            }
            "/readyz" if self.ready.load(Ordering::Acquire) => plain("200 OK", "ok\n"),
            "/readyz" => plain(
                "503 Service Unavailable",
                "waiting for the watches' first lists\n",
            ),
            path if path.starts_with("/explain/") => {
                self.explained.answer(path, request.json, now_ms)
            }
            _ => plain("404 Not Found", "not found\n"),
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
                let request = Request::parse(&head);
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                // Rendering an explanation is the costliest answer: off the async workers.
                let Ok(Answer {
                    status,
                    content_type,
                    body,
                }) = tokio::task::spawn_blocking(move || published.answer(&request, now_ms)).await
                else {
                    return;
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

    fn get(path: &str) -> Request {
        Request::parse(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
    }

    #[test]
    fn probes_say_what_the_loop_published() {
        let p = Published::default();
        let status = |path: &str, now_ms| p.answer(&get(path), now_ms).status;
        assert_eq!(status("/readyz", 1_000), "503 Service Unavailable");
        assert_eq!(status("/healthz", 1_000), "503 Service Unavailable");
        p.ready();
        p.turned(1_000);
        p.metrics("dovetail_up 1\n".into());
        assert_eq!(status("/readyz", 1_000), "200 OK");
        assert_eq!(status("/healthz", 20_000), "200 OK");
        assert_eq!(status("/healthz", 40_000), "503 Service Unavailable");
        assert_eq!(p.answer(&get("/metrics"), 0).body, "dovetail_up 1\n");
        assert_eq!(status("/nope", 0), "404 Not Found");
        assert_eq!(status("/explain/node/n1", 0), "503 Service Unavailable");
    }

    #[test]
    fn json_is_asked_by_query_or_accept_header() {
        assert_eq!(
            get("/explain/pod/team/web?o=json"),
            Request {
                path: "/explain/pod/team/web".into(),
                json: true
            }
        );
        assert!(!get("/explain/pod/team/web").json);
        assert!(!get("/explain/pod/team/web?o=text").json);
        let r = Request::parse(
            "GET /explain/node/n1 HTTP/1.1\r\nHost: x\r\nACCEPT: application/json\r\n\r\n",
        );
        assert!(r.json);
        assert_eq!(r.path, "/explain/node/n1");
    }
}
