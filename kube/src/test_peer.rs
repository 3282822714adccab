//! The Kubernetes API server tests talk to: kmock (PyPI `kmock`, pinned in
//! `tests/peer/requirements.txt`) behind `tests/peer/kube_peer.py`, which adds what a kube-rs
//! controller depends on (resourceVersion, selectors, watch resume and 410 Gone, 409 on stale
//! writes, the status subresource, finalizers, Eviction under PodDisruptionBudgets). Each test
//! starts its own on an ephemeral port of 127.0.0.1; it stops when the test drops it (the peer
//! exits when its stdin closes, also if the test process dies). Nothing in the product calls it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

pub struct KubePeer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
}

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peer/kube_peer.py")
}

impl KubePeer {
    /// Starts a peer and waits until it listens.
    pub fn start() -> KubePeer {
        let python = std::env::var("DOVETAIL_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let mut child = Command::new(&python)
            .arg(peer_script())
            .args(["--bookmark-interval", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {python} {}: {e}", peer_script().display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the peer's PORT line");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "the Kubernetes test peer did not start (got {line:?}); install it with \
                     `pip install -r kube/tests/peer/requirements.txt` (the README's test command does)"
                )
            });
        KubePeer {
            stdin: child.stdin.take(),
            child,
            port,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A kube-rs configuration for the peer (plain HTTP, no credentials).
    pub fn config(&self) -> kube::Config {
        kube::Config::new(self.url().parse().expect("the peer's URL"))
    }

    /// A kube-rs client for the peer; must be made inside a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("a client for the test peer")
    }

    /// A plain HTTP request to the peer's control endpoints (`/_peer/...`); the answer's body.
    pub fn control(&self, method: &str, path: &str, body: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the peer");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write to the peer");
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .expect("read the peer's answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        assert!(head.contains(" 200 "), "{method} {path}: {head}");
        body.to_string()
    }
}

impl Drop for KubePeer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
