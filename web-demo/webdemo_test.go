package webdemo

import (
	"net/http"
	"net/http/httptest"
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

// Handler must work with whatever dist holds: built or not, / answers.
func TestHandler_Embedded_AnswersAtRoot(t *testing.T) {
	t.Parallel()
	code := get(t, Handler(), "/").Code
	require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code)
}
