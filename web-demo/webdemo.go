// Package webdemo serves chargeonce's demo checkout page at /.
package webdemo

import (
	"embed"
	"net/http"
)

//go:embed index.html
var files embed.FS

// Handler serves the demo page.
func Handler() http.Handler {
	return http.FileServerFS(files)
}
