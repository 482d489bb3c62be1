package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is the cluster's certificate authority: it signs the API server's
// serving certificate and the admin client certificate.
type authority struct {
	dir  string
	cert *x509.Certificate
	key  crypto.Signer
}

// keyPair is a PEM certificate and PEM private key, also written to disk.
type keyPair struct {
	certPEM, keyPEM   []byte
	certPath, keyPath string
}

func newAuthority(dir string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "e2e-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &authority{dir: dir, cert: cert, key: key}
	_, err = ca.write("ca", der, key)
	return ca, err
}

// certPath is where the CA certificate is written.
func (a *authority) certPath() string { return filepath.Join(a.dir, "ca.crt") }

// certPEM is the CA certificate.
func (a *authority) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cert.Raw})
}

// issue signs a leaf certificate: a server certificate when ips or names are
// given, a client certificate otherwise.
func (a *authority) issue(name, commonName string, organizations []string, ips []net.IP, names []string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if len(ips)+len(names) > 0 {
		usage = x509.ExtKeyUsageServerAuth
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     names,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, err
	}
	return a.write(name, der, key)
}

func (a *authority) write(name string, der []byte, key *ecdsa.PrivateKey) (*keyPair, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair := &keyPair{
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		certPath: filepath.Join(a.dir, name+".crt"),
		keyPath:  filepath.Join(a.dir, name+".key"),
	}
	if err := os.WriteFile(pair.certPath, pair.certPEM, 0o644); err != nil {
		return nil, err
	}
	return pair, os.WriteFile(pair.keyPath, pair.keyPEM, 0o600)
}

// writeServiceAccountKeys writes the key pair that signs service account tokens.
func writeServiceAccountKeys(dir string) (publicPath, privatePath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	privateDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	publicDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	publicPath, privatePath = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if err := os.WriteFile(privatePath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privateDER}), 0o600); err != nil {
		return "", "", err
	}
	return publicPath, privatePath, os.WriteFile(publicPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicDER}), 0o644)
}
