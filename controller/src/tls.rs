//! TLS client configuration for reading stats from memcached pods, built
//! from the data of the TLS Secret the pods mount.
//!
//! Pods are dialled by IP while their certificate names the Service, so the
//! chain is verified against the CA but a name mismatch is tolerated.

use std::sync::Arc;

use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme,
};

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
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyNameVerifier(inner)));
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

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in PEM data".into());
    }
    Ok(certs)
}

/// WebPKI verification that accepts a certificate valid for another name.
#[derive(Debug)]
struct AnyNameVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
