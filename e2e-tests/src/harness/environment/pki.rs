//! Throwaway certificates: policy-server's serving certificate (its CA is
//! the webhooks' caBundle) and memcached's TLS Secret.

/// A CA and one leaf certificate it signed, all PEM.
pub struct Pki {
    /// The CA certificate.
    pub ca: String,
    /// The leaf certificate.
    pub cert: String,
    /// The leaf's PKCS#8 private key.
    pub key: String,
}

/// A fresh CA and a leaf for `names` (DNS names or IP addresses).
pub fn issue(names: &[&str]) -> Result<Pki, String> {
    Ok(issue_renewed(names, 1)?.remove(0))
}

/// [`issue`]'s leaf `count` times, each with its own key, all signed by one
/// fresh CA: a certificate and its renewals (as cert-manager renews one).
pub fn issue_renewed(names: &[&str], count: usize) -> Result<Vec<Pki>, String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let error = |e: rcgen::Error| e.to_string();
    let ca_key = KeyPair::generate().map_err(error)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(error)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Distinct subjects: OpenSSL takes a leaf named like its issuer for self-signed.
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "memcached e2e CA");
    let ca = ca_params.self_signed(&ca_key).map_err(error)?;
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    (0..count)
        .map(|_| {
            let key = KeyPair::generate().map_err(error)?;
            let mut params = CertificateParams::new(names.clone()).map_err(error)?;
            params.distinguished_name.push(
                DnType::CommonName,
                names.first().cloned().unwrap_or_default(),
            );
            let cert = params.signed_by(&key, &ca, &ca_key).map_err(error)?;
            Ok(Pki {
                ca: ca.pem(),
                cert: cert.pem(),
                key: key.serialize_pem(),
            })
        })
        .collect()
}
