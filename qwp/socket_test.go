package qwp

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectProxy is an HTTP proxy that tunnels CONNECT requests and records
// the targets and Proxy-Authorization headers it saw.
type connectProxy struct {
	ln net.Listener
	// established is the proxy's answer to a CONNECT it tunnels.
	established string
	mu          sync.Mutex
	targets     []string
	auths       []string
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	p := &connectProxy{established: "HTTP/1.1 200 Connection established\r\n\r\n"}
	p.ln = serveProxy(t, p.tunnel)
	return p
}

// serveProxy listens on a port of its own and runs handle on each
// connection (then closes it) until the test ends.
func serveProxy(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln
}

// splice copies the client's bytes (from r, which reads c) to up and up's
// to c, until both ends are done.
func splice(c net.Conn, r io.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, r)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

func (p *connectProxy) tunnel(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.auths = append(p.auths, req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, p.established); err != nil {
		return
	}
	splice(c, br, up)
}

// sendThrough dials target through proxyURL, with cfg for wss, and checks
// that a message reaches the server (peers) whole.
func sendThrough(t *testing.T, proxyURL *url.URL, target string, peers <-chan *rawPeer, cfg *tls.Config) {
	t.Helper()
	o := DialOptions{URL: target, TLS: cfg, HandshakeTimeout: 5 * time.Second}
	c, err := dial(context.Background(), o, nil, func(*http.Request) (*url.URL, error) { return proxyURL, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-peers
	if peer == nil {
		t.Fatal("no connection reached the server")
	}
	defer peer.conn.Close()
	msg := "through " + proxyURL.Scheme
	if f := sendFrame(t, c, peer, []byte(msg), target); string(f.payload) != msg {
		t.Fatalf("payload %q, want %q", f.payload, msg)
	}
}

// TestDialThroughProxy: ws and wss reach the server through an HTTP
// proxy's CONNECT tunnel with the proxy's credentials, as net/http sends
// them; wss does its TLS handshake with the server, through the tunnel
// (dialTLS), and a message arrives whole.
func TestDialThroughProxy(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, tc := range []struct {
		name        string
		secure      bool
		user        *url.Userinfo
		wantAuth    string
		established string // the proxy's answer; "" for the usual one
	}{
		{"ws", false, url.UserPassword("squid", "s3cret"), "squid:s3cret", ""},
		{"wss", true, url.UserPassword("squid", "s3cret"), "squid:s3cret", ""},
		// net/http's rule: a user without a password is still sent.
		{"wss user without password", true, url.User("squid"), "squid:", ""},
		{"ws user without password", false, url.User("squid"), "squid:", ""},
		// RFC 9110 section 9.3.6: a 2xx answer to CONNECT has no body,
		// whatever its headers say; reading one would wait for the
		// server, which speaks only after the TLS hello.
		{"wss answer declaring a body", true, url.UserPassword("squid", "s3cret"), "squid:s3cret",
			"HTTP/1.1 200 Connection established\r\nContent-Length: 5\r\n\r\n"},
		{"wss answer declaring a chunked body", true, url.UserPassword("squid", "s3cret"), "squid:s3cret",
			"HTTP/1.1 200 Connection established\r\nTransfer-Encoding: chunked\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.TLS
			if !tc.secure {
				cfg = nil
			}
			target, peers := rawServerTLS(t, cfg)
			p := newConnectProxy(t)
			if tc.established != "" {
				p.established = tc.established
			}
			sendThrough(t, &url.URL{Scheme: "http", Host: p.ln.Addr().String(), User: tc.user}, target, peers, tlsCfg)
			p.mu.Lock()
			defer p.mu.Unlock()
			host := strings.TrimPrefix(strings.TrimPrefix(target, "wss://"), "ws://")
			host = host[:strings.IndexByte(host, '/')]
			wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(tc.wantAuth))
			if len(p.targets) != 1 || p.targets[0] != host || p.auths[0] != wantAuth {
				t.Fatalf("proxy saw CONNECT %q with %q; want %s with %q", p.targets, p.auths, host, wantAuth)
			}
		})
	}
}

// TestDialProxyRefusal: a proxy that refuses the tunnel, one of a scheme
// not supported, or one that cannot be reached fails the dial as a
// transient upgrade error naming the reason (and the proxy).
func TestDialProxyRefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
		}
	}()
	defer func() { _ = ln.Close(); <-done }()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	for _, tc := range []struct{ proxy, want string }{
		{"http://" + ln.Addr().String(), "407 Proxy Authentication Required"},
		{"https://" + ln.Addr().String(), `proxy scheme "https"`},
		{"http://" + closed.Addr().String(), "CONNECT to db.invalid:9000 through proxy " + closed.Addr().String() + ": dial tcp"},
	} {
		pu, _ := url.Parse(tc.proxy)
		_, err := dial(context.Background(), DialOptions{URL: "wss://db.invalid:9000/write/v4"}, nil,
			func(*http.Request) (*url.URL, error) { return pu, nil })
		var ue *UpgradeError
		if !errors.As(err, &ue) || ue.Kind != UpgradeTransient || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("proxy %s: %v, want a transient upgrade error with %q", tc.proxy, err, tc.want)
		}
	}
}
