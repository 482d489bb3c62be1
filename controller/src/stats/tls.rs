//! TLS towards memcached pods for reading their stats: the client
//! configuration, built from the data of the TLS Secret the pods mount, and
//! the certificate a pod presents against the one it mounts.
//!
//! Pods are dialled by IP; the server certificate is verified against the
//! CA (`ca.crt`, or without it the certificates of `tls.crt` themselves) and
//! against the Service DNS name [`server_name`] gives, so a certificate
//! issued by the same CA for another service is refused. Sessions are never
//! resumed: each handshake shows the certificate the server presents now.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::Resumption;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::sign::CertifiedKey;
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
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("invalid private key: {e}"))?;
            builder
                .with_client_auth_cert(certificates(chain)?, key)
                .map_err(|e| e.to_string())?
        }
    };
    // Every handshake a full one: a resumed session presents no certificate,
    // and the one it remembers says nothing of what the server loaded since.
    config.resumption = Resumption::disabled();
    Ok(config)
}

/// The name a Memcached's certificate must carry: its Service's DNS name
/// `<name>.<namespace>.svc` (a subjectAltName; `*.<namespace>.svc` also matches).
pub fn server_name(name: &str, namespace: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(format!("{name}.{namespace}.svc")).map_err(|e| e.to_string())
}

/// The certificate of `chain_pem` (its first) when memcached can load
/// `chain_pem` with `key_pem`: every certificate parses and the key is the
/// certificate's. memcached's `refresh_certs` takes the certificate before
/// it checks the key: with a key of another certificate it presents one it
/// has no key for, and every handshake fails until a good load or a restart.
pub fn loadable(
    chain_pem: &[u8],
    key_pem: Option<&[u8]>,
) -> Result<CertificateDer<'static>, String> {
    let chain = certificates(chain_pem)?;
    let key = key_pem.ok_or("no private key")?;
    let key =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("invalid private key: {e}"))?;
    let certified = CertifiedKey::from_der(chain, key, &ring::default_provider())
        .map_err(|e| format!("the private key is not the certificate's: {e}"))?;
    certified
        .keys_match()
        .map_err(|e| format!("the private key is not the certificate's: {e}"))?;
    Ok(certified.cert[0].clone())
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

/// TLS towards the pods: the client configuration and the name their
/// certificate must carry (pods are dialled by IP).
#[derive(Clone)]
pub struct Tls {
    /// Trust anchors and client identity.
    pub config: Arc<ClientConfig>,
    /// The Service DNS name verified against the certificate.
    pub server_name: ServerName<'static>,
    /// The certificate the pods mount now, which servers are checked against.
    pub mounted: Mounted,
}

/// The certificate the pods mount now (the TLS Secret's).
#[derive(Clone, Debug, Default)]
pub enum Mounted {
    /// Not known: servers are not checked.
    #[default]
    Unknown,
    /// This one (the first of `tls.crt`), loadable with `tls.key`
    /// ([`crate::stats::tls::loadable`]): a server presenting another one is
    /// asked to load its certificate files again.
    Loadable(CertificateDer<'static>),
    /// One memcached cannot load, and why: servers are not asked to.
    Unloadable(String),
}

/// The certificate a TLS server presented, against the one its pods mount
/// now ([`Tls::mounted`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Presented {
    /// Not checked: plain text, or no certificate expected.
    #[default]
    Unchecked,
    /// The expected one.
    Current,
    /// Another one first; memcached loaded its certificate files again
    /// (`refresh_certs`) and a new handshake got the expected one.
    Reloaded,
    /// Another one; memcached loaded its certificate files again and still
    /// presents another one: the kubelet has not written the renewed files
    /// into the pod yet.
    Older,
    /// Another one; memcached refused to load its certificate files again,
    /// with this answer (it keeps serving the one it has).
    Refused(String),
}

impl Tls {
    /// The TLS handshake on `tcp`, the server verified.
    pub async fn handshake(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        (TlsConnector::from(self.config.clone()))
            .connect(self.server_name.clone(), tcp)
            .await
    }

    /// The server of `stream` presents the [`Mounted::Loadable`] certificate
    /// (or there is none to load).
    pub fn presents_expected(&self, stream: &TlsStream<TcpStream>) -> bool {
        let presented = (stream.get_ref().1.peer_certificates()).and_then(|chain| chain.first());
        match &self.mounted {
            Mounted::Loadable(mounted) => presented == Some(mounted),
            Mounted::Unknown | Mounted::Unloadable(_) => true,
        }
    }
}
