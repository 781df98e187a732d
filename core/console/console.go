// Package console is Queen's web console: a small single-page app (plain
// HTML, CSS and JavaScript embedded in the binary, no build step) that shows
// queues, partitions, consumer groups and dead letters and acts on them
// through the public HTTP API only — the same routes, validation and roles
// as any client.
//
// `queen serve` mounts Handler at /console/ beside the API. `queen console`
// serves the same Handler on localhost and forwards the API calls to a
// deployed stack through Proxy, which signs them (SigV4, for the IAM
// authorizer) or adds a bearer token (JWT authorizer); nothing new is
// exposed on AWS.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

// Path is where the console is served.
const Path = "/console/"

//go:embed assets
var assets embed.FS

// Options describe, for the console's header, where its API calls go.
type Options struct {
	// API is the base URL the calls are forwarded to; "" when the console
	// is served by the API's own server.
	API string
	// Auth says how forwarded calls are authenticated: AuthSigV4,
	// AuthBearer or AuthNone. Ignored when API is "".
	Auth string
}

// How Proxy authenticates the calls it forwards.
const (
	AuthSigV4  = "sigv4"
	AuthBearer = "bearer"
	AuthNone   = "none"
)

// meta is GET /console/meta.json: what the app shows about its API.
type meta struct {
	Mode string `json:"mode"` // "local" (served by queen serve) or "proxy" (queen console)
	API  string `json:"api,omitempty"`
	Auth string `json:"auth,omitempty"`
}

// Handler serves the console's files under Path, and Path without its
// trailing slash as a redirect to it.
func Handler(opt Options) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	m := meta{Mode: "local"}
	if opt.API != "" {
		m = meta{Mode: "proxy", API: opt.API, Auth: opt.Auth}
	}
	metaJSON, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"meta.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(metaJSON)
	})
	mux.Handle("GET "+Path, http.StripPrefix(Path, http.FileServerFS(sub)))
	mux.Handle("GET "+Path[:len(Path)-1], http.RedirectHandler(Path, http.StatusFound))
	return secured(mux)
}

// contentPolicy lets the app load only its own files and call only its
// own origin (the API, or the proxy in front of it).
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", contentPolicy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		// The files change with the binary, which sets no modification
		// time: always revalidate.
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
