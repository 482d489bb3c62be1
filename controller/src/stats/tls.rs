//! TLS client configuration for reading stats from memcached pods, built
//! from the data of the TLS Secret the pods mount.
//!
//! Pods are dialled by IP; the server certificate is verified against the
//! CA (`ca.crt`, or without it the certificates of `tls.crt` themselves) and
//! against the Service DNS name [`server_name`] gives, so a certificate
//! issued by the same CA for another service is refused.

use std::sync::Arc;

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// Trust `ca_pem` (or, without a CA, the server certificate itself) and
/// present `identity` (certificate chain and key, PEM) when given.
pub fn client_config(
    ca_pem: Option<&[u8]>,
    server_cert_pem: &[u8],
    identity: Option<(&[u8], &[u8])>,
) -> Result<ClientConfig, String> {
    let provider = Arc::new(ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem.unwrap_or(server_cert_pem))? {
        roots
            .add(cert)
            .map_err(|e| format!("invalid trust anchor: {e}"))?;
    }
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => {
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("invalid private key: {e}"))?;
            builder
                .with_client_auth_cert(certificates(chain)?, key)
                .map_err(|e| e.to_string())
        }
    }
}

/// The name a Memcached's certificate must carry: its Service's DNS name
/// `<name>.<namespace>.svc` (a subjectAltName; `*.<namespace>.svc` also matches).
pub fn server_name(name: &str, namespace: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(format!("{name}.{namespace}.svc")).map_err(|e| e.to_string())
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in PEM data".into());
    }
    Ok(certs)
}
