//! A real memcached started per test on a free loopback port: the host's
//! (Debian 12's 1.6.18, `memcached` on PATH) or today's (Debian sid's, run
//! from its own root filesystem, `$MEMCACHED_NEWEST`), as the test says
//! ([`on_each_release!`] runs a test on both).

pub mod outcome;

use std::cell::Cell;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A memcached release the tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The host's `memcached` on PATH (`make deps`: Debian 12's 1.6.18),
    /// an older release users still run.
    Host,
    /// Today's, as Debian sid serves it: the root filesystem
    /// `e2e-tests/testbed/local-cluster/images/memcached-newest.sh` extracted, named by
    /// `$MEMCACHED_NEWEST` (the Makefile sets it), run through its own
    /// dynamic loader and libraries.
    Newest,
}

thread_local! {
    static RELEASE: Cell<Release> = const { Cell::new(Release::Host) };
}

impl Release {
    /// The release this test thread runs ([`Release::Host`] unless
    /// [`Release::select`] said otherwise).
    pub fn current() -> Release {
        RELEASE.with(Cell::get)
    }

    /// Run this release for the rest of the test (its thread).
    pub fn select(self) {
        RELEASE.with(|r| r.set(self));
    }

    /// The program that runs this memcached: `memcached` on PATH, or a
    /// script that execs today's through its own loader (the same process:
    /// its pid is memcached's).
    pub fn program(self) -> PathBuf {
        match self {
            Release::Host => PathBuf::from("memcached"),
            Release::Newest => newest_wrapper().join("memcached"),
        }
    }

    /// A PATH whose `memcached` is this release's (for the pod's
    /// supervisor script, which runs `memcached` from PATH).
    pub fn path_env(self) -> String {
        let path = std::env::var("PATH").unwrap_or_default();
        match self {
            Release::Host => path,
            Release::Newest => format!("{}:{path}", newest_wrapper().display()),
        }
    }

    /// This memcached's executable file (not the script that runs it).
    pub fn binary(self) -> PathBuf {
        match self {
            Release::Host => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|dir| dir.join("memcached"))
                .find(|file| file.is_file())
                .expect("memcached on PATH"),
            Release::Newest => newest_rootfs().join("usr/bin/memcached"),
        }
    }

    /// A command running this memcached.
    pub fn command(self) -> Command {
        let mut command = Command::new(self.program());
        command.env("PATH", self.path_env());
        command
    }

    /// The patch number of its 1.6 release (18 for 1.6.18): the tests that
    /// meet a difference between releases compare it with the release that
    /// changed it.
    pub fn patch(self) -> u32 {
        let version = self.version();
        version
            .strip_prefix("1.6.")
            .and_then(|patch| patch.parse().ok())
            .unwrap_or_else(|| panic!("{self:?} memcached is {version}, not a 1.6 release"))
    }

    /// Its version, as `memcached -V` prints it (`1.6.18`).
    pub fn version(self) -> String {
        let output = self
            .command()
            .arg("-V")
            .output()
            .unwrap_or_else(|e| panic!("{self:?} memcached: {e}"));
        let text = String::from_utf8_lossy(&output.stdout);
        text.trim()
            .strip_prefix("memcached ")
            .unwrap_or_else(|| panic!("{self:?} memcached -V printed {text:?}"))
            .to_string()
    }
}

/// The root filesystem of today's memcached, from `$MEMCACHED_NEWEST`.
pub fn newest_rootfs() -> PathBuf {
    let rootfs = std::env::var_os("MEMCACHED_NEWEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "MEMCACHED_NEWEST is not set: it names the root filesystem of today's memcached \
             (`make target/e2e/memcached-newest/version` fetches it from Debian; `make test` and \
             `make unit-tests` set it: MEMCACHED_NEWEST=$PWD/target/e2e/memcached-newest/rootfs)"
            )
        });
    assert!(
        rootfs.join("usr/bin/memcached").is_file(),
        "MEMCACHED_NEWEST={}: no usr/bin/memcached there (`make target/e2e/memcached-newest/version` \
         fetches today's memcached from Debian)",
        rootfs.display()
    );
    rootfs
}

