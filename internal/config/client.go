package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"go.temporal.io/sdk/client"
)

// ClientOptions turns the connection settings into the SDK's options:
// mTLS when a certificate is set, server verification against tls_ca, and
// an API key read from the named environment variable.
func (c Config) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: c.TemporalAddress, Namespace: c.TemporalNamespace}
	useTLS := c.TLSCert != "" || c.TLSCA != "" || c.APIKeyEnv != ""
	if useTLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(c.TemporalAddress); err == nil {
				tc.ServerName = host
			}
		}
		if c.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
			if err != nil {
				return opts, fmt.Errorf("tls_cert/tls_key: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if c.TLSCA != "" {
			pem, err := os.ReadFile(c.TLSCA)
			if err != nil {
				return opts, fmt.Errorf("tls_ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, fmt.Errorf("tls_ca %s: no PEM certificates in it", c.TLSCA)
			}
			tc.RootCAs = pool
		}
		opts.ConnectionOptions.TLS = tc
	}
	if c.APIKeyEnv != "" {
		key, ok := os.LookupEnv(c.APIKeyEnv)
		if !ok || key == "" {
			return opts, fmt.Errorf("api_key_env: %s is not set", c.APIKeyEnv)
		}
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	return opts, nil
}
