package webdemo

import (
	"bytes"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
)

// playgroundPage is the playground's page in dist, built from
// web-demo/playground.html. Its scripts, styles and Monaco's workers are the
// hashed files under /assets/ that Handler serves.
const playgroundPage = "playground.html"

// configSlot matches the element of playground.html that holds the page's
// config, so that the server can fill it in.
var configSlot = regexp.MustCompile(`(<script type="application/json" id="playground-config">)[^<]*(</script>)`)

// Playground serves the GraphQL playground: GraphiQL, bundled from npm by the
// demo's build and embedded with it, so that it needs no CDN and works
// offline. endpoint is the GraphQL endpoint, a path on this server such as
// "/graphql". When demoKey is not empty, the headers editor starts with
// "Authorization: Bearer <demoKey>": only development may pass one.
//
// Mount it at GET /playground; its assets are under /assets/, which Handler
// serves. Until the demo is built, it answers with a page that says how to
// build it and how to call the API with curl.
func Playground(endpoint, demoKey string) http.Handler {
	site, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return playground(site, endpoint, demoKey)
}

// playgroundConfig is what the page reads from its config element.
type playgroundConfig struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
}

func playground(site fs.FS, endpoint, demoKey string) http.Handler {
	cfg := playgroundConfig{Endpoint: endpoint, Headers: map[string]string{}}
	if demoKey != "" {
		cfg.Headers["Authorization"] = "Bearer " + demoKey
	}
	raw, err := fs.ReadFile(site, playgroundPage)
	if err != nil {
		return playgroundNotBuilt(cfg)
	}
	// encoding/json escapes <, > and & (as \u003c…), so no value can close
	// the script element or open a comment: the JSON stays data.
	js, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // strings only: cannot happen
	}
	if !configSlot.Match(raw) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the built playground has no config element: rebuild web-demo (make web)", http.StatusInternalServerError)
		})
	}
	page := configSlot.ReplaceAllFunc(raw, func(m []byte) []byte {
		sub := configSlot.FindSubmatch(m)
		return bytes.Join([][]byte{sub[1], js, sub[2]}, nil)
	})
	csp := playgroundCSP(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		// The page holds an API key: neither caches nor other sites may keep it.
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(page)
	})
}

// playgroundCSP allows this server's own scripts, styles, fonts and workers
// and nothing from elsewhere, so that a CDN reference would fail loudly.
// GraphiQL's editor (Monaco) sets inline styles, and its fonts and icons are
// data: URLs. An endpoint on another origin is allowed as a fetch target.
func playgroundCSP(endpoint string) string {
	connect := "'self'"
	if u, err := url.Parse(endpoint); err == nil && u.Scheme != "" && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
		"font-src 'self' data:; connect-src " + connect + "; worker-src 'self'; object-src 'none'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

var playgroundNotBuiltPage = template.Must(template.New("playground").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>chargeonce: playground not built</title>
<style>body{font-family:system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;line-height:1.5}code,pre{background:#f3f3f3;border-radius:3px}code{padding:0 .25rem}pre{padding:.75rem;overflow-x:auto}</style>
</head>
<body>
<h1>The GraphQL playground is not built</h1>
<p>This server was compiled without the web demo, which bundles the playground.
Run <code>make run</code>, or <code>make web</code> and then restart the server.</p>
<p>Meanwhile, the API answers at <code>{{.Endpoint}}</code>:</p>
<pre>curl -s http://{{.Host}}{{.Endpoint}} \
{{- range $k, $v := .Headers}}
  -H '{{$k}}: {{$v}}' \
{{- end}}
  -H 'Content-Type: application/json' \
  -d '{"query":"{ __typename }"}'</pre>
</body>
</html>
`))

// playgroundNotBuilt answers 200 with curl instructions: the page is of use
// on its own, and the development server's /playground keeps answering.
func playgroundNotBuilt(cfg playgroundConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var page bytes.Buffer
		data := struct {
			playgroundConfig
			Host string
		}{cfg, r.Host}
		if err := playgroundNotBuiltPage.Execute(&page, data); err != nil {
			http.Error(w, "playground: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(page.Bytes())
	})
}
