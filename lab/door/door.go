// Package door measures what a stranger can make a chargeonce server do
// through the door a checkout page reaches: the attacks of the public door's
// threat model (SECURITY.md), made as an attacker makes them, against a
// binary it starts on a PostgreSQL of its own, each row on a fresh server
// and database. It measures, it does not judge: every row is a figure (CPU
// seconds, how many declines reached the provider, how many good cards were
// refused, how long a revoked key kept serving), so that two binaries, one
// before a change and one after, can be run and compared (`lab door
// -binary PATH`). The tests that hold the figures to their bounds are
// systest's.
//
// Loopback is all of 127.0.0.0/8: a client bound to 127.0.0.N is, to the
// server, another address.
package door

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"chargeonce/db/localpg"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/proc"
)

// Finding is what one row's attack made the server do.
type Finding struct {
	Row    int
	Attack string
	Result string
}

// Config is where the attacks run.
type Config struct {
	Binary  string // the chargeonce binary
	AdminDB string // a PostgreSQL URL where databases may be created
	DataDir string // scratch space (the embedded event broker's)
	Rows    map[int]bool
	Logf    func(format string, args ...any)
}

// Run makes every attack cfg.Rows names (all when empty) and returns what
// each made the server do.
func Run(ctx context.Context, cfg Config) ([]Finding, error) {
	var out []Finding
	for _, r := range rows {
		if len(cfg.Rows) > 0 && !cfg.Rows[r.row] {
			continue
		}
		cfg.Logf("row %d: %s", r.row, r.attack)
		l := &lab{cfg: cfg}
		result, err := r.run(ctx, l)
		l.close()
		if err != nil {
			return out, fmt.Errorf("row %d: %w", r.row, err)
		}
		out = append(out, Finding{Row: r.row, Attack: r.attack, Result: result})
	}
	return out, nil
}

// Markdown is findings as a table.
func Markdown(findings []Finding) string {
	var b strings.Builder
	b.WriteString("| # | what one stranger did | what the server did |\n|---|---|---|\n")
	for _, f := range findings {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", f.Row, f.Attack, f.Result)
	}
	return b.String()
}

var rows = []struct {
	row    int
	attack string
	run    func(context.Context, *lab) (string, error)
}{
	{1, "one keyless `POST /graphql` of 64 KiB: `{__typename __typename …}`", hostilePost},
	{2, "the same as `GET /graphql?query=…`, of 70 KB, 88 KB and 900 KB", hostileGet},
	{3, "30 declined cards at once, from one address, on 30 sessions", concurrentDeclines},
	{4, "declines rotated over 20 addresses, each inside its own allowance, while 5 shoppers pay good cards", rotatingDeclines},
	{5, "15 requests with the publishable key (a 5/s merchant limit), then the merchant's `createCheckoutSession`", publicBudget},
	{6, "one websocket with the publishable key, its own session waiting for 3-D Secure, 1,000 `subscribe` messages", subscribeFlood},
	{7, "a secret key revoked while a websocket with it is open", revokedSocket},
	{8, "60 keyless websocket upgrades, then 300 authenticated sockets, from one address", socketFlood},
}

// lab is one row's server and its clients.
type lab struct {
	cfg    Config
	dbURL  string
	dbName string
	srv    *proc.Process
	url    string
	env    map[string]string
}

// start starts the binary on a database of its own with env.
func (l *lab) start(ctx context.Context, env map[string]string) error {
	l.dbName = "door_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	var err error
	if l.dbURL, err = localpg.CreateDatabase(ctx, l.cfg.AdminDB, l.dbName); err != nil {
		return err
	}
	dataDir, err := os.MkdirTemp(l.cfg.DataDir, "door-")
	if err != nil {
		return err
	}
	l.env = map[string]string{"APP_ENV": "development", "DATABASE_URL": l.dbURL, "PORT": "0", "EMBEDDED_NATS_PORT": "0",
		"DATA_DIR": dataDir, "SIM_SLOW_DELAY": "0"}
	for k, v := range env {
		l.env[k] = v
	}
	if l.srv, err = proc.Start(l.cfg.Binary, proc.Options{Args: []string{"serve"}, Env: l.env}); err != nil {
		return err
	}
	addrs, err := l.srv.Listening(ctx, time.Minute)
	if err != nil {
		return err
	}
	l.url = addrs.Loopback()
	return l.srv.Ready(ctx, 30*time.Second, l.client("127.0.0.1", "").Ready)
}

