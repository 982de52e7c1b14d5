package qwptest

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// websocketGUID is appended to Sec-WebSocket-Key before hashing it into
// Sec-WebSocket-Accept (RFC 6455 section 4.2.2).
const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// readBufferSize is the buffered reader under a connection's frame parser.
const readBufferSize = 64 << 10

// handshakeRefusal is how QuestDB answers an upgrade request its
// QwpIngressHttpProcessor.validateHandshake refuses, checked in its order:
// 400 with the reason as text/plain, or 426 for the WebSocket version.
// It returns status 0 for a valid request.
func handshakeRefusal(h http.Header) (status int, reason string) {
	key := h.Get("Sec-WebSocket-Key")
	switch {
	case len(h.Values("Origin")) > 0:
		return http.StatusBadRequest, "Origin header not allowed on QWP WebSocket"
	case len(h.Values("Upgrade")) == 0:
		return http.StatusBadRequest, "Missing Upgrade header"
	case !strings.EqualFold(h.Get("Upgrade"), "websocket"):
		return http.StatusBadRequest, "Invalid Upgrade header value"
	case len(h.Values("Connection")) == 0:
		return http.StatusBadRequest, "Missing Connection header"
	case !hasUpgradeToken(h.Get("Connection")):
		return http.StatusBadRequest, "Connection header must contain 'upgrade'"
	case len(h.Values("Sec-WebSocket-Key")) == 0:
		return http.StatusBadRequest, "Missing Sec-WebSocket-Key header"
	case !validKey(key):
		return http.StatusBadRequest, "Invalid Sec-WebSocket-Key (must be 24-character base64 key)"
	case !validVersion(h.Get("Sec-WebSocket-Version")):
		return http.StatusUpgradeRequired, ""
	}
	return 0, ""
}

// hasUpgradeToken matches "upgrade" (any case) as a token separated by
// commas or spaces, as QuestDB's containsUpgrade does.
func hasUpgradeToken(v string) bool {
	for _, tok := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if strings.EqualFold(tok, "upgrade") {
			return true
		}
	}
	return false
}

// validKey is QuestDB's isValidKey: 24 characters of the base64 alphabet.
func validKey(k string) bool {
	if len(k) != 24 {
		return false
	}
	for i := range len(k) {
		c := k[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// validVersion is QuestDB's isValidVersion: digits only, worth 13.
func validVersion(v string) bool {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(v)
	return err == nil && n == 13
}

// acceptKey is Sec-WebSocket-Accept for a Sec-WebSocket-Key.
func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// refuseHandshake writes QuestDB's 400 or 426 answer.
func refuseHandshake(w http.ResponseWriter, status int, reason string) {
	if status == http.StatusUpgradeRequired {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Sec-WebSocket-Version", "13")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(reason)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reason)
}

// hijack takes the connection of a validated upgrade request over from
// net/http, without answering it yet (switchProtocols does). Bytes the
// client sent behind its request stay readable through the returned reader.
func hijack(w http.ResponseWriter) (net.Conn, *bufio.Reader, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("response writer %T cannot be hijacked", w)
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	_ = nc.SetDeadline(time.Time{}) // net/http's header deadline no longer applies
	var src io.Reader = nc
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		src = io.MultiReader(bytes.NewReader(early), nc)
	}
	return nc, bufio.NewReaderSize(src, readBufferSize), nil
}

// switchProtocols writes the 101 response to the upgrade request r with
// the given extra header lines ("Name: value").
func switchProtocols(nc net.Conn, r *http.Request, extra []string) error {
	var b strings.Builder
	b.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")
	b.WriteString(acceptKey(r.Header.Get("Sec-WebSocket-Key")))
	for _, line := range extra {
		b.WriteString("\r\n")
		b.WriteString(line)
	}
	b.WriteString("\r\n\r\n")
	_, err := io.WriteString(nc, b.String())
	return err
}
