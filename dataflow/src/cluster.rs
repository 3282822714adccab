//! Several processes as one timely computation: who the processes are (a hostfile, as timely's),
//! the connections between them, and noticing when a peer goes away.
//!
//! The sockets are made here rather than by timely's `CommunicationConfig::Cluster`: timely
//! prints its connection progress on stdout (where `dovetail plan -o json` writes), retries a
//! missing peer forever, and cannot tell a peer of another build or setting from a good one.
//! Here the wait is bounded, a handshake checks that both sides agree on the shape of the
//! cluster, and each connection reports when it closes so that a dead peer is an error instead
//! of an engine that never catches up (membership is fixed and failure is fail-stop).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::zero_copy::stream::Stream;
use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};

/// How long a process waits for its peers to connect before giving up.
pub const DEFAULT_CONNECT_WAIT: Duration = Duration::from_secs(60);

/// First bytes of the handshake: "dovetail", so a stray connection is not taken for a peer.
const MAGIC: u64 = u64::from_le_bytes(*b"dovetail");

#[derive(Debug, Error)]
pub enum ClusterError {
    #[error("hostfile {path}: {source}")]
    ReadHostfile { path: PathBuf, source: io::Error },
    #[error("hostfile {path}: line {line}: {text:?} is not host:port")]
    BadHost {
        path: PathBuf,
        line: usize,
        text: String,
    },
    #[error("hostfile {path}: {found} hosts for --processes {processes} (one host:port line per process)")]
    HostCount {
        path: PathBuf,
        found: usize,
        processes: usize,
    },
    #[error("--process-index {index} is not below --processes {processes}")]
    IndexOutOfRange { index: usize, processes: usize },
    #[error("--processes must be at least 1")]
    NoProcesses,
    #[error("process {index}: cannot listen on {address}: {source}")]
    Listen {
        index: usize,
        address: String,
        source: io::Error,
    },
    #[error("process {index}: no connection with process {peer} ({address}) after {waited:?}")]
    PeerMissing {
        index: usize,
        peer: usize,
        address: String,
        waited: Duration,
    },
    #[error("process {index}: handshake with {peer}: {reason}")]
    Handshake {
        index: usize,
        peer: String,
        reason: HandshakeFailure,
    },
    #[error("process {index}: starting timely's network threads: {source}")]
    Network { index: usize, source: io::Error },
}

/// What went wrong in a handshake between two processes.
#[derive(Debug, Error)]
pub enum HandshakeFailure {
    #[error("sending our hello: {0}")]
    Send(io::Error),
    #[error("reading its hello: {0}")]
    Read(io::Error),
    #[error("it is not a dovetail process")]
    NotDovetail,
    #[error("its hello is garbled")]
    Garbled,
    #[error("a second connection claiming to be process {from}")]
    SecondConnection { from: usize },
    #[error("process {from} should not connect to process {to}")]
    ShouldNotConnect { from: usize, to: usize },
    #[error("{address} is process {theirs}, the hostfile says {expected}")]
    WrongProcess {
        address: String,
        theirs: usize,
        expected: usize,
    },
    #[error(
        "the peer runs {processes} processes of {their_threads} workers, this one {ours} of \
         {threads} (give every process the same --processes and -w)"
    )]
    Shape {
        processes: usize,
        their_threads: usize,
        ours: usize,
        threads: usize,
    },
}

/// This process's place in a fixed set of processes that run one engine together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// `host:port` of every process, in process order.
    pub hosts: Vec<String>,
    /// This process's position in `hosts`; process 0 feeds the engine and reads its decisions.
    pub index: usize,
    /// How long to wait for every peer to connect.
    pub connect_wait: Duration,
}

