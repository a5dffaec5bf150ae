package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/internal/codec"
)

// ClientOptions turns the connection settings into the SDK's options:
// mTLS when a certificate is set, server verification against tls_ca, an
// API key read from the named environment variable, and payload
// encryption when a codec key is set.
func (c Config) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: c.TemporalAddress, Namespace: c.TemporalNamespace}
	if c.GRPCCompression != "gzip" {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	cd, err := c.Codec()
	if err != nil {
		return opts, err
	}
	if cd != nil {
		dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), cd)
		opts.DataConverter = dc
		// Error messages and stack traces may name hosts, paths and command
		// output: they are encrypted too.
		opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter: dc, EncodeCommonAttributes: true})
	}
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

// Codec is the payload codec the settings ask for, or nil when payload
// encryption is off.
func (c Config) Codec() (*codec.Codec, error) {
	if c.CodecKeyFile == "" && c.CodecKeyEnv == "" {
		return nil, nil
	}
	field := "codec_key_file"
	if c.CodecKeyEnv != "" {
		field = "codec_key_env"
	}
	cur, err := codec.Source{File: c.CodecKeyFile, Env: c.CodecKeyEnv}.Load(field)
	if err != nil {
		return nil, err
	}
	var old []codec.Key
	for i, f := range c.CodecOldKeyFiles {
		k, err := codec.Source{File: f}.Load(fmt.Sprintf("codec_old_key_files[%d]", i))
		if err != nil {
			return nil, err
		}
		old = append(old, k)
	}
	return codec.New(cur, old...), nil
}