func (l *lab) close() {
	if l.srv != nil {
		_ = l.srv.Stop(10 * time.Second)
	}
	if l.dbName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, l.cfg.AdminDB); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+l.dbName+" WITH (FORCE)")
			conn.Close(ctx)
		}
	}
	if dir := l.env["DATA_DIR"]; dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// command runs one of the binary's operator commands and returns what it
// printed.
func (l *lab) command(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.cfg.Binary, args...)
	cmd.Env = os.Environ()
	for k, v := range l.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chargeonce %v: %w: %s", args, err, stderr.String())
	}
	return stdout.String(), nil
}

// from is an HTTP client whose connections leave from ip.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

func (l *lab) client(ip, apiKey string) *apiclient.Client {
	return apiclient.New(l.url, apiKey, from(ip))
}

const (
	secretKey      = apiclient.DemoAPIKey
	publishableKey = "co_pk_demo"
)

// session opens a session of the demo merchant and returns its secret.
func (l *lab) session(ctx context.Context, in apiclient.CheckoutSessionInput) (string, error) {
	if in.Currency == "" {
		in.Currency = "USD"
	}
	s, err := l.client("127.0.0.1", secretKey).CreateCheckoutSession(ctx, uuid.NewString(), in)
	if err != nil {
		return "", err
	}
	return *s.ClientSecret, nil
}

// pay pays the session of secret with card from page; it returns the key
// and the status, or the error's code.
func pay(ctx context.Context, page *apiclient.Client, secret, card string) (string, string) {
	key := uuid.NewString()
	res, err := page.ChargeCard(ctx, key, apiclient.ChargeCardInput{PaymentMethod: card, CheckoutSession: &secret})
	if err != nil {
		if code := apiclient.Code(err); code != "" {
			return key, code
		}
		return key, err.Error()
	}
	return key, res.Status
}

// cpu is the server's CPU time so far, user and system (clock ticks of
// 10 ms).
func (l *lab) cpu() time.Duration {
	ticks, _ := l.srv.CPUTicks() // 0 for a server gone: its row says so
	return time.Duration(ticks) * 10 * time.Millisecond
}