impl Cluster {
    /// `processes` processes listed in the hostfile at `path` (one `host:port` line per process,
    /// as timely's; blank lines and `#` comments skipped), this one at `index`.
    pub fn from_hostfile(
        path: &Path,
        processes: usize,
        index: usize,
    ) -> Result<Cluster, ClusterError> {
        let text = std::fs::read_to_string(path).map_err(|source| ClusterError::ReadHostfile {
            path: path.to_path_buf(),
            source,
        })?;
        let mut hosts = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let port_ok = line
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !port_ok {
                return Err(ClusterError::BadHost {
                    path: path.to_path_buf(),
                    line: n + 1,
                    text: line.to_string(),
                });
            }
            hosts.push(line.to_string());
        }
        if hosts.len() != processes {
            return Err(ClusterError::HostCount {
                path: path.to_path_buf(),
                found: hosts.len(),
                processes,
            });
        }
        Cluster::new(hosts, index)
    }

    pub fn new(hosts: Vec<String>, index: usize) -> Result<Cluster, ClusterError> {
        if hosts.is_empty() {
            return Err(ClusterError::NoProcesses);
        }
        if index >= hosts.len() {
            return Err(ClusterError::IndexOutOfRange {
                index,
                processes: hosts.len(),
            });
        }
        Ok(Cluster {
            hosts,
            index,
            connect_wait: DEFAULT_CONNECT_WAIT,
        })
    }

    pub fn processes(&self) -> usize {
        self.hosts.len()
    }

    /// Connects to every peer (a process connects to those before it and accepts those after
    /// it, as timely does) and starts timely's network threads over the connections.
    pub(crate) fn connect(&self, threads: usize) -> Result<Connected, ClusterError> {
        let deadline = Instant::now() + self.connect_wait;
        let closed = Arc::new(AtomicBool::new(false));
        let mut sockets: Vec<Option<Watched>> = (0..self.processes()).map(|_| None).collect();
        for (peer, address) in self.hosts.iter().enumerate().take(self.index) {
            let stream = self.dial(peer, address, threads, deadline)?;
            sockets[peer] = Some(Watched::new(stream, closed.clone()));
        }
        if self.index + 1 < self.processes() {
            let address = &self.hosts[self.index];
            let listener = TcpListener::bind(address).map_err(|source| ClusterError::Listen {
                index: self.index,
                address: address.clone(),
                source,
            })?;
            listener
                .set_nonblocking(true)
                .map_err(|source| self.network(source))?;
            while let Some(peer) =
                (self.index + 1..self.processes()).find(|p| sockets[*p].is_none())
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream
                            .set_nonblocking(false)
                            .map_err(|source| self.network(source))?;
                        let from = self.answer(&stream, threads)?;
                        if sockets[from].is_some() {
                            return Err(self
                                .handshake(&stream, HandshakeFailure::SecondConnection { from }));
                        }
                        sockets[from] = Some(Watched::new(stream, closed.clone()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if Instant::now() >= deadline {
                            return Err(ClusterError::PeerMissing {
                                index: self.index,
                                peer,
                                address: self.hosts[peer].clone(),
                                waited: self.connect_wait,
                            });
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(source) => return Err(self.network(source)),
                }
            }
        }
        let locals = ProcessBuilder::new_typed_vector(
            threads,
            timely::communication::Hooks::default().refill,
            None,
        );
        let (builders, guard) = initialize_networking_from_sockets(
            locals,
            sockets,
            self.index,
            threads,
            timely::communication::Hooks::default(),
        )
        .map_err(|source| self.network(source))?;
        Ok(Connected {
            builders: builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
            guard: Box::new(guard),
            peers: PeerWatch { closed },
        })
    }

    /// Connects to an earlier process, retrying until it listens or the deadline passes.
    fn dial(
        &self,
        peer: usize,
        address: &str,
        threads: usize,
        deadline: Instant,
    ) -> Result<TcpStream, ClusterError> {
        loop {
            match TcpStream::connect(address) {
                Ok(stream) => {
                    stream
                        .set_nodelay(true)
                        .map_err(|source| self.network(source))?;
                    self.greet(&stream, threads)
                        .map_err(|e| self.handshake(&stream, e))?;
                    let (theirs, their_shape) =
                        read_hello(&stream).map_err(|e| self.handshake(&stream, e))?;
                    if theirs != peer {
                        return Err(self.handshake(
                            &stream,
                            HandshakeFailure::WrongProcess {
                                address: address.to_string(),
                                theirs,
                                expected: peer,
                            },
                        ));
                    }
                    self.check_shape(&stream, their_shape, threads)?;
                    return Ok(stream);
                }
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(_) => {
                    return Err(ClusterError::PeerMissing {
                        index: self.index,
                        peer,
                        address: address.to_string(),
                        waited: self.connect_wait,
                    })
                }
            }
        }
    }

    /// The accepting side of the handshake: who is calling, and is its cluster ours?
    fn answer(&self, stream: &TcpStream, threads: usize) -> Result<usize, ClusterError> {
        stream
            .set_nodelay(true)
            .map_err(|source| self.network(source))?;
        // A silent caller must not hold the accept loop past the deadline.
        stream
            .set_read_timeout(Some(self.connect_wait))
            .map_err(|source| self.network(source))?;
        let (from, shape) = read_hello(stream).map_err(|e| self.handshake(stream, e))?;
        if from <= self.index || from >= self.processes() {
            return Err(self.handshake(
                stream,
                HandshakeFailure::ShouldNotConnect {
                    from,
                    to: self.index,
                },
            ));
        }
        self.check_shape(stream, shape, threads)?;
        self.greet(stream, threads)
            .map_err(|e| self.handshake(stream, e))?;
        stream
            .set_read_timeout(None)
            .map_err(|source| self.network(source))?;
        Ok(from)
    }

    fn greet(&self, mut stream: &TcpStream, threads: usize) -> Result<(), HandshakeFailure> {
        let mut hello = Vec::with_capacity(32);
        for word in [
            MAGIC,
            self.index as u64,
            self.processes() as u64,
            threads as u64,
        ] {
            hello.extend_from_slice(&word.to_le_bytes());
        }
        stream.write_all(&hello).map_err(HandshakeFailure::Send)
    }

    fn check_shape(
        &self,
        stream: &TcpStream,
        (processes, their_threads): (usize, usize),
        threads: usize,
    ) -> Result<(), ClusterError> {
        if processes != self.processes() || their_threads != threads {
            return Err(self.handshake(
                stream,
                HandshakeFailure::Shape {
                    processes,
                    their_threads,
                    ours: self.processes(),
                    threads,
                },
            ));
        }
        Ok(())
    }

    fn handshake(&self, stream: &TcpStream, reason: HandshakeFailure) -> ClusterError {
        ClusterError::Handshake {
            index: self.index,
            peer: stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "a peer".to_string()),
            reason,
        }
    }

    fn network(&self, source: io::Error) -> ClusterError {
        ClusterError::Network {
            index: self.index,
            source,
        }
    }
}

