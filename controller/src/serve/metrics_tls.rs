//! The serving certificate of `/metrics` over TLS: `tls.crt` and `tls.key`
//! of a directory (a mounted cert-manager or TLS Secret, re-read when they
//! change, as controller-runtime's certwatcher does), else a self-signed
//! one made at start.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// Certificate and key file names in `--metrics-cert-dir`.
pub const CERT_FILE: &str = "tls.crt";
/// See [`CERT_FILE`].
pub const KEY_FILE: &str = "tls.key";
/// How often the files are checked for a change, at most.
const RECHECK: Duration = Duration::from_secs(10);

/// A TLS server configuration (HTTP/1.1) serving the certificate of
/// `cert_dir`, or a self-signed one for `names` without it.
pub fn server_config(cert_dir: Option<&Path>, names: Vec<String>) -> anyhow::Result<ServerConfig> {
    let provider = Arc::new(ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth();
    let mut config = match cert_dir {
        Some(dir) => {
            let files = CertFiles::load(dir.to_path_buf(), provider, RECHECK)?;
            builder.with_cert_resolver(Arc::new(files))
        }
        None => {
            let generated = rcgen::generate_simple_self_signed(names)
                .context("generating a self-signed certificate")?;
            let key = PrivateKeyDer::Pkcs8(generated.key_pair.serialize_der().into());
            builder.with_single_cert(vec![generated.cert.der().clone()], key)?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificate of a directory, reloaded when its files change.
#[derive(Debug)]
struct CertFiles {
    dir: PathBuf,
    provider: Arc<CryptoProvider>,
    recheck: Duration,
    current: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    modified: Option<(SystemTime, SystemTime)>,
    checked: Instant,
}

impl CertFiles {
    fn load(
        dir: PathBuf,
        provider: Arc<CryptoProvider>,
        recheck: Duration,
    ) -> anyhow::Result<Self> {
        let key = read_key(&dir, &provider)?;
        let current = Mutex::new(Loaded {
            key,
            modified: modified(&dir),
            checked: Instant::now(),
        });
        Ok(CertFiles {
            dir,
            provider,
            recheck,
            current,
        })
    }

    /// The certificate, re-read first when a check is due and the files changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.checked.elapsed() >= self.recheck {
            current.checked = Instant::now();
            let modified = modified(&self.dir);
            if modified != current.modified {
                // A half-written pair keeps the old certificate until the next check.
                match read_key(&self.dir, &self.provider) {
                    Ok(key) => {
                        tracing::info!(dir = %self.dir.display(), "reloaded the metrics certificate");
                        *current = Loaded {
                            key,
                            modified,
                            checked: current.checked,
                        };
                    }
                    Err(e) => tracing::warn!(error = %e, "keeping the metrics certificate"),
                }
            }
        }
        current.key.clone()
    }
}

impl ResolvesServerCert for CertFiles {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Modification times of the certificate and key (links followed).
fn modified(dir: &Path) -> Option<(SystemTime, SystemTime)> {
    let time = |file| {
        std::fs::metadata(dir.join(file))
            .and_then(|m| m.modified())
            .ok()
    };
    time(CERT_FILE).zip(time(KEY_FILE))
}

fn read_key(dir: &Path, provider: &CryptoProvider) -> anyhow::Result<Arc<CertifiedKey>> {
    let cert_path = dir.join(CERT_FILE);
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading {}", cert_path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "no certificate in {}",
        cert_path.display()
    );
    let key_path = dir.join(KEY_FILE);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .with_context(|| format!("reading {}", key_path.display()))?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .with_context(|| format!("loading {}", key_path.display()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().with_context(|| {
        format!(
            "{} does not match {}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path) -> Vec<u8> {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.join(KEY_FILE), generated.key_pair.serialize_pem()).unwrap();
        std::fs::write(dir.join(CERT_FILE), generated.cert.pem()).unwrap();
        generated.cert.der().to_vec()
    }

    #[test]
    fn self_signed_without_a_directory() {
        let config = server_config(None, vec!["localhost".into()]).unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn reloads_renewed_files_and_refuses_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_pair(dir.path());
        let provider = Arc::new(ring::default_provider());
        let files = CertFiles::load(dir.path().into(), provider.clone(), Duration::ZERO).unwrap();
        assert_eq!(files.current().cert[0].as_ref(), first);
        // A renewal lands a second later (file systems keep coarse times).
        std::thread::sleep(Duration::from_millis(1100));
        let second = write_pair(dir.path());
        assert_eq!(files.current().cert[0].as_ref(), second);
        std::thread::sleep(Duration::from_millis(1100));
        std::fs::write(dir.path().join(KEY_FILE), "not a key").unwrap();
        assert_eq!(
            files.current().cert[0].as_ref(),
            second,
            "a broken pair keeps the old one"
        );
        std::fs::remove_file(dir.path().join(CERT_FILE)).unwrap();
        assert!(CertFiles::load(dir.path().into(), provider, RECHECK).is_err());
    }
}
