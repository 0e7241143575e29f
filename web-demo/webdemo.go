// Package webdemo serves chargeonce's development pages: the demo checkout at
// / (Handler) and the GraphQL playground, GraphiQL bundled from npm, at
// /playground (Playground). Both are one Vite + TypeScript build (web-demo/src)
// that `make web` writes into web-demo/dist, which is embedded here, so the
// pages need nothing from the internet. dist is not committed, only its
// .gitkeep, so that a fresh clone compiles without Node: until the demo is
// built, each page says how to build it.
package webdemo

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Handler serves the built demo, or a "not built" page when there is none.
func Handler() http.Handler {
	site, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return handler(site)
}

func handler(site fs.FS) http.Handler {
	if _, err := fs.Stat(site, "index.html"); err != nil {
		return http.HandlerFunc(notBuilt)
	}
	files := http.FileServerFS(site)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The playground's page is served, with its config, by Playground.
		if hidden(r.URL.Path) || path.Clean(r.URL.Path) == "/"+playgroundPage {
			http.NotFound(w, r)
			return
		}
		// Vite names every asset by its content hash, so an asset never
		// changes; index.html names the current ones and must be revalidated.
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

// hidden reports whether p names a dotfile, such as dist/.gitkeep.
func hidden(p string) bool {
	for _, part := range strings.Split(path.Clean(p), "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

const notBuiltPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>chargeonce: demo not built</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;line-height:1.5}code{background:#f3f3f3;padding:0 .25rem;border-radius:3px}</style>
</head>
<body>
<h1>The demo checkout is not built</h1>
<p>This server was compiled without the web demo. Run <code>make run</code>: it builds
<code>web-demo/</code> with npm (Node 20 or later) and starts the server, or run
<code>make web</code> and then restart the server.</p>
<p>Meanwhile the API is at <a href="/playground">/playground</a>.</p>
</body>
</html>
`

func notBuilt(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/index.html" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(notBuiltPage))
}
