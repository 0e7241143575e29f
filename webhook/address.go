package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Where a webhook may be sent. The delivery worker POSTs signed events from
// inside the operator's network, so an endpoint on that network would let
// whoever sets it reach what only the server should: the cloud's metadata
// service (credentials), the instance's own ports, other internal
// services. In production an endpoint must be a public address: its host
// is checked where it is set (a literal address, or every address its name
// resolves to) and again at every attempt, on the address the worker
// actually dials, after resolution, so that a name that resolves elsewhere
// by then (DNS rebinding) is refused too. WEBHOOK_ALLOW_PRIVATE_NETWORKS
// lets production reach private networks (RFC 1918, RFC 4193, 100.64/10),
// for receivers inside the operator's own; loopback, link-local, metadata,
// unspecified and multicast addresses stay refused. Development allows
// everything: receivers run on loopback in tests and the demo.

// LookupHost resolves a host name to its addresses.
type LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)

// lookupSystem resolves with the system's resolver.
func lookupSystem(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// setLookupTimeout bounds the resolution of an endpoint's name when it is
// set; a name that does not resolve then is checked at every attempt.
const setLookupTimeout = 5 * time.Second

// addressKind is why an address is refused; "" is a public address.
type addressKind string

const (
	kindPublic      addressKind = ""
	kindLoopback    addressKind = "a loopback address"
	kindPrivate     addressKind = "a private address"
	kindLinkLocal   addressKind = "a link-local address"
	kindMetadata    addressKind = "a cloud metadata service"
	kindUnspecified addressKind = "an unspecified address"
	kindMulticast   addressKind = "a multicast address"
	kindReserved    addressKind = "a reserved address"
)

// privateKinds are what WEBHOOK_ALLOW_PRIVATE_NETWORKS lets through.
var privateKinds = map[addressKind]bool{kindPrivate: true}

var (
	// metadataAddrs are cloud metadata services beyond the link-local
	// range: EC2's IPv6 one (in fc00::/7) and Alibaba Cloud's (in 100.64/10),
	// refused even where private networks are allowed.
	metadataAddrs = map[netip.Addr]bool{
		netip.MustParseAddr("fd00:ec2::254"):   true,
		netip.MustParseAddr("100.100.100.200"): true,
	}
	// metadataNames are the names of cloud metadata services.
	metadataNames = map[string]bool{"metadata.google.internal": true, "metadata.goog": true, "metadata": true,
		"instance-data": true, "instance-data.ec2.internal": true}
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598, carrier-grade NAT and private overlays
	benchmarking       = netip.MustParsePrefix("198.18.0.0/15") // RFC 2544
	thisNetwork        = netip.MustParsePrefix("0.0.0.0/8")
	reservedV4         = netip.MustParsePrefix("240.0.0.0/4") // broadcast included
	nat64              = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local         = netip.MustParsePrefix("64:ff9b:1::/48")
	ipv4Compatible     = netip.MustParsePrefix("::/96")
)

// classify says what kind of address addr is. IPv4-mapped (::ffff:a.b.c.d)
// and NAT64 (64:ff9b::a.b.c.d) forms are the IPv4 address they carry.
func classify(addr netip.Addr) addressKind {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case metadataAddrs[addr]:
		return kindMetadata
	case addr.IsUnspecified():
		return kindUnspecified
	case addr.IsLoopback():
		return kindLoopback
	case addr.IsLinkLocalUnicast():
		return kindLinkLocal // 169.254.169.254, the metadata service of most clouds, among them
	case addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return kindMulticast
	case addr.IsPrivate() || sharedAddressSpace.Contains(addr) || benchmarking.Contains(addr) || nat64Local.Contains(addr):
		return kindPrivate
	case thisNetwork.Contains(addr) || reservedV4.Contains(addr) || (addr.Is6() && ipv4Compatible.Contains(addr)):
		return kindReserved
	}
	return kindPublic
}