/// A directory with `memcached`, a script that runs today's memcached from
/// its root filesystem without chroot: its own `ld-linux` loads it with the
/// root filesystem's libraries (sid's glibc, newer than the host's). Written
/// once per test process, in cargo's target tmp directory (`target/tmp`, the
/// `CARGO_TARGET_TMPDIR` of the test binary running this).
fn newest_wrapper() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let rootfs = newest_rootfs();
        let dir = target_tmpdir().join("memcached-newest");
        std::fs::create_dir_all(&dir).unwrap();
        let libs: Vec<String> = ["usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib"]
            .iter()
            .map(|d| rootfs.join(d).display().to_string())
            .collect();
        let script = format!(
            "#!/bin/sh\nexec '{}' --library-path '{}' '{}' \"$@\"\n",
            rootfs.join("usr/lib64/ld-linux-x86-64.so.2").display(),
            libs.join(":"),
            rootfs.join("usr/bin/memcached").display()
        );
        // Written aside and renamed: test binaries running at once each write it.
        // Written by a child process: a file open for writing cannot be
        // executed (ETXTBSY), and a child another thread forks meanwhile would
        // hold this process's descriptor until it execs.
        let written = dir.join(format!("memcached.{}", std::process::id()));
        let wrote = Command::new("sh")
            .args([
                "-c",
                r#"printf '%s' "$1" > "$2" && chmod 755 "$2""#,
                "sh",
                &script,
            ])
            .arg(&written)
            .status()
            .unwrap();
        assert!(wrote.success(), "writing {}: {wrote}", written.display());
        std::fs::rename(&written, dir.join("memcached")).unwrap();
        // memcached reads it after dropping to `nobody` when run as root.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
    .clone()
}

/// Cargo's `target/tmp`: a library has no `CARGO_TARGET_TMPDIR`, so it is
/// found from the running test binary (`target/<profile>/deps/<test>`).
fn target_tmpdir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .unwrap_or_else(|| panic!("{}: not under target/<profile>/deps", exe.display()));
    target.join("tmp")
}

/// Each test of the block twice, in a module of its name: `<test>::host` on
/// the host's memcached (Debian 12's 1.6.18) and `<test>::newest` on today's
/// ([`Release`]); the test reads which from [`Release::current`].
#[macro_export]
macro_rules! on_each_release {
    () => {};
    ($(#[doc = $doc:literal])* #[tokio::test] async fn $name:ident() $body:block $($rest:tt)*) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn host() {
                $crate::real_memcached::Release::Host.select();
                $body
            }
            #[tokio::test]
            async fn newest() {
                $crate::real_memcached::Release::Newest.select();
                $body
            }
        }
        $crate::on_each_release!($($rest)*);
    };
    ($(#[doc = $doc:literal])* #[test] fn $name:ident() $body:block $($rest:tt)*) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn host() {
                $crate::real_memcached::Release::Host.select();
                $body
            }
            #[test]
            fn newest() {
                $crate::real_memcached::Release::Newest.select();
                $body
            }
        }
        $crate::on_each_release!($($rest)*);
    };
}

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

/// Start memcached (the test's [`Release`]) with `args` on a free loopback
/// port and wait until it accepts connections.
pub fn start(args: &[String]) -> Memcached {
    let port = free_port();
    let release = Release::current();
    let mut command = release.command();
    command.args(args).args(loopback_args(port));
    if is_root() {
        command.args(["-u", "nobody"]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{release:?} memcached (apt-get install memcached): {e}"));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut server = Memcached { child, addr };
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("{release:?} memcached {args:?} exited: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "{release:?} memcached {args:?} did not start"
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
    make_renewed_pki(1).remove(0)
}

/// [`make_pki`]'s certificate `count` times, each with its own key, all
/// signed by one CA: a certificate and its renewals.
pub fn make_renewed_pki(count: usize) -> Vec<Pki> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    // Distinct subjects: OpenSSL takes a leaf named like its issuer for self-signed.
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "memcached test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    (0..count)
        .map(|_| {
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
        })
        .collect()
}

/// A temporary directory memcached can still read after dropping to `nobody`.
pub fn readable_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
