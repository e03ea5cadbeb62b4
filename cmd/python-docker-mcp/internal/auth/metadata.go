package auth

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// WellKnownPath is where RFC 9728 protected resource metadata lives.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// metadata is the RFC 9728 document.
type metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// metadataPath is the RFC 9728 §3.1 location of u's metadata: the well-known
// path with u's path appended ("/mcp" → "/.well-known/oauth-protected-resource/mcp").
func metadataPath(u *url.URL) string {
	p := strings.Trim(u.Path, "/")
	if p == "" {
		return WellKnownPath
	}
	return path.Join(WellKnownPath, p)
}

// authorizationServers lists the issuer when it is an http(s) URL (an OAuth
// issuer identifier); a bare name such as the dev issuer is left out.
func authorizationServers(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil
	}
	return []string{issuer}
}

// MetadataPaths are the paths to mount MetadataHandler at: the RFC 9728
// location derived from the resource URL (the one the 401 challenge names,
// e.g. /.well-known/oauth-protected-resource/mcp) and the bare well-known
// path older clients try. Empty in mode off.
func (a *Authenticator) MetadataPaths() []string {
	if a.mode == ModeOff {
		return nil
	}
	if a.metaPath == WellKnownPath {
		return []string{WellKnownPath}
	}
	return []string{a.metaPath, WellKnownPath}
}

// MetadataURL is the absolute URL of the metadata the 401 challenge names
// ("" in mode off).
func (a *Authenticator) MetadataURL() string { return a.metaURL }

// MetadataHandler serves the RFC 9728 protected resource metadata: resource,
// authorization_servers (the issuer, when it is a URL), scopes_supported and
// bearer_methods_supported ["header"]. It needs no token; mount it outside
// Middleware at each of MetadataPaths. GET and HEAD get the JSON, OPTIONS 204
// (CORS preflight), anything else 405. In mode off it answers 404.
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.mode == ModeOff {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
		switch r.Method {
		case http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodHead:
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(a.meta)
	})
}