// reach is the addresses a Service or Endpoints may send to.
type reach struct {
	checked      bool // production: only the addresses below
	allowPrivate bool // WEBHOOK_ALLOW_PRIVATE_NETWORKS
	lookup       LookupHost
}

func newReach(cfg Config) reach {
	lookup := cfg.LookupHost
	if lookup == nil {
		lookup = lookupSystem
	}
	return reach{checked: cfg.Production, allowPrivate: cfg.AllowPrivateNetworks, lookup: lookup}
}

// errForbiddenAddress is an endpoint's address refused; it wraps
// ErrInvalidURL.
type errForbiddenAddress struct {
	what string // the address or name, and what it is
}

func (e *errForbiddenAddress) Error() string {
	return fmt.Sprintf("%s: %s, which is refused when APP_ENV=production (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true lets private networks in)",
		ErrInvalidURL, e.what)
}

func (e *errForbiddenAddress) Unwrap() error { return ErrInvalidURL }

// checkAddr refuses addr if r does not reach it.
func (r reach) checkAddr(addr netip.Addr) error {
	if what, refused := r.refused(addr); refused {
		return &errForbiddenAddress{what: what}
	}
	return nil
}

// refused says whether r does not reach addr, and what addr is.
func (r reach) refused(addr netip.Addr) (what string, refused bool) {
	if !r.checked {
		return "", false
	}
	kind := classify(addr)
	if kind == kindPublic || (r.allowPrivate && privateKinds[kind]) {
		return "", false
	}
	return addr.Unmap().String() + " is " + string(kind), true
}

// checkResolved refuses host if any of the addresses it resolved to is
// refused.
func (r reach) checkResolved(host string, addrs []netip.Addr) error {
	for _, addr := range addrs {
		if what, refused := r.refused(addr); refused {
			return &errForbiddenAddress{what: host + " resolves to " + what}
		}
	}
	return nil
}

// checkName refuses a name of a metadata service or of this machine,
// whatever it resolves to.
func (r reach) checkName(name string) error {
	if !r.checked {
		return nil
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	switch {
	case metadataNames[name]:
		return &errForbiddenAddress{what: name + " is " + string(kindMetadata)}
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return &errForbiddenAddress{what: name + " is " + string(kindLoopback)}
	}
	return nil
}

// checkHost is the check of an endpoint's host where it is set: a literal
// address, or the name and every address it resolves to (refused if any
// is). A name that does not resolve now is accepted: every attempt checks
// what it resolves to then.
func (r reach) checkHost(ctx context.Context, host string) error {
	if !r.checked {
		return nil
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return r.checkAddr(addr)
	}
	if err := r.checkName(host); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, setLookupTimeout)
	defer cancel()
	addrs, err := r.lookup(ctx, host)
	if err != nil {
		return nil
	}
	return r.checkResolved(host, addrs)
}

// resolve returns the addresses of host (an address, or a name) if r
// reaches every one of them.
func (r reach) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if addr, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{addr}, r.checkAddr(addr)
	}
	addrs, err := r.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	return addrs, r.checkResolved(host, addrs)
}

// dialContext connects to a webhook endpoint at address (host:port): it
// resolves the host, refuses the connection if any of its addresses is one
// r does not reach, and dials the addresses in turn; the dialer checks the
// address of each connection again just before it is made (Control), so
// nothing reaches a refused address, whatever resolved to it.
func (r reach) dialContext(dialer *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	if !r.checked {
		return dialer.DialContext
	}
	checked := *dialer
	checked.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot read the address dialled", ErrInvalidURL)
		}
		return r.checkAddr(ap.Addr())
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if err := r.checkName(host); err != nil {
			return nil, err
		}
		addrs, err := r.resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, addr := range addrs {
			conn, err := checked.DialContext(ctx, network, net.JoinHostPort(addr.String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("%s has no address", host)
		}
		return nil, errors.Join(errs...)
	}
}
