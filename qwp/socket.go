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

// SetDeadline sets the read deadline and records the write deadline.
func (g *gorillaConn) SetDeadline(t time.Time) error {
	if g.c == nil {
		return g.Conn.SetDeadline(t)
	}
	g.writeDeadline = t
	return g.Conn.SetReadDeadline(t)
}

// netDialer opens a TCP connection; nil means net.Dialer's.
type netDialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (d netDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return d(ctx, network, addr)
}

// dialTLS opens a wss connection's socket: TCP to addr (through an HTTP
// proxy's CONNECT when proxyURL is not nil), then the TLS handshake with
// the host verified, as gorilla would. The TLS connection is Conn's own, so
// that gorilla's writes can be put under Conn's lock (gorillaConn).
func dialTLS(ctx context.Context, d netDialer, proxyURL *url.URL, cfg *tls.Config, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	if proxyURL != nil {
		nc, err = connectThrough(ctx, d, proxyURL, addr)
	} else {
		nc, err = d.dial(ctx, "tcp", addr)
	}
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

// connectThrough opens a tunnel to addr through the HTTP proxy p with
// CONNECT, as gorilla does for ws:// URLs. Only http:// proxies are
// supported: gorilla supports no https:// proxy either.
func connectThrough(ctx context.Context, d netDialer, p *url.URL, addr string) (net.Conn, error) {
	if p.Scheme != "http" {
		return nil, fmt.Errorf("qwp: proxy scheme %q: only http:// proxies can carry wss", p.Scheme)
	}
	proxyAddr := p.Host
	if p.Port() == "" {
		proxyAddr = net.JoinHostPort(p.Hostname(), "80")
	}
	nc, err := d.dial(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err = connectRequest(nc, p, addr)
	if !stop() || ctx.Err() != nil {
		err = fmt.Errorf("qwp: CONNECT through proxy %s: %w", p.Host, context.Cause(ctx))
	} else if err != nil {
		err = fmt.Errorf("qwp: CONNECT through proxy %s: %w", p.Host, err)
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// connectRequest asks the proxy on nc for a tunnel to addr.
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
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy answered %s", resp.Status)
	}
	if br.Buffered() > 0 {
		// The server speaks after the client's TLS hello, never before.
		return fmt.Errorf("proxy sent %d bytes after its answer", br.Buffered())
	}
	return nil
}
