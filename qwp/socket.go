package qwp

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// gorillaConn is the socket (TLS included) as gorilla/websocket sees it.
// Conn writes its frames to the socket itself, under its write lock; gorilla
// still writes frames of its own while reading (a CLOSE 1002 when the
// server's frames break the protocol, a CLOSE 1009 for a message over the
// read limit), and those come through here and take the same lock, so they
// land whole between Conn's frames. Over wss a message's frame is several
// writes to the TLS connection: a frame written outside the lock could land
// inside its payload, and the server would read the rest of the stream as
// garbage. Until the upgrade is done (c is nil) it is the socket itself.
// SetDeadline is the socket's own: gorilla calls it only during the
// upgrade, and nothing of ours does.
type gorillaConn struct {
	net.Conn
	c *Conn
	// writeDeadline is the deadline gorilla set for its next write; applied
	// under the lock, so that it never cuts short a message being written.
	// gorilla sets it and writes under its own lock.
	writeDeadline time.Time
}

// Write writes one of gorilla's frames (gorilla writes each whole) under
// Conn's lock, waiting for it until the deadline gorilla set.
func (g *gorillaConn) Write(b []byte) (int, error) {
	if g.c == nil {
		return g.Conn.Write(b)
	}
	if err := g.c.writeGorillaFrame(b, g.writeDeadline); err != nil {
		return 0, err
	}
	return len(b), nil
}

// SetWriteDeadline records the deadline of gorilla's next write.
func (g *gorillaConn) SetWriteDeadline(t time.Time) error {
	if g.c == nil {
		return g.Conn.SetWriteDeadline(t)
	}
	g.writeDeadline = t
	return nil
}

// netDialer opens a TCP connection; nil means net.Dialer's.
type netDialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (d netDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return d(ctx, network, addr)
}

// dialTLS opens a wss connection's socket: TCP to addr (through the proxy
// proxyURL when it is not nil), then the TLS handshake with the host
// verified, as gorilla would. The TLS connection is Conn's own, so that
// gorilla's writes can be put under Conn's lock (gorillaConn).
func dialTLS(ctx context.Context, d netDialer, proxyURL *url.URL, cfg *tls.Config, addr string) (net.Conn, error) {
	nc, err := dialThrough(ctx, d, proxyURL, addr)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return &gorillaConn{Conn: tc}, nil
}

// dialThrough opens a TCP connection to addr, directly when p is nil,
// else through the proxy p: an http:// proxy's CONNECT, or a socks5://
// or socks5h:// proxy's (RFC 1928), the schemes gorilla supports and the
// one net/http adds. There is no https:// proxy: gorilla has none either.
// A proxy without a port is on its scheme's usual one (1080 for SOCKS, as
// in net/http). ctx bounds the proxy's handshake too.
func dialThrough(ctx context.Context, d netDialer, p *url.URL, addr string) (net.Conn, error) {
	if p == nil {
		return d.dial(ctx, "tcp", addr)
	}
	var handshake func(net.Conn, *url.URL, string) error
	var port, what string
	switch p.Scheme {
	case "http":
		handshake, port, what = connectRequest, "80", "CONNECT"
	case "socks5", "socks5h":
		handshake, port, what = socksConnect, "1080", "SOCKS5 CONNECT"
	default:
		return nil, fmt.Errorf("qwp: proxy scheme %q: only http://, socks5:// and socks5h:// proxies are supported", p.Scheme)
	}
	fail := func(err error) error {
		return fmt.Errorf("qwp: %s to %s through proxy %s: %w", what, addr, p.Host, err)
	}
	proxyAddr := p.Host
	if p.Port() == "" {
		proxyAddr = net.JoinHostPort(p.Hostname(), port)
	}
	nc, err := d.dial(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, fail(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err = handshake(nc, p, addr)
	if !stop() || ctx.Err() != nil {
		err = fail(context.Cause(ctx))
	} else if err != nil {
		err = fail(err)
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// connectRequest asks the HTTP proxy on nc for a tunnel to addr. A user in
// the proxy's URL goes as Proxy-Authorization, as net/http sends it: Basic
// user:password, the password empty when the URL has none.
func connectRequest(nc net.Conn, p *url.URL, addr string) error {
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := p.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(nc); err != nil {
		return err
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return err
	}
	// The body is never read: a 2xx answer to CONNECT has none, whatever
	// Content-Length or Transfer-Encoding say (RFC 9110 section 9.3.6),
	// and after any other answer the connection is closed.
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy answered %s", resp.Status)
	}
	if br.Buffered() > 0 {
		// The server speaks after the client's TLS hello, never before.
		return fmt.Errorf("proxy sent %d bytes after its answer", br.Buffered())
	}
	return nil
}
