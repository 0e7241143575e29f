package merchant

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"chargeonce/payment"
)

// Origin is an origin a merchant's checkout pages run on: cross-origin
// requests with the merchant's publishable key are served to it, and to no
// other.
type Origin struct {
	Merchant  string
	Origin    string // scheme://host[:port], as a browser sends it
	CreatedAt time.Time
}

// NormalizeOrigin checks that origin is what a browser sends as Origin (an
// http or https scheme, a host, an optional port; no path, query, fragment
// or user) and returns it in the browser's form: scheme and host in lower
// case, the scheme's default port left out.
func NormalizeOrigin(origin string) (string, error) {
	invalid := payment.Invalid("origin", "an origin is scheme://host[:port] with scheme http or https and nothing after the port, e.g. https://shop.example; got %q", origin)
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.Opaque != "" ||
		strings.HasSuffix(origin, "/") {
		return "", invalid
	}
	host, port := u.Hostname(), u.Port()
	if host == "" || strings.ContainsAny(host, " %") || (strings.Contains(u.Host, ":") && port == "" && !strings.HasSuffix(u.Host, "]")) {
		return "", invalid
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	host = strings.ToLower(host)
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

// AddOrigin registers origin for the existing merchant name; added is false
// when it was registered already. Production refuses a plain-http origin.
func (ms *Service) AddOrigin(ctx context.Context, name, origin string) (normalized string, added bool, err error) {
	m, normalized, err := ms.merchantAndOrigin(ctx, name, origin)
	if err != nil {
		return "", false, err
	}
	if !ms.servesOrigin(normalized) {
		return "", false, payment.Invalid("origin", "an origin must be https:// when APP_ENV=production: a checkout page served over plain http can be changed by anyone on its way to the shopper (plain http origins are for development); got %s", normalized)
	}
	added, err = ms.store.addOrigin(ctx, m.ID, normalized)
	return normalized, added, err
}

// RemoveOrigin removes origin from the merchant name's origins; it is an
// error when it was not registered.
func (ms *Service) RemoveOrigin(ctx context.Context, name, origin string) (string, error) {
	m, normalized, err := ms.merchantAndOrigin(ctx, name, origin)
	if err != nil {
		return "", err
	}
	removed, err := ms.store.removeOrigin(ctx, m.ID, normalized)
	if err == nil && !removed {
		err = payment.Errorf(payment.ENOTFOUND, "merchant %s has no origin %s; `chargeonce merchant origins list %s` shows its origins", name, normalized, name)
	}
	return normalized, err
}

// ListOrigins returns the origins of the merchant name, or of every merchant
// when name is empty.
func (ms *Service) ListOrigins(ctx context.Context, name string) ([]Origin, error) {
	if name == "" {
		return ms.store.origins(ctx, nil)
	}
	if _, err := ms.existingMerchant(ctx, name); err != nil {
		return nil, err
	}
	return ms.store.origins(ctx, &name)
}

// OriginAllowed reports whether the merchant registered origin, as a
// browser sent it. In production a plain-http origin registered before
// (or by a development command on the same database) is not.
func (ms *Service) OriginAllowed(ctx context.Context, merchantID uuid.UUID, origin string) (bool, error) {
	if !ms.servesOrigin(origin) {
		return false, nil
	}
	return ms.store.originAllowed(ctx, merchantID, origin)
}

// AnyOriginAllowed reports whether any merchant registered origin: a
// preflight names no key, so it is answered for every registered origin.
// In production, never for a plain-http one.
func (ms *Service) AnyOriginAllowed(ctx context.Context, origin string) (bool, error) {
	if !ms.servesOrigin(origin) {
		return false, nil
	}
	return ms.store.anyOriginAllowed(ctx, origin)
}

// servesOrigin reports whether origin's scheme may be served at all:
// production serves https origins only (Config.Production).
func (ms *Service) servesOrigin(origin string) bool {
	return !ms.cfg.Production || strings.HasPrefix(origin, "https://")
}

func (ms *Service) merchantAndOrigin(ctx context.Context, name, origin string) (payment.Merchant, string, error) {
	normalized, err := NormalizeOrigin(origin)
	if err != nil {
		return payment.Merchant{}, "", err
	}
	m, err := ms.existingMerchant(ctx, name)
	return m, normalized, err
}

// existingMerchant finds the merchant an operator names, which must exist:
// a typo must not create one.
func (ms *Service) existingMerchant(ctx context.Context, name string) (payment.Merchant, error) {
	if err := checkMerchantName(name); err != nil {
		return payment.Merchant{}, err
	}
	m, err := ms.store.merchantByName(ctx, name)
	if payment.ErrorCode(err) == payment.ENOTFOUND {
		return payment.Merchant{}, &payment.Error{Code: payment.ENOTFOUND, Field: "name",
			Message: "no merchant named " + name + "; create one with `chargeonce apikey create " + name + "`"}
	}
	return m, err
}
