package qwp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// socksProxy is a SOCKS5 proxy (RFC 1928, RFC 1929) for the tests: it
// tunnels CONNECT requests and records what the client sent.
type socksProxy struct {
	ln net.Listener
	// user and password, when user is set, are required (method 0x02).
	user, password string
	// reply is the CONNECT reply code; 0 tunnels.
	reply byte
	// stall: read the greeting and never answer.
	stall bool

	mu      sync.Mutex
	methods []byte // of the last greeting
	atyp    byte   // of the last CONNECT
	target  string // of the last CONNECT, host:port as sent
}

func newSocksProxy(t *testing.T, configure func(*socksProxy)) *socksProxy {
	t.Helper()
	p := &socksProxy{}
	if configure != nil {
		configure(p)
	}
	p.ln = serveProxy(t, p.serve)
	return p
}

// readShort reads a one-byte length, then that many bytes.
func readShort(r io.Reader) ([]byte, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, n[0])
	_, err := io.ReadFull(r, b)
	return b, err
}

func (p *socksProxy) serve(c net.Conn) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:1]); err != nil || h[0] != socksVersion {
		return
	}
	methods, err := readShort(c)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.methods = methods
	p.mu.Unlock()
	if p.stall {
		_, _ = io.Copy(io.Discard, c)
		return
	}
	want := byte(socksNoAuth)
	if p.user != "" {
		want = socksUserPassword
	}
	if !strings.ContainsRune(string(methods), rune(want)) {
		_, _ = c.Write([]byte{socksVersion, socksNoMethod})
		return
	}
	if _, err := c.Write([]byte{socksVersion, want}); err != nil {
		return
	}
	if want == socksUserPassword {
		if _, err := io.ReadFull(c, h[:1]); err != nil || h[0] != socksAuthVersion {
			return
		}
		user, err := readShort(c)
		if err != nil {
			return
		}
		password, err := readShort(c)
		if err != nil {
			return
		}
		if string(user) != p.user || string(password) != p.password {
			_, _ = c.Write([]byte{socksAuthVersion, 1})
			return
		}
		if _, err := c.Write([]byte{socksAuthVersion, 0}); err != nil {
			return
		}
	}
	if _, err := io.ReadFull(c, h[:4]); err != nil || h[0] != socksVersion || h[1] != socksCmdConnect {
		return
	}
	var host string
	switch h[3] {
	case socksATypIPv4, socksATypIPv6:
		ip := make(net.IP, map[byte]int{socksATypIPv4: 4, socksATypIPv6: 16}[h[3]])
		if _, err := io.ReadFull(c, ip); err != nil {
			return
		}
		host = ip.String()
	case socksATypDomain:
		name, err := readShort(c)
		if err != nil {
			return
		}
		host = string(name)
	default:
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:]))))
	p.mu.Lock()
	p.atyp, p.target = h[3], target
	p.mu.Unlock()
	// The reply's bound address: a domain name, to exercise its parsing.
	bound := append([]byte{socksVersion, p.reply, 0, socksATypDomain, 5}, "proxy"...)
	bound = append(bound, 0x04, 0x38)
	if p.reply != 0 {
		_, _ = c.Write(bound)
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = c.Write([]byte{socksVersion, 4, 0, socksATypIPv4, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	if _, err := c.Write(bound); err != nil {
		return
	}
	splice(c, c, up)
}

// TestDialThroughSocks5: wss and ws reach the server through a SOCKS5 proxy,
// with no authentication or with the URL's user and password (offered
// beside none); an IP address goes as one, a host name as the name, for
// socks5 as for socks5h (the proxy resolves it); the TLS handshake is with
// the server and a message arrives whole.
func TestDialThroughSocks5(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsCfg.ServerName = "example.com" // in httptest's certificate, as 127.0.0.1 is
	for _, tc := range []struct {
		name, scheme string
		user         *url.Userinfo
		byName       bool
		wantMethods  string
	}{
		{"no auth", "socks5", nil, false, "\x00"},
		{"ws", "socks5", nil, false, "\x00"},
		{"ws socks5h host name", "socks5h", url.UserPassword("sock", "pw"), true, "\x00\x02"},
		{"user and password", "socks5", url.UserPassword("sock", "pw"), false, "\x00\x02"},
		{"host name", "socks5", nil, true, "\x00"},
		{"socks5h host name", "socks5h", url.UserPassword("sock", "pw"), true, "\x00\x02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.TLS
			if strings.HasPrefix(tc.name, "ws") {
				cfg = nil
			}
			target, peers := rawServerTLS(t, cfg)
			if tc.byName {
				target = strings.Replace(target, "127.0.0.1", "localhost", 1)
			}
			p := newSocksProxy(t, func(p *socksProxy) {
				if tc.user != nil {
					p.user = tc.user.Username()
					p.password, _ = tc.user.Password()
				}
			})
			sendThrough(t, &url.URL{Scheme: tc.scheme, Host: p.ln.Addr().String(), User: tc.user}, target, peers, tlsCfg)
			u, _ := url.Parse(target)
			wantATyp := byte(socksATypIPv4)
			if tc.byName {
				wantATyp = socksATypDomain
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if string(p.methods) != tc.wantMethods || p.atyp != wantATyp || p.target != u.Host {
				t.Fatalf("proxy saw methods %x, CONNECT %s of address type %d; want %x, %s, %d",
					p.methods, p.target, p.atyp, tc.wantMethods, u.Host, wantATyp)
			}
		})
	}
}

// TestDialSocks5Failures: a SOCKS5 proxy's refusals (no acceptable
// method, wrong credentials, a CONNECT reply with an error code) and one
// that never answers (bounded by the handshake timeout) fail the dial as a
// transient upgrade error that names the reason and the proxy.
func TestDialSocks5Failures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(*socksProxy)
		user      *url.Userinfo
		want      string
	}{
		{"authentication required", func(p *socksProxy) { p.user, p.password = "sock", "pw" }, nil,
			"proxy accepts none of the authentication methods offered"},
		{"wrong password", func(p *socksProxy) { p.user, p.password = "sock", "pw" }, url.UserPassword("sock", "nope"),
			"proxy refused the user name and password (status 1)"},
		{"connection refused", func(p *socksProxy) { p.reply = 5 }, nil,
			"proxy answered connection refused (code 5)"},
		{"unassigned code", func(p *socksProxy) { p.reply = 0x42 }, nil,
			"proxy answered unassigned reply code (code 66)"},
		{"stalled", func(p *socksProxy) { p.stall = true }, nil,
			context.DeadlineExceeded.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSocksProxy(t, tc.configure)
			proxyURL := &url.URL{Scheme: "socks5", Host: p.ln.Addr().String(), User: tc.user}
			o := DialOptions{URL: "wss://db.invalid:9000/write/v4", HandshakeTimeout: 300 * time.Millisecond}
			start := time.Now()
			_, err := dial(context.Background(), o, nil, func(*http.Request) (*url.URL, error) { return proxyURL, nil })
			var ue *UpgradeError
			want := "SOCKS5 CONNECT to db.invalid:9000 through proxy " + p.ln.Addr().String() + ": " + tc.want
			if !errors.As(err, &ue) || ue.Kind != UpgradeTransient || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v, want a transient upgrade error with %q", err, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the dial took %v; the handshake timeout is %v", d, o.HandshakeTimeout)
			}
		})
	}
}