/// What timely's workers are started from once every peer is connected.
pub(crate) struct Connected {
    pub(crate) builders: Vec<AllocatorBuilder>,
    /// timely's network threads, joined when dropped.
    pub(crate) guard: Box<dyn std::any::Any + Send>,
    pub(crate) peers: PeerWatch,
}

/// Reads a peer's hello: its index and its (processes, threads).
fn read_hello(mut stream: &TcpStream) -> Result<(usize, (usize, usize)), HandshakeFailure> {
    let mut bytes = [0u8; 32];
    stream
        .read_exact(&mut bytes)
        .map_err(HandshakeFailure::Read)?;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    if word(0) != MAGIC {
        return Err(HandshakeFailure::NotDovetail);
    }
    let n = |i: usize| usize::try_from(word(i)).map_err(|_| HandshakeFailure::Garbled);
    Ok((n(1)?, (n(2)?, n(3)?)))
}

/// Whether any connection to a peer has closed. Peers close only once the computation is over,
/// so a close before that means a peer died.
#[derive(Clone)]
pub(crate) struct PeerWatch {
    closed: Arc<AtomicBool>,
}

impl PeerWatch {
    pub(crate) fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A connection that raises a flag when its peer closes it or it fails: timely's receive thread
/// then panics, and nothing else would tell the workers that progress can no longer come.
struct Watched {
    stream: TcpStream,
    closed: Arc<AtomicBool>,
}

impl Watched {
    fn new(stream: TcpStream, closed: Arc<AtomicBool>) -> Watched {
        Watched { stream, closed }
    }
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.stream.read(buf);
        if matches!(read, Ok(0) | Err(_)) && !buf.is_empty() {
            self.closed.store(true, Ordering::SeqCst);
        }
        read
    }
}

