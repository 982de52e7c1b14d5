package qwp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
)

// SOCKS5 constants of RFC 1928 (the protocol) and RFC 1929 (its username
// and password authentication).
const (
	socksVersion      = 5
	socksNoAuth       = 0x00
	socksUserPassword = 0x02
	socksNoMethod     = 0xff
	socksCmdConnect   = 0x01
	socksATypIPv4     = 0x01
	socksATypDomain   = 0x03
	socksATypIPv6     = 0x04
	socksAuthVersion  = 0x01
)

// socksReplies names the reply codes of RFC 1928 section 6.
var socksReplies = [...]string{
	1: "general SOCKS server failure",
	2: "connection not allowed by ruleset",
	3: "network unreachable",
	4: "host unreachable",
	5: "connection refused",
	6: "TTL expired",
	7: "command not supported",
	8: "address type not supported",
}

// socksConnect asks the SOCKS5 proxy on nc for a connection to addr. A user
// in the proxy's URL is offered as username and password authentication
// beside none; the proxy chooses. The host goes as the name (the proxy
// resolves it) unless it is an IP address, for socks5:// as for
// socks5h://, as gorilla's SOCKS5 dialer did.
func socksConnect(nc net.Conn, p *url.URL, addr string) error {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return fmt.Errorf("port %q out of range", portText)
	}
	req, err := socksRequest(host, uint16(port))
	if err != nil {
		return err
	}
	methods := []byte{socksNoAuth}
	var user, password string
	if p.User != nil && p.User.Username() != "" {
		user = p.User.Username()
		password, _ = p.User.Password()
		if len(user) > 255 || len(password) > 255 {
			return errors.New("SOCKS5 user name or password longer than 255 bytes")
		}
		methods = append(methods, socksUserPassword)
	}
	if _, err := nc.Write(append([]byte{socksVersion, byte(len(methods))}, methods...)); err != nil {
		return err
	}
	var b [4]byte
	if _, err := io.ReadFull(nc, b[:2]); err != nil {
		return fmt.Errorf("reading the method choice: %w", err)
	}
	switch {
	case b[0] != socksVersion:
		return fmt.Errorf("not a SOCKS5 proxy: version %d", b[0])
	case b[1] == socksNoMethod:
		return errors.New("proxy accepts none of the authentication methods offered")
	case b[1] == socksUserPassword && user != "":
		auth := append([]byte{socksAuthVersion, byte(len(user))}, user...)
		auth = append(append(auth, byte(len(password))), password...)
		if _, err := nc.Write(auth); err != nil {
			return err
		}
		if _, err := io.ReadFull(nc, b[:2]); err != nil {
			return fmt.Errorf("reading the authentication status: %w", err)
		}
		if b[1] != 0 {
			return fmt.Errorf("proxy refused the user name and password (status %d)", b[1])
		}
	case b[1] != socksNoAuth:
		return fmt.Errorf("proxy chose authentication method %#x, not one offered", b[1])
	}
	if _, err := nc.Write(req); err != nil {
		return err
	}
	if _, err := io.ReadFull(nc, b[:4]); err != nil {
		return fmt.Errorf("reading the CONNECT reply: %w", err)
	}
	if b[0] != socksVersion {
		return fmt.Errorf("CONNECT reply of version %d", b[0])
	}
	if r := b[1]; r != 0 {
		name := "unassigned reply code"
		if int(r) < len(socksReplies) {
			name = socksReplies[r]
		}
		return fmt.Errorf("proxy answered %s (code %d)", name, r)
	}
	// The address the proxy bound follows; the tunnel starts after it.
	var n int
	switch b[3] {
	case socksATypIPv4:
		n = net.IPv4len
	case socksATypIPv6:
		n = net.IPv6len
	case socksATypDomain:
		if _, err := io.ReadFull(nc, b[:1]); err != nil {
			return fmt.Errorf("reading the CONNECT reply: %w", err)
		}
		n = int(b[0])
	default:
		return fmt.Errorf("CONNECT reply with address type %d", b[3])
	}
	if _, err := io.ReadFull(nc, make([]byte, n+2)); err != nil {
		return fmt.Errorf("reading the CONNECT reply: %w", err)
	}
	return nil
}

// socksRequest is the CONNECT request for host and port.
func socksRequest(host string, port uint16) ([]byte, error) {
	req := []byte{socksVersion, socksCmdConnect, 0}
	if ip := net.ParseIP(host); ip == nil {
		if len(host) > 255 {
			return nil, errors.New("host name longer than 255 bytes")
		}
		req = append(append(req, socksATypDomain, byte(len(host))), host...)
	} else if ip4 := ip.To4(); ip4 != nil {
		req = append(append(req, socksATypIPv4), ip4...)
	} else {
		req = append(append(req, socksATypIPv6), ip...)
	}
	return append(req, byte(port>>8), byte(port)), nil
}
