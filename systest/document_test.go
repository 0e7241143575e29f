package systest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
	"chargeonce/graph"
	"chargeonce/internal/apiclient"
)

// TestHostileDocuments_CostAtMostTenCharges sends the documents
// (64 KiB of one repeated field over POST, its 88 KB GET), and the others
// that cost seconds of CPU before the document bounds, to the real server
// binary, without a key, as a stranger does: each is refused with
// COMPLEXITY_LIMIT_EXCEEDED, and costs the server at most 10 times the CPU
// of a normal chargeCard, read from /proc/PID/stat. A URL's query over
// MAX_BODY_BYTES is 414, and a URL past the header limit is refused by
// the server (431) without being read.
func TestHostileDocuments_CostAtMostTenCharges(t *testing.T) {
	needsProcesses(t)
	t.Parallel()
	// Rate limits high: what is measured is each request's own cost.
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.NewDatabase(t),
		"RATE_LIMIT_IP": "100000", "RATE_LIMIT_IP_BURST": "100000",
		"RATE_LIMIT_MERCHANT": "100000", "RATE_LIMIT_MERCHANT_BURST": "100000"})
	const n = 50 // CPU time counts in 10 ms ticks: enough requests to see them
	maxBody := graph.MaxBodyBytesDefault

	// A normal chargeCard, fresh each time: the claim, the simulated
	// provider (in the server's process) and the finalize.
	s.chargeCard(t, apiclient.DemoAPIKey, newKey(), visa(1999)) // warm: the document is validated once
	before := cpuTicks(t, s)
	for range n {
		require.Equal(t, apiclient.Succeeded, s.chargeCard(t, apiclient.DemoAPIKey, newKey(), visa(1999)).Status)
	}
	charge := float64(cpuTicks(t, s)-before) / n
	t.Logf("a chargeCard: %.2f ticks of server CPU", charge)
	require.Positive(t, charge)

	for _, d := range hostileDocuments() {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			before := cpuTicks(t, s)
			for i := range n {
				// Each document its own, as an attacker would make it, so
				// that no request meets another in the query cache.
				query := fmt.Sprintf("#%08d\n", i) + d.query
				var r rawResponse
				if method == http.MethodPost {
					body, err := json.Marshal(map[string]string{"query": query})
					require.NoError(t, err)
					require.LessOrEqual(t, len(body), maxBody, d.name)
					r = s.send(t, method, "/graphql", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body))
				} else {
					q := "query=" + url.QueryEscape(fitURL(query, maxBody))
					require.LessOrEqual(t, len(q), maxBody, d.name)
					r = s.send(t, method, "/graphql?"+q, nil, nil)
				}
				require.Equal(t, http.StatusOK, r.status, "%s over %s: %s", d.name, method, r.body)
				g := r.gql(t)
				require.Len(t, g.Errors, 1, "%s over %s: %s", d.name, method, r.body)
				require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", g.Errors[0].Extensions["code"], "%s over %s: %s", d.name, method, r.body)
				require.Less(t, len(r.body), 512, "a short answer that quotes nothing")
			}
			cost := float64(cpuTicks(t, s)-before) / n
			t.Logf("%s over %s: %.2f ticks, %.1f charges", d.name, method, cost, cost/charge)
			require.LessOrEqual(t, cost, 10*charge, "%s over %s costs more than 10 charges", d.name, method)
		}
	}

	// The GET of 88 KB: over MAX_BODY_BYTES, refused by the edge.
	long := s.send(t, http.MethodGet, "/graphql?query="+strings.Repeat("x", 88_000), nil, nil)
	require.Equal(t, http.StatusRequestURITooLong, long.status, "%s", long.body)
	require.Equal(t, "REQUEST_TOO_LARGE", long.gql(t).Errors[0].Extensions["code"])
	require.Contains(t, long.gql(t).Errors[0].Message, "POST")

	// 900 KB, which was accepted: past the header limit, the server
	// answers 431 having read little more than the limit.
	readBefore := bytesRead(t, s.PID())
	status := sendLongURL(t, s.URL, 900_000)
	read := bytesRead(t, s.PID()) - readBefore
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status)
	t.Logf("the server read %d bytes of a 900 KB request line (header limit %d)", read, graph.MaxHeaderBytes(int64(maxBody)))
	require.Less(t, read, int64(300_000), "the server did not read the URL")
}

type namedDocument struct{ name, query string }

// hostileDocuments are the document and the others that cost the
// most before the document bounds (graph's BenchmarkDocument has them
// all), each as large as a body of MAX_BODY_BYTES holds.
func hostileDocuments() []namedDocument {
	// Room for the nonce and the JSON around the document.
	budget := graph.MaxBodyBytesDefault - 64
	escaped := func(s string) int { b, _ := json.Marshal(s); return len(b) - 2 }
	fill := func(open string, part func(i int) string, close string) string {
		var b strings.Builder
		b.WriteString(open)
		size := escaped(open + close)
		for i := 0; size+escaped(part(i)) <= budget; i++ {
			size += escaped(part(i))
			b.WriteString(part(i))
		}
		return b.String() + close
	}
	return []namedDocument{
		{"repeated __typename", fill("{", func(int) string { return " __typename" }, " }")},
		{"repeated fields, conflicting arguments", fill("{", func(i int) string { return fmt.Sprintf(" __type(name: %q) { name }", "T"+strconv.Itoa(i)) }, " }")},
		{"deep fragments", fill("{ ...F0 }", func(i int) string {
			return fmt.Sprintf(" fragment F%d on Query { __typename ...F%d }", i, i+1)
		}, " fragment Fz on Query { __typename }")},
		{"many inline fragments", fill("{", func(int) string { return " ... on Query { __typename }" }, " }")},
	}
}

// fitURL cuts a document to what a URL's query of maxBody bytes holds
// once escaped: the most a GET may carry. The cut document may not parse;
// it is refused for its size before it could.
func fitURL(query string, maxBody int) string {
	budget := maxBody - len("query=")
	for len(url.QueryEscape(query)) > budget {
		query = query[:len(query)-(len(url.QueryEscape(query))-budget)/3-1]
	}
	return query
}

// cpuTicks is s's CPU time, user and system, in clock ticks.
func cpuTicks(t *testing.T, s *server) int64 {
	t.Helper()
	ticks, err := s.CPUTicks()
	require.NoError(t, err)
	return ticks
}

// bytesRead is what a process has read (rchar of /proc/PID/io): files and
// sockets alike.
func bytesRead(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no rchar in /proc/PID/io")
	return 0
}

// sendLongURL sends GET /graphql with a query of size bytes over a raw
// connection, as an attacker writes it, and returns the status the server
// answers, which it may do before the request is written whole.
func sendLongURL(t *testing.T, base string, size int) int {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	go func() {
		// The write fails once the server has answered and closed.
		_, _ = conn.Write([]byte("GET /graphql?query=" + strings.Repeat("x", size) + " HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n"))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