// send sends one raw request from ip and returns its status and body.
func (l *lab) send(ctx context.Context, ip, method, target string, header http.Header, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, l.url+target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if header != nil {
		req.Header = header
	}
	resp, err := from(ip).Do(req)
	if err != nil {
		return 0, nil, quiet(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// quiet says what became of a request that got no answer, without the URL
// an HTTP client's error quotes (a hostile document's, here).
func quiet(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("no answer within the client's 2 minutes")
	}
	return errors.New("the connection failed")
}

// code is the first error's extensions.code of a GraphQL answer.
func code(body []byte) string {
	var a struct {
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.Errors) == 0 {
		return "-"
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

func typenames(n int) string {
	return "{" + strings.Repeat("__typename ", n) + "}"
}

func hostilePost(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, nil); err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]string{"query": typenames(5900)})
	before := l.cpu()
	status, answer, err := l.send(ctx, "127.0.0.2", http.MethodPost, "/graphql", http.Header{"Content-Type": {"application/json"}}, body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d `%s`, %.2f CPU-seconds of the server", status, code(answer), (l.cpu() - before).Seconds()), nil
}

func hostileGet(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, nil); err != nil {
		return "", err
	}
	get := func(n int) (int, string, time.Duration, error) {
		before := l.cpu()
		status, answer, err := l.send(ctx, "127.0.0.2", http.MethodGet, "/graphql?query="+url.QueryEscape(typenames(n)), nil, nil)
		return status, code(answer), l.cpu() - before, err
	}
	var parts []string
	for _, size := range []struct {
		name string
		n    int
	}{{"70 KB", 6400}, {"88 KB", 8000}, {"900 KB", 82000}} {
		status, c, cpu, err := get(size.n)
		answer := fmt.Sprintf("%d `%s`", status, c)
		if err != nil {
			answer = err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s: %s, %.2f CPU-seconds", size.name, answer, cpu.Seconds()))
	}
	return strings.Join(parts, "; "), nil
}

// providerReached counts the charges the provider holds for keys.
func (l *lab) providerReached(ctx context.Context, keys []string) (int, error) {
	n := 0
	for _, k := range keys {
		charges, err := l.client("127.0.0.1", secretKey).ProviderCharges(ctx, "", k)
		if err != nil {
			return 0, err
		}
		n += len(charges)
	}
	return n, nil
}

func concurrentDeclines(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, nil); err != nil {
		return "", err
	}
	secrets := make([]string, 30)
	for i := range secrets {
		var err error
		if secrets[i], err = l.session(ctx, apiclient.CheckoutSessionInput{Amount: 100 + i}); err != nil {
			return "", err
		}
	}
	page := l.client("127.0.0.2", publishableKey)
	keys := make([]string, len(secrets))
	outcomes := &tally{}
	var wg sync.WaitGroup
	for i, s := range secrets {
		wg.Go(func() {
			var outcome string
			keys[i], outcome = pay(ctx, page, s, "pm_card_chargeDeclined")
			outcomes.add(outcome)
		})
	}
	wg.Wait()
	reached, err := l.providerReached(ctx, keys)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d reached the provider (answers: %s)", reached, outcomes), nil
}

func rotatingDeclines(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, map[string]string{"SESSION_MAX_ATTEMPTS": "100"}); err != nil {
		return "", err
	}
	const attackers, declinesEach, shoppers, rounds = 20, 8, 5, 4
	stolen := make([]string, attackers)
	for i := range stolen {
		var err error
		if stolen[i], err = l.session(ctx, apiclient.CheckoutSessionInput{Amount: 4200 + i}); err != nil {
			return "", err
		}
	}
	carts := make([]string, shoppers*rounds)
	for i := range carts {
		var err error
		if carts[i], err = l.session(ctx, apiclient.CheckoutSessionInput{Amount: 1000 + i}); err != nil {
			return "", err
		}
	}
	declined := &tally{}
	var attacks sync.WaitGroup
	for i := range attackers {
		page := l.client(fmt.Sprintf("127.0.1.%d", i+1), publishableKey)
		attacks.Go(func() {
			for range declinesEach {
				_, outcome := pay(ctx, page, stolen[i], "pm_card_chargeDeclined")
				declined.add(outcome)
			}
		})
	}
	paid := &tally{}
	var shopping sync.WaitGroup
	for round := range rounds {
		for i := range shoppers {
			page := l.client(fmt.Sprintf("127.0.2.%d", i+1), publishableKey)
			shopping.Go(func() {
				_, outcome := pay(ctx, page, carts[round*shoppers+i], "pm_card_visa")
				paid.add(outcome)
			})
		}
		if round == 1 {
			attacks.Wait()
		}
	}
	shopping.Wait()
	refused := 100 * float64(paid.count("RATE_LIMITED")) / float64(shoppers*rounds)
	return fmt.Sprintf("%.0f%% of the shoppers' good cards refused `RATE_LIMITED` (shoppers: %s; attack: %s)", refused, paid, declined), nil
}

func publicBudget(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, map[string]string{"RATE_LIMIT_MERCHANT": "5", "RATE_LIMIT_MERCHANT_BURST": "5"}); err != nil {
		return "", err
	}
	secret, err := l.session(ctx, apiclient.CheckoutSessionInput{Amount: 500})
	if err != nil {
		return "", err
	}
	public := &tally{}
	for i := range 15 {
		_, err := l.client(fmt.Sprintf("127.0.0.%d", 2+i%3), publishableKey).SessionChargeStatus(ctx, uuid.NewString(), secret)
		public.add(cmpOr(apiclient.Code(err), "served"))
	}
	_, err = l.client("127.0.0.1", secretKey).CreateCheckoutSession(ctx, uuid.NewString(), apiclient.CheckoutSessionInput{Amount: 600, Currency: "USD"})
	return fmt.Sprintf("the merchant's `createCheckoutSession`: %s (the 15 public requests: %s)", cmpOr(apiclient.Code(err), "served"), public), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ws is a graphql-transport-ws connection.
type ws struct{ conn *websocket.Conn }

// dial opens a websocket to the server from ip with header; status is
// the HTTP status of a refused upgrade (101 when it upgraded).
func (l *lab) dial(ctx context.Context, ip string, header http.Header) (*ws, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(l.url, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header, HTTPClient: from(ip)})
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode, nil
		}
		return nil, 0, err
	}
	c.SetReadLimit(1 << 20)
	return &ws{conn: c}, http.StatusSwitchingProtocols, nil
}

func (w *ws) send(ctx context.Context, v any) error { return wsjson.Write(ctx, w.conn, v) }

// next reads the next frame that is not a ping (which it answers).
func (w *ws) next(ctx context.Context) (map[string]any, error) {
	for {
		var m map[string]any
		if err := wsjson.Read(ctx, w.conn, &m); err != nil {
			return nil, err
		}
		if m["type"] == "ping" {
			_ = w.send(ctx, map[string]any{"type": "pong"})
			continue
		}
		return m, nil
	}
}

