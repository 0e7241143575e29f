package apitest

import (
	"chargeonce/db/dbtest"
	"chargeonce/internal/apiclient"
	"chargeonce/internal/app"
	"chargeonce/provider/providertest"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

const PublishableKey = app.DemoPublishableKeyDefault

const CreateSessionMutation = `mutation Create($key: String!, $input: CheckoutSessionInput!) {
	createCheckoutSession(idempotencyKey: $key, input: $input) {
		idempotencyKey replayed
		session { id clientSecret status amount currency orderId description returnUrl createdAt expiresAt attempts maxAttempts charge { id amount } }
	} }`

const SessionQuery = `query Session($id: ID!) { checkoutSession(id: $id) {
	id clientSecret status amount currency orderId attempts maxAttempts charge { id amount currency orderId } } }`

const SessionStatusQuery = `query Status($key: String!, $session: String) { chargeStatus(idempotencyKey: $key, checkoutSession: $session) { ` + PayloadFields + ` } }`

const SessionUpdatesSubscription = `subscription Updates($key: String!, $session: String) { chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { status } }`

// Session is a checkout Session as the GraphQL answers carry it.
type Session struct {
	ID           string  `json:"id"`
	ClientSecret *string `json:"clientSecret"`
	Status       string  `json:"status"`
	Amount       int     `json:"amount"`
	Currency     string  `json:"currency"`
	OrderID      *string `json:"orderId"`
	ExpiresAt    string  `json:"expiresAt"`
	Attempts     int     `json:"attempts"`
	MaxAttempts  int     `json:"maxAttempts"`
	Charge       *struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	} `json:"charge"`
}

type SessionResponse struct {
	Status int `json:"-"`
	Data   struct {
		Create *struct {
			IdempotencyKey string  `json:"idempotencyKey"`
			Replayed       bool    `json:"replayed"`
			Session        Session `json:"session"`
		} `json:"createCheckoutSession"`
		Session *Session `json:"checkoutSession"`
	} `json:"data"`
	Errors gqlerror.List `json:"errors"`
}

func (r SessionResponse) Code(t *testing.T) string {
	t.Helper()
	return OnlyCode(t, r.Errors)
}

// Post sends a document with apiKey and extra headers, and decodes into v.
func (s *Server) Post(t *testing.T, apiKey string, headers http.Header, query string, vars map[string]any, v any) RawResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	h := JSONHeaders()
	if apiKey != "" {
		h.Set("Authorization", "Bearer "+apiKey)
	}
	for k, vs := range headers {
		h[k] = vs
	}
	r := s.Send(t, http.MethodPost, "/graphql", h, strings.NewReader(string(body)))
	if v != nil {
		require.NoError(t, json.Unmarshal(r.Body, v), "%s", r.Body)
	}
	return r
}

func (s *Server) CreateSession(t *testing.T, apiKey, key string, input map[string]any) SessionResponse {
	t.Helper()
	var r SessionResponse
	r.Status = s.Post(t, apiKey, nil, CreateSessionMutation, map[string]any{"key": key, "input": input}, &r).Status
	return r
}

// OpenSession creates a session of the demo merchant and returns it with
// its client secret.
func (s *Server) OpenSession(t *testing.T, input map[string]any) (Session, string) {
	t.Helper()
	r := s.CreateSession(t, "demo-key", NewKey(), input)
	require.Empty(t, r.Errors)
	require.NotNil(t, r.Data.Create.Session.ClientSecret)
	return r.Data.Create.Session, *r.Data.Create.Session.ClientSecret
}

func (s *Server) ReadSession(t *testing.T, apiKey, id string) SessionResponse {
	t.Helper()
	var r SessionResponse
	r.Status = s.Post(t, apiKey, nil, SessionQuery, map[string]any{"id": id}, &r).Status
	return r
}

// PaySession pays a session from the browser's side: the publishable key,
// the client secret, the card, and any of the terms in extra.
func (s *Server) PaySession(t require.TestingT, key, secret, card string, extra map[string]any) Response {
	Helper(t)
	input := map[string]any{"paymentMethod": card, "checkoutSession": secret}
	for k, v := range extra {
		input[k] = v
	}
	res, err := s.API(PublishableKey).ChargeCardRaw(context.Background(), key, input)
	r, err := Answered(res, err, "chargeCard")
	require.NoError(t, err)
	return r
}

func (s *Server) SessionStatus(t *testing.T, apiKey, key string, secret *string) Response {
	t.Helper()
	var r Response
	s.Post(t, apiKey, nil, SessionStatusQuery, map[string]any{"key": key, "session": secret}, &r)
	return r
}

func SessionInput(amount int, extra ...any) map[string]any {
	in := map[string]any{"amount": amount, "currency": "USD"}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	return in
}

// AttemptsOf counts the charge attempts claimed under keys.
func AttemptsOf(t *testing.T, pool *pgxpool.Pool, keys ...string) int {
	t.Helper()
	return CountRows(t, pool, "SELECT count(*)::int FROM charge_attempts WHERE idempotency_key = ANY($1)", keys)
}

// ProviderChargesOfSession lists what the simulated provider was asked to
// charge for a session's attempts, declines included: the provider's
// charges under the provider keys that chargeonce's attempts record
// (charge_attempt_provider_key: a row keeps NULL for the first).
func (s *Server) ProviderChargesOfSession(t *testing.T, pool *pgxpool.Pool, sessionID string) []apiclient.ProviderCharge {
	t.Helper()
	var charges []apiclient.ProviderCharge
	for _, key := range dbtest.Query[string](t, pool,
		"SELECT charge_attempt_provider_key(a) FROM charge_attempts a WHERE checkout_session_id = $1", sessionID) {
		found, err := s.API("").ListProviderCharges(context.Background(), apiclient.ProviderChargeFilter{IdempotencyKey: key})
		require.NoError(t, err)
		charges = append(charges, found...)
	}
	return charges
}

const SessionUpdatesWithAction = `subscription Updates($key: String!, $session: String) {
	chargeUpdated(idempotencyKey: $key, checkoutSession: $session) { ` + PayloadFields + ` } }`

// PressButton presses a button of the challenge page at actionURL as the
// shopper's browser does, and returns where it is sent back to. The page is
// the simulator's, under this server's /provider (a test server has no
// public address for the simulator to name: only the path is taken).
func (s *Server) PressButton(t *testing.T, actionURL, button string) *url.URL {
	t.Helper()
	page, err := url.Parse(actionURL)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(page.Path, "/provider/authenticate/"), actionURL)
	return providertest.PressChallenge(t, s.Client, s.URL+page.Path, button)
}
