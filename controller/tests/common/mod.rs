//! A real memcached (Debian package) started per test on a free loopback port.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running memcached, killed on drop.
pub struct Memcached {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Memcached {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its process has not exited; `Err` with how it exited.
    pub fn alive(&mut self) -> Result<(), std::process::ExitStatus> {
        match self.child.try_wait().unwrap() {
            None => Ok(()),
            Some(status) => Err(status),
        }
    }

    /// Send `signal` (`USR1`, `TERM`) and wait (at most 10 s) until
    /// memcached has exited.
    pub fn stop_with(mut self, signal: &str) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "memcached did not exit on {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// memcached's flags for a test server: TCP `port` on loopback, no UDP.
pub fn loopback_args(port: u16) -> [String; 6] {
    ["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"].map(String::from)
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start memcached with `args` on a free loopback port and wait until it accepts connections.
pub fn start(args: &[String]) -> Memcached {
    let port = free_port();
    let mut command = Command::new("memcached");
    command.args(args).args(loopback_args(port));
    if is_root() {
        command.args(["-u", "nobody"]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("memcached is installed (apt-get install memcached)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut server = Memcached { child, addr };
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("memcached {args:?} exited: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "memcached {args:?} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.addr = addr;
    server
}

fn is_root() -> bool {
    std::env::var("USER").map(|u| u == "root").unwrap_or(false)
        || std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false)
}

/// A self-signed CA and a server certificate it signs, as PEM files in `dir`.
pub struct Pki {
    /// CA certificate.
    pub ca: String,
    /// Server (and client) certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
}

/// Make a CA and a certificate for `memcached.test` and `cache.default.svc`
/// (the Service DNS name of a Memcached `cache` in `default`) signed by it.
pub fn make_pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    // Distinct subjects: OpenSSL takes a leaf named like its issuer for self-signed.
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "memcached test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec![
        "memcached.test".to_string(),
        "cache.default.svc".to_string(),
    ])
    .unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "memcached.test");
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    Pki {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

/// A temporary directory memcached can still read after dropping to `nobody`.
pub fn readable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