// init sends connection_init with apiKey and waits for the ack.
func (w *ws) init(ctx context.Context, apiKey string) error {
	payload := map[string]any{}
	if apiKey != "" {
		payload["authorization"] = "Bearer " + apiKey
	}
	if err := w.send(ctx, map[string]any{"type": "connection_init", "payload": payload}); err != nil {
		return err
	}
	m, err := w.next(ctx)
	if err != nil {
		return err
	}
	if m["type"] != "connection_ack" {
		return fmt.Errorf("connection_init answered %v", m)
	}
	return nil
}

const chargeUpdated = `subscription($key: String!, $session: String) { chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { status } }`

func (w *ws) subscribe(ctx context.Context, id, key string, session *string) error {
	return w.send(ctx, map[string]any{"type": "subscribe", "id": id,
		"payload": map[string]any{"query": chargeUpdated, "variables": map[string]any{"key": key, "session": session}}})
}

// firstAnswer is what a subscription's first frame says: its status, an
// error's code, or how the socket ended.
func firstAnswer(m map[string]any, err error) string {
	if err != nil {
		if s := websocket.CloseStatus(err); s != -1 {
			return "socket closed " + strconv.Itoa(int(s))
		}
		return "socket broken"
	}
	switch m["type"] {
	case "next":
		p, _ := json.Marshal(m["payload"])
		if c := code(p); c != "-" {
			return c
		}
		return "served"
	case "error":
		p, _ := json.Marshal(map[string]any{"errors": m["payload"]})
		return code(p)
	}
	return fmt.Sprint(m["type"])
}

// waiting makes an attempt that waits for the shopper (3-D Secure) on a
// session of its own, paid from ip; it returns the key and the session's
// secret.
func (l *lab) waiting(ctx context.Context, ip string) (string, string, error) {
	origin := "https://shop.example"
	secret, err := l.session(ctx, apiclient.CheckoutSessionInput{Amount: 900, ReturnUrl: new(origin + "/return")})
	if err != nil {
		return "", "", err
	}
	key, status := pay(ctx, l.client(ip, publishableKey), secret, "pm_card_authenticationRequired")
	if status != apiclient.Processing {
		return "", "", fmt.Errorf("an attempt that waits for the shopper: %s", status)
	}
	return key, secret, nil
}

// transactions is how many transactions the row's database has committed.
func (l *lab) transactions(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, l.cfg.AdminDB)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", l.dbName).Scan(&n)
	return n, err
}

