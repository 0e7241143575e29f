package webdemo

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestHandler_Built_ServesPageAndAssets(t *testing.T) {
	t.Parallel()
	h := handler(fstest.MapFS{
		".gitkeep":            {},
		"index.html":          {Data: []byte("<title>checkout</title>")},
		"assets/index-ab1.js": {Data: []byte("console.log(1)")},
	})

	page := get(t, h, "/")
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), "checkout")
	require.Equal(t, "no-cache", page.Header().Get("Cache-Control"))

	asset := get(t, h, "/assets/index-ab1.js")
	require.Equal(t, http.StatusOK, asset.Code)
	require.Contains(t, asset.Header().Get("Cache-Control"), "immutable")

	require.Equal(t, http.StatusNotFound, get(t, h, "/.gitkeep").Code)
}

func TestHandler_NotBuilt_SaysHowToBuild(t *testing.T) {
	t.Parallel()
	h := handler(fstest.MapFS{".gitkeep": {}})

	page := get(t, h, "/")
	require.Equal(t, http.StatusServiceUnavailable, page.Code)
	require.Contains(t, page.Body.String(), "make run")

	require.Equal(t, http.StatusNotFound, get(t, h, "/assets/index.js").Code)
}

// The embedded dist, whichever it holds: the built page (make web, which
// make test runs first) is served at /, and without a build / says how to
// make one. Each case asserts its own answer.
func TestHandler_Embedded_ServesTheBuildOrSaysHowToMakeIt(t *testing.T) {
	t.Parallel()
	built, err := fs.ReadFile(dist, "dist/index.html")
	page := get(t, Handler(), "/")
	if err == nil {
		require.Equal(t, http.StatusOK, page.Code, "the built page")
		require.Equal(t, string(built), page.Body.String())
		return
	}
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, http.StatusServiceUnavailable, page.Code, "no build: the hint")
	require.Contains(t, page.Body.String(), "make run")
}

// A built playground page as Vite writes it: the config element, then the bundle.
const builtPlayground = `<!doctype html><html><head>
<script type="application/json" id="playground-config">{}</script>
<script type="module" crossorigin src="/assets/playground-x1.js"></script>
</head><body><div id="graphiql"></div></body></html>`

// playgroundConfigOf reads the config the page was served with.
func playgroundConfigOf(t *testing.T, body string) playgroundConfig {
	t.Helper()
	m := configSlot.FindStringSubmatchIndex(body)
	require.NotNil(t, m, "the page has its config element")
	start := m[3]
	end := strings.Index(body[start:], "</script>")
	var cfg playgroundConfig
	require.NoError(t, json.Unmarshal([]byte(body[start:start+end]), &cfg))
	return cfg
}

func TestPlayground_FillsInTheEndpointAndTheDemoKey(t *testing.T) {
	t.Parallel()
	h := playground(fstest.MapFS{playgroundPage: {Data: []byte(builtPlayground)}}, "/graphql", "demo-key")

	page := get(t, h, "/playground")
	require.Equal(t, http.StatusOK, page.Code)
	require.Equal(t, "text/html; charset=utf-8", page.Header().Get("Content-Type"))
	require.Equal(t, "no-store", page.Header().Get("Cache-Control"), "the page holds an API key")
	require.Equal(t, playgroundConfig{Endpoint: "/graphql", Headers: map[string]string{"Authorization": "Bearer demo-key"}},
		playgroundConfigOf(t, page.Body.String()))
	require.Contains(t, page.Body.String(), `src="/assets/playground-x1.js"`)

	csp := page.Header().Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self';")
	require.Contains(t, csp, "connect-src 'self';")
	require.NotContains(t, csp, "https:", "nothing may load from elsewhere")

	head := httptest.NewRecorder()
	h.ServeHTTP(head, httptest.NewRequest(http.MethodHead, "/playground", nil))
	require.Equal(t, http.StatusOK, head.Code)
	require.Zero(t, head.Body.Len())
}

func TestPlayground_WithoutAKey_FillsInNoHeader(t *testing.T) {
	t.Parallel()
	h := playground(fstest.MapFS{playgroundPage: {Data: []byte(builtPlayground)}}, "/graphql", "")
	cfg := playgroundConfigOf(t, get(t, h, "/playground").Body.String())
	require.Equal(t, "/graphql", cfg.Endpoint)
	require.Empty(t, cfg.Headers)
}

func TestPlayground_ConfigCannotCloseItsScriptElement(t *testing.T) {
	t.Parallel()
	hostile := `k</script><script>alert(1)</script><!--`
	h := playground(fstest.MapFS{playgroundPage: {Data: []byte(builtPlayground)}}, "/graphql?x=</script>", hostile)

	body := get(t, h, "/playground").Body.String()
	require.NotContains(t, body, "<script>alert")
	require.NotContains(t, body, "<!--")
	require.Equal(t, 1, strings.Count(body, `id="playground-config"`))
	cfg := playgroundConfigOf(t, body)
	require.Equal(t, "Bearer "+hostile, cfg.Headers["Authorization"], "the value survives, escaped")
	require.Equal(t, "/graphql?x=</script>", cfg.Endpoint)
}

