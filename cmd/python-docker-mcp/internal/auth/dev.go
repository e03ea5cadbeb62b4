package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Dev mode names and lifetimes.
const (
	// DevIssuer is the issuer of development tokens when auth.issuer is empty.
	DevIssuer = "python-docker-mcp-dev"
	// DevSubject is the subject of the development token.
	DevSubject = "dev"
	// DevKeyFile, DevPublicKeyFile and DevTokenFile are the dev mode files
	// in Options.Dir, each mode 0600.
	DevKeyFile       = "dev-key.pem"
	DevPublicKeyFile = "dev-key.pub.pem"
	DevTokenFile     = "dev-token.jwt"
	// DevTokenLifetime is how long a new development token is valid; a token
	// with less than a day left is replaced at start.
	DevTokenLifetime = 30 * 24 * time.Hour
)

type devFiles struct {
	public    *rsa.PublicKey
	keyPath   string
	tokenPath string
	expires   time.Time
}

// setupDev makes sure dir holds an RSA-2048 key pair and a development token
// for issuer and audience with every scope: an existing key is reused (it
// must not be readable by others), an existing token is kept while it
// verifies, carries every scope and has more than a day left.
func setupDev(dir, issuer, audience string, scopes []string, now func() time.Time) (devFiles, error) {
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return devFiles{}, fmt.Errorf("auth dev mode: no directory for the development key: %w", err)
		}
		dir = filepath.Join(home, ".python-docker-mcp")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return devFiles{}, fmt.Errorf("auth dev mode: %w", err)
	}
	f := devFiles{keyPath: filepath.Join(dir, DevKeyFile), tokenPath: filepath.Join(dir, DevTokenFile)}

	key, err := loadDevKey(f.keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = newDevKey(dir, f.keyPath)
	}
	if err != nil {
		return devFiles{}, err
	}
	f.public = &key.PublicKey

	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(issuer),
		jwt.WithAudience(audience), jwt.WithExpirationRequired(), jwt.WithTimeFunc(now))
	if raw, err := os.ReadFile(f.tokenPath); err == nil {
		var c claims
		_, perr := parser.ParseWithClaims(strings.TrimSpace(string(raw)), &c, func(*jwt.Token) (any, error) { return f.public, nil })
		if perr == nil && c.ExpiresAt.After(now().Add(24*time.Hour)) && c.Subject == DevSubject &&
			!slices.ContainsFunc(scopes, func(s string) bool { return !slices.Contains(strings.Fields(c.Scope), s) }) {
			if err := private(f.tokenPath); err != nil {
				return devFiles{}, err
			}
			f.expires = c.ExpiresAt.Time
			return f, nil
		}
	}

	var jti [16]byte
	_, _ = rand.Read(jti[:])
	issued := now().Truncate(time.Second)
	f.expires = issued.Add(DevTokenLifetime)
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   DevSubject,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(issued),
			NotBefore: jwt.NewNumericDate(issued),
			ExpiresAt: jwt.NewNumericDate(f.expires),
			ID:        hex.EncodeToString(jti[:]),
		},
		Scope: strings.Join(scopes, " "),
	})
	tok.Header["kid"] = "dev"
	signed, err := tok.SignedString(key)
	if err != nil {
		return devFiles{}, fmt.Errorf("auth dev mode: sign development token: %w", err)
	}
	if err := writePrivate(dir, f.tokenPath, []byte(signed+"\n")); err != nil {
		return devFiles{}, err
	}
	return f, nil
}

func loadDevKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := private(path); err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("auth dev mode: %s is not a PEM PRIVATE KEY; delete it and a new key pair is generated", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("auth dev mode: %s: %w; delete it and a new key pair is generated", path, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth dev mode: %s holds a %T, not an RSA key; delete it and a new key pair is generated", path, k)
	}
	return rk, nil
}

func newDevKey(dir, path string) (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("auth dev mode: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("auth dev mode: encode key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("auth dev mode: encode public key: %w", err)
	}
	if err := writePrivate(dir, filepath.Join(dir, DevPublicKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
		return nil, err
	}
	if err := writePrivate(dir, path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, err
	}
	return key, nil
}

// private refuses a file others may read or write.
func private(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("auth dev mode: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("auth dev mode: %s has mode %04o, open to other users: run chmod 600 on it (or delete it to start over)", path, fi.Mode().Perm())
	}
	return nil
}

// writePrivate writes data to path with mode 0600, atomically (a temporary
// file in dir renamed over path).
func writePrivate(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("auth dev mode: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("auth dev mode: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("auth dev mode: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth dev mode: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("auth dev mode: %w", err)
	}
	return nil
}