impl Write for Watched {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.stream.write(buf);
        if written.is_err() {
            self.closed.store(true, Ordering::SeqCst);
        }
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl Stream for Watched {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(Watched {
            stream: self.stream.try_clone()?,
            closed: self.closed.clone(),
        })
    }

    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.stream.set_nonblocking(nonblocking)
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.stream.shutdown(how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hostfile(text: &str) -> (tempfile_dir::Dir, PathBuf) {
        let dir = tempfile_dir::Dir::new();
        let path = dir.0.join("hosts");
        std::fs::write(&path, text).expect("write hostfile");
        (dir, path)
    }

    /// A directory removed when dropped (the crate has no tempfile dependency).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let path = std::env::temp_dir()
                    .join(format!("dovetail-cluster-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).expect("temp dir");
                Dir(path)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn a_hostfile_names_one_host_per_process() {
        let (_d, path) = hostfile("# two processes\n127.0.0.1:7000\n\n127.0.0.1:7001\n");
        let c = Cluster::from_hostfile(&path, 2, 1).expect("valid");
        assert_eq!(c.hosts, ["127.0.0.1:7000", "127.0.0.1:7001"]);
        assert_eq!(c.index, 1);
    }

    #[test]
    fn a_bad_hostfile_names_the_line_or_the_count() {
        let (_d, path) = hostfile("127.0.0.1:7000\nlocalhost\n");
        let err = Cluster::from_hostfile(&path, 2, 0).expect_err("no port");
        assert!(err.to_string().contains("line 2"), "{err}");
        let (_d, path) = hostfile("127.0.0.1:7000\n");
        let err = Cluster::from_hostfile(&path, 2, 0).expect_err("one host for two");
        assert!(
            err.to_string().contains("1 hosts for --processes 2"),
            "{err}"
        );
        let (_d, path) = hostfile("127.0.0.1:7000\n127.0.0.1:7001\n");
        let err = Cluster::from_hostfile(&path, 2, 2).expect_err("index 2 of 2");
        assert!(matches!(err, ClusterError::IndexOutOfRange { .. }), "{err}");
    }

    #[test]
    fn a_missing_peer_is_an_error_after_the_wait() {
        // Nothing listens on the port of process 0 once this listener is dropped.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut c = Cluster::new(vec![format!("127.0.0.1:{port}"), "127.0.0.1:1".into()], 1)
            .expect("valid");
        c.connect_wait = Duration::from_millis(300);
        let err = c.connect(1).err().expect("nobody to connect to");
        assert!(
            matches!(err, ClusterError::PeerMissing { peer: 0, .. }),
            "{err}"
        );
    }

    fn hello(index: u64) -> Vec<u8> {
        [MAGIC, index, 2, 1]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    fn two_hosts() -> Vec<String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        vec![format!("127.0.0.1:{port}"), "127.0.0.1:1".to_string()]
    }

    fn constant(
        facts: differential_dataflow::VecCollection<'_, crate::engine::Epoch, crate::facts::Fact>,
    ) -> differential_dataflow::VecCollection<'_, crate::engine::Epoch, crate::decisions::Decision>
    {
        facts.map(|_| crate::decisions::Decision::LowerBound(crate::model::Price(0)))
    }

    /// Consolidation routes each record by its hash, so about half the decisions are made on
    /// the follower's worker.
    fn spread(
        facts: differential_dataflow::VecCollection<'_, crate::engine::Epoch, crate::facts::Fact>,
    ) -> differential_dataflow::VecCollection<'_, crate::engine::Epoch, crate::decisions::Decision>
    {
        facts
            .map(|f| match f {
                crate::facts::Fact::Clock(m) => {
                    crate::decisions::Decision::LowerBound(crate::model::Price(m))
                }
                _ => crate::decisions::Decision::LowerBound(crate::model::Price(-1)),
            })
            .consolidate()
    }

    #[test]
    fn two_processes_decide_what_one_decides() {
        use crate::engine::{serve, Engine, Placement};
        let facts: Vec<(crate::facts::Fact, isize)> = (1..=64)
            .map(|k| (crate::facts::Fact::Clock(k * 60_000), 1))
            .collect();
        let mut one = Engine::start(1, spread).expect("one process");
        one.advance(1, facts.clone()).expect("one process advances");
        let expected = one.decisions();
        let hosts = two_hosts();
        let follower_hosts = hosts.clone();
        let follower = std::thread::spawn(move || {
            let placement = Placement {
                threads: 1,
                cluster: Some(Cluster::new(follower_hosts, 1).expect("valid")),
            };
            serve(&placement, spread)
        });
        let placement = Placement {
            threads: 1,
            cluster: Some(Cluster::new(hosts, 0).expect("valid")),
        };
        let mut two = Engine::start_on(&placement, spread).expect("the driver starts");
        two.advance(1, facts).expect("two processes advance");
        let got = two.decisions();
        drop(two);
        follower
            .join()
            .expect("no panic")
            .expect("the follower ends cleanly once the driver is done");
        // The clock fact at minute 0 and the 64 others.
        assert_eq!(expected.len(), 65);
        assert_eq!(got, expected);
    }

    #[test]
    fn a_follower_that_goes_away_fails_the_driver_instead_of_hanging_it() {
        use crate::engine::{Engine, EngineError, Placement};
        let hosts = two_hosts();
        let address = hosts[0].clone();
        // A follower that says hello as process 1 of 2, then dies.
        let follower = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut stream = loop {
                match TcpStream::connect(&address) {
                    Ok(s) => break s,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(e) => panic!("the driver never listened: {e}"),
                }
            };
            stream.write_all(&hello(1)).expect("hello");
            let mut reply = [0u8; 32];
            stream.read_exact(&mut reply).expect("the driver's hello");
        });
        let placement = Placement {
            threads: 1,
            cluster: Some(Cluster::new(hosts, 0).expect("valid")),
        };
        let mut engine = Engine::start_on(&placement, constant).expect("the driver starts");
        follower.join().expect("the follower said hello");
        let err = engine
            .advance(1, Vec::new())
            .expect_err("no epoch can close without the follower");
        assert!(matches!(err, EngineError::PeerLost), "{err}");
    }

    #[test]
    fn a_driver_that_goes_away_fails_the_follower_instead_of_hanging_it() {
        use crate::engine::{serve, EngineError, Placement};
        let hosts = two_hosts();
        let listener = TcpListener::bind(&hosts[0]).expect("bind the driver's port");
        // A driver that answers the follower's hello, then dies.
        let driver = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("the follower dials");
            let mut theirs = [0u8; 32];
            stream
                .read_exact(&mut theirs)
                .expect("the follower's hello");
            stream.write_all(&hello(0)).expect("hello");
        });
        let placement = Placement {
            threads: 1,
            cluster: Some(Cluster::new(hosts, 1).expect("valid")),
        };
        let err = serve(&placement, constant).expect_err("the driver is gone");
        driver.join().expect("the driver said hello");
        assert!(matches!(err, EngineError::PeerLost), "{err}");
    }

    #[test]
    fn peers_that_disagree_on_the_workers_do_not_connect() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        drop(listener);
        let hosts = vec![address, "127.0.0.1:1".to_string()];
        let mut first = Cluster::new(hosts.clone(), 0).expect("valid");
        first.connect_wait = Duration::from_secs(5);
        let mut second = Cluster::new(hosts, 1).expect("valid");
        second.connect_wait = Duration::from_secs(5);
        let other = std::thread::spawn(move || second.connect(2).err().map(|e| e.to_string()));
        let err = first.connect(1).err().expect("1 worker against 2");
        assert!(err.to_string().contains("same --processes and -w"), "{err}");
        let other = other.join().expect("no panic");
        assert!(other.is_some(), "the other side must fail too");
    }
}