func TestPlayground_EndpointOnAnotherOrigin_IsAllowedToConnect(t *testing.T) {
	t.Parallel()
	h := playground(fstest.MapFS{playgroundPage: {Data: []byte(builtPlayground)}}, "https://api.example.com/graphql", "")
	require.Contains(t, get(t, h, "/playground").Header().Get("Content-Security-Policy"), "connect-src 'self' https://api.example.com;")
}

func TestPlayground_NotBuilt_SaysHowToBuildAndHowToCallTheAPI(t *testing.T) {
	t.Parallel()
	h := playground(fstest.MapFS{".gitkeep": {}}, "/graphql", "demo-key")
	page := get(t, h, "/playground")
	require.Equal(t, http.StatusOK, page.Code)
	require.Equal(t, "no-store", page.Header().Get("Cache-Control"))
	require.Contains(t, page.Body.String(), "make web")
	require.Contains(t, page.Body.String(), "Authorization: Bearer demo-key")
	require.Contains(t, page.Body.String(), "http://example.com/graphql", "the curl command names this server")
}

func TestPlayground_PageWithoutConfigElement_Fails(t *testing.T) {
	t.Parallel()
	h := playground(fstest.MapFS{playgroundPage: {Data: []byte("<html></html>")}}, "/graphql", "demo-key")
	page := get(t, h, "/playground")
	require.Equal(t, http.StatusInternalServerError, page.Code)
	require.NotContains(t, page.Body.String(), "demo-key")
}

func TestHandler_DoesNotServeThePlaygroundPageWithoutItsConfig(t *testing.T) {
	t.Parallel()
	h := handler(fstest.MapFS{"index.html": {Data: []byte("<title>checkout</title>")}, playgroundPage: {Data: []byte(builtPlayground)}})
	require.Equal(t, http.StatusNotFound, get(t, h, "/playground.html").Code)
	require.Equal(t, http.StatusNotFound, get(t, h, "/./playground.html").Code)
}

// builtSite is the embedded dist, or a skip when the demo is not built (a
// fresh clone; `make web` or `npm run build` builds it).
func builtSite(t *testing.T) fs.FS {
	t.Helper()
	site, err := fs.Sub(dist, "dist")
	require.NoError(t, err)
	if _, err := fs.Stat(site, playgroundPage); err != nil {
		t.Skip("web-demo/dist has no playground.html: run `make web` (or npm run build in web-demo) to test the built playground")
	}
	return site
}

// assetRef matches what a built page loads: scripts, styles, preloads.
var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

func TestPlayground_Embedded_ServesThePageAndEveryAssetItLoads(t *testing.T) {
	t.Parallel()
	builtSite(t)
	page := get(t, Playground("/graphql", "demo-key"), "/playground")
	require.Equal(t, http.StatusOK, page.Code)
	body := page.Body.String()
	require.Equal(t, "Bearer demo-key", playgroundConfigOf(t, body).Headers["Authorization"])

	assets := Handler()
	var loaded int
	for _, m := range assetRef.FindAllStringSubmatch(body, -1) {
		ref := m[1]
		if strings.HasPrefix(ref, "data:") {
			continue
		}
		require.True(t, strings.HasPrefix(ref, "/assets/"), "the page loads %q: only the server's own assets", ref)
		require.Equal(t, http.StatusOK, get(t, assets, ref).Code, ref)
		loaded++
	}
	require.NotZero(t, loaded, "the page loads its bundle")
}

// cdnHosts are where a page would fetch GraphiQL, React or fonts from, were
// they not bundled.
var cdnHosts = regexp.MustCompile(`(?i)(unpkg\.com|jsdelivr\.net|esm\.sh|cdnjs\.cloudflare\.com|fonts\.googleapis\.com|fonts\.gstatic\.com|cdn\.skypack\.dev|esm\.run)`)

// externalLoad matches an http(s) URL where a browser would load it: a
// script or style reference, a CSS url() or @import, a dynamic import, a worker.
var externalLoad = regexp.MustCompile(`(?i)(?:src=|href=|url\(|@import\s*|import\(|new Worker\()\s*["'\x60]?https?://`)

func TestBuiltDemo_ReferencesNothingOnAnotherHost(t *testing.T) {
	t.Parallel()
	site := builtSite(t)
	var scanned int
	require.NoError(t, fs.WalkDir(site, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch path.Ext(p) {
		case ".html", ".js", ".css":
		default:
			return nil
		}
		b, err := fs.ReadFile(site, p)
		require.NoError(t, err)
		scanned++
		if m := cdnHosts.Find(b); m != nil {
			t.Errorf("%s names a CDN: %s", p, m)
		}
		if loc := externalLoad.FindIndex(b); loc != nil {
			t.Errorf("%s loads from another host: %s", p, b[loc[0]:min(loc[1]+60, len(b))])
		}
		return nil
	}))
	require.Greater(t, scanned, 3)
}
