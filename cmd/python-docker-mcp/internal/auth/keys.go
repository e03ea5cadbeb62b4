package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// asymmetric are the algorithms auth.algorithm may name: signatures with a
// public key only. "none" and the HMAC family (HS256…) are never accepted:
// an HMAC "signed" with a public key's bytes would verify against anyone.
var asymmetric = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true,
	"PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true,
	"EdDSA": true,
}

// algorithms parses auth.algorithm: one algorithm or a comma-separated list.
func algorithms(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{"RS256"}, nil
	}
	var algs []string
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if !asymmetric[a] {
			return nil, fmt.Errorf("auth.algorithm %q: not allowed; want one or more (comma-separated) of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (none and HMAC are never accepted)", a)
		}
		algs = append(algs, a)
	}
	return algs, nil
}

// jwks builds a key function backed by a JWK Set at uri: fetched once now
// (a failure is logged, not fatal: the set is fetched again on use),
// refreshed every hour, and refreshed when a token names an unknown key id
// (at most once a minute), so a rotated signing key is picked up at once.
func jwks(ctx context.Context, uri string, opts Options) (func(context.Context) jwt.Keyfunc, error) {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth.jwks_uri %q: want an absolute https URL", uri)
	}
	if u.Scheme == "http" && !loopback(u.Host) && !strings.EqualFold(u.Hostname(), "localhost") {
		opts.Logger.Warn("auth.jwks_uri is plain http: keys fetched without TLS can be forged on the way", "jwks_uri", uri)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{uri}, keyfunc.Override{
		Client:            client,
		HTTPTimeout:       10 * time.Second,
		RefreshInterval:   time.Hour,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(time.Minute), 1),
		RateLimitWaitMax:  10 * time.Second,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				opts.Logger.Warn("fetch JWKS failed; tokens signed by keys not yet known are refused", "jwks_uri", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth.jwks_uri %q: %w", uri, err)
	}
	return kf.KeyfuncCtx, nil
}

// staticKey is the key function of a single public key.
func staticKey(key any) func(context.Context) jwt.Keyfunc {
	return func(context.Context) jwt.Keyfunc {
		return func(*jwt.Token) (any, error) { return key, nil }
	}
}

// loadPublicKey reads a PEM public key (PKIX "PUBLIC KEY", PKCS#1 "RSA PUBLIC
// KEY" or a "CERTIFICATE") and checks it fits the allowed algorithms.
func loadPublicKey(path string, algs []string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth.public_key_path: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("auth.public_key_path %s: no PEM block found; want a PEM public key or certificate", path)
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, fmt.Errorf("auth.public_key_path %s: PEM block %q is not a public key; want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("auth.public_key_path %s: %w", path, err)
	}
	for _, a := range algs {
		if err := fits(key, a); err != nil {
			return nil, fmt.Errorf("auth.public_key_path %s with auth.algorithm %s: %w", path, a, err)
		}
	}
	return key, nil
}

func fits(key any, alg string) error {
	var ok bool
	switch alg[:2] {
	case "RS", "PS":
		_, ok = key.(*rsa.PublicKey)
	case "ES":
		_, ok = key.(*ecdsa.PublicKey)
	case "Ed":
		_, ok = key.(ed25519.PublicKey)
	}
	if !ok {
		return fmt.Errorf("a %T cannot verify %s", key, alg)
	}
	return nil
}