func subscribeFlood(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, map[string]string{"LIVE_POLL_INTERVAL": "1s"}); err != nil {
		return "", err
	}
	if _, err := l.command(ctx, "merchant", "origins", "add", "demo", "https://shop.example"); err != nil {
		return "", err
	}
	key, secret, err := l.waiting(ctx, "127.0.0.2")
	if err != nil {
		return "", err
	}
	shopperKey, shopperSecret, err := l.waiting(ctx, "127.0.0.3")
	if err != nil {
		return "", err
	}
	// The database at rest, with nobody watching, for 10 s.
	idle, err := l.transactionsOver(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	w, _, err := l.dial(ctx, "127.0.0.2", nil)
	if err != nil || w == nil {
		return "", fmt.Errorf("the attacker's websocket: %v", err)
	}
	defer w.conn.CloseNow()
	if err := w.init(ctx, publishableKey); err != nil {
		return "", err
	}
	answers := &tally{}
	var read sync.WaitGroup
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var firstFrames atomic.Int32
	read.Go(func() {
		seen := map[any]bool{}
		for {
			m, err := w.next(readCtx)
			if err != nil {
				return
			}
			if id := m["id"]; !seen[id] {
				seen[id] = true
				firstFrames.Add(1)
				answers.add(firstAnswer(m, nil))
			}
		}
	})
	for i := range 1000 {
		if err := w.subscribe(ctx, strconv.Itoa(i), key, &secret); err != nil {
			answers.add("socket closed")
			break
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for firstFrames.Load() < 1000 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	busy, err := l.transactionsOver(ctx, 10*time.Second)
	if err != nil {
		return "", err
	}
	shopper, _, err := l.dial(ctx, "127.0.0.3", nil)
	if err != nil || shopper == nil {
		return "", fmt.Errorf("the shopper's websocket: %v", err)
	}
	defer shopper.conn.CloseNow()
	if err := shopper.init(ctx, publishableKey); err != nil {
		return "", err
	}
	if err := shopper.subscribe(ctx, "s", shopperKey, &shopperSecret); err != nil {
		return "", err
	}
	shopperCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := firstAnswer(shopper.next(shopperCtx))
	stopReading()
	return fmt.Sprintf("the attacker's subscribes: %s; another shopper's subscription: %s; the database: %d transactions in 10 s at rest, %d while watched",
		answers, got, idle, busy), nil
}

// transactionsOver is how many transactions the database commits in d.
func (l *lab) transactionsOver(ctx context.Context, d time.Duration) (int64, error) {
	before, err := l.transactions(ctx)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	after, err := l.transactions(ctx)
	return after - before, err
}

func revokedSocket(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, nil); err != nil {
		return "", err
	}
	out, err := l.command(ctx, "apikey", "create", "acme")
	if err != nil {
		return "", err
	}
	fields := strings.Fields(out)
	key := fields[len(fields)-1]
	acme := l.client("127.0.0.1", key)
	charged := make([]string, 2)
	for i := range charged {
		charged[i] = uuid.NewString()
		if _, err := acme.ChargeCard(ctx, charged[i], apiclient.ChargeCardInput{Amount: new(1500 + i), Currency: new("USD"), PaymentMethod: "pm_card_visa"}); err != nil {
			return "", err
		}
	}
	w, _, err := l.dial(ctx, "127.0.0.2", http.Header{"Authorization": {"Bearer " + key}})
	if err != nil || w == nil {
		return "", fmt.Errorf("websocket: %v", err)
	}
	defer w.conn.CloseNow()
	if err := w.init(ctx, ""); err != nil {
		return "", err
	}
	if err := w.subscribe(ctx, "0", charged[0], nil); err != nil {
		return "", err
	}
	if got := firstAnswer(w.next(ctx)); got != "served" {
		return "", fmt.Errorf("before the revocation: %s", got)
	}
	if _, err := l.command(ctx, "apikey", "revoke", key[:len("co_sk_")+4]); err != nil {
		return "", err
	}
	revoked := time.Now()
	const watch = 60 * time.Second
	for i := 1; time.Since(revoked) < watch; i++ {
		time.Sleep(2 * time.Second)
		if err := w.subscribe(ctx, strconv.Itoa(i), charged[1], nil); err != nil {
			return fmt.Sprintf("closed within %.0f s of the revocation (looked at every 2 s)", time.Since(revoked).Seconds()), nil
		}
		for {
			readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := w.next(readCtx)
			cancel()
			if err != nil {
				if s := websocket.CloseStatus(err); s != -1 {
					return fmt.Sprintf("closed %d within %.0f s of the revocation (looked at every 2 s)", s, time.Since(revoked).Seconds()), nil
				}
				return fmt.Sprintf("broken %.0f s after the revocation", time.Since(revoked).Seconds()), nil
			}
			if m["id"] == strconv.Itoa(i) && m["type"] != "complete" {
				if got := firstAnswer(m, nil); got != "served" {
					return fmt.Sprintf("new subscriptions refused (%s) %.0f s after the revocation", got, time.Since(revoked).Seconds()), nil
				}
				break
			}
		}
	}
	return fmt.Sprintf("still served a new subscription to another charge %.0f s after the revocation", watch.Seconds()), nil
}

func socketFlood(ctx context.Context, l *lab) (string, error) {
	if err := l.start(ctx, nil); err != nil {
		return "", err
	}
	upgrades := &tally{}
	for range 60 {
		w, status, err := l.dial(ctx, "127.0.0.2", nil)
		if err != nil {
			return "", err
		}
		upgrades.add(strconv.Itoa(status))
		if w != nil {
			defer w.conn.CloseNow()
		}
	}
	held := &tally{}
	for range 300 {
		w, status, err := l.dial(ctx, "127.0.0.3", nil)
		switch {
		case err != nil:
			held.add("error")
		case w == nil:
			held.add(strconv.Itoa(status))
		case w.init(ctx, publishableKey) != nil:
			held.add("closed at connection_init")
			w.conn.CloseNow()
		default:
			held.add("held open")
			defer w.conn.CloseNow()
		}
	}
	return fmt.Sprintf("keyless upgrades: %s; authenticated sockets: %s", upgrades, held), nil
}

// tally counts outcomes, safe for concurrent use.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(outcome string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[outcome]++
}

func (t *tally) count(outcome string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[outcome]
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for k, v := range t.n {
		parts = append(parts, fmt.Sprintf("%d × %s", v, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
