package systest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// TestHugeBody_IsRefusedWithoutGrowingTheServer sends the 64 MB
// body, once with a Content-Length and once chunked, to the real server
// binary: each is refused with 413 in a short answer, and the server's
// resident memory stays about where it was.
func TestHugeBody_IsRefusedWithoutGrowingTheServer(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	p := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)})
	before := residentBytes(t, p.PID())
	huge := make([]byte, 64<<20)
	copy(huge, `{"query":"`)
	for i := len(`{"query":"`); i < len(huge); i++ {
		huge[i] = 'x'
	}
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(huge)
		if chunked {
			body = io.MultiReader(bytes.NewReader(huge)) // no length known: sent chunked
		}
		r := p.send(t, http.MethodPost, "/graphql", http.Header{"Content-Type": {"application/json"}}, body)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "chunked=%v: %s", chunked, r.body)
		require.Less(t, len(r.body), 4096)
		require.Contains(t, string(r.body), `"code":"REQUEST_TOO_LARGE"`)
		require.NotContains(t, string(r.body), "xxxxxxxx")
	}
	after := residentBytes(t, p.PID())
	t.Logf("server RSS %d MiB before, %d MiB after two 64 MiB bodies", before>>20, after>>20)
	require.Less(t, after-before, int64(16<<20), "the server did not take the body into memory")
}

// residentBytes is a process's resident set size.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
