package qwp

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// upgradeServer answers every request with handle; when handle returns
// headers (not nil) the request is upgraded with them and the server
// echoes binary messages until the client goes away.
func upgradeServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request) http.Header) string {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := handle(w, r)
		if h == nil {
			return
		}
		ws, err := up.Upgrade(w, r, h)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			mt, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if err := ws.WriteMessage(mt, b); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/write/v4"
}

func okHeaders(kv ...string) http.Header {
	h := http.Header{}
	h.Set(HeaderVersion, "1")
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestDialSuccess(t *testing.T) {
	var got *http.Request
	url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header {
		got = r
		return okHeaders(HeaderMaxBatchSize, "2097138", HeaderRole, "PRIMARY")
	})
	c, err := Dial(context.Background(), DialOptions{URL: url, Username: "admin", Password: "quest", ClientID: "otelcol/1.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got.URL.Path != "/write/v4" || got.Header.Get(HeaderMaxVersion) != "1" || got.Header.Get(HeaderClientID) != "otelcol/1.0" {
		t.Fatalf("request path %q headers %v", got.URL.Path, got.Header)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:quest")); got.Header.Get("Authorization") != want {
		t.Fatalf("Authorization %q, want %q", got.Header.Get("Authorization"), want)
	}
	if got.Header.Get(HeaderRequestDurableAck) != "" {
		t.Fatal("durable ack requested without being asked")
	}
	if c.Version != 1 || c.MaxBatchSize != 2097138 || c.Role != "PRIMARY" || c.DurableAck != "" {
		t.Fatalf("conn %+v", c)
	}
	if err := c.WriteMessage([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.WS.ReadMessage(); err != nil || string(b) != "ping" {
		t.Fatalf("echo %q %v", b, err)
	}
}

func TestDialBearerAndDefaults(t *testing.T) {
	var got *http.Request
	url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header {
		got = r
		return http.Header{} // no X-QWP-Version, no batch size, no role
	})
	c, err := Dial(context.Background(), DialOptions{URL: url, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got.Header.Get("Authorization") != "Bearer tok" || got.Header.Get(HeaderClientID) != "" {
		t.Fatalf("headers %v", got.Header)
	}
	if c.Version != 1 || c.MaxBatchSize != 0 || c.Role != "" {
		t.Fatalf("conn %+v", c)
	}
}

// TestDialReadLimit: a response over MaxResponseBytes fails the read rather
// than growing a buffer without bound.
func TestDialReadLimit(t *testing.T) {
	url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header { return okHeaders() })
	c, err := Dial(context.Background(), DialOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(make([]byte, MaxResponseBytes+1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WS.ReadMessage(); !errors.Is(err, websocket.ErrReadLimit) {
		t.Fatalf("reading an oversized response: %v, want ErrReadLimit", err)
	}
}

func TestDialConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		what string
		o    DialOptions
		want string
	}{
		{"http scheme", DialOptions{URL: "http://127.0.0.1:1/write/v4"}, "scheme must be ws or wss"},
		{"bad URL", DialOptions{URL: "ws://[::1"}, "endpoint URL"},
		{"token and password", DialOptions{URL: "ws://127.0.0.1:1/", Token: "t", Username: "u"}, "not both"},
		{"durable ack value", DialOptions{URL: "ws://127.0.0.1:1/", DurableAck: "true"}, `durable ack "true"`},
	} {
		_, err := Dial(context.Background(), tc.o)
		var ue *UpgradeError
		if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want a configuration error mentioning %q", tc.what, err, tc.want)
		}
	}
}

func TestDialDurableAck(t *testing.T) {
	for _, tc := range []struct {
		ask, wantSent string
		answer        *string // nil: header absent
		ok            bool
	}{
		{DurableAckReplicated, "true", ptr("enabled"), true},
		{DurableAckReplicated, "true", ptr("ENABLED"), true},
		{DurableAckReplicated, "true", nil, false},
		{DurableAckReplicated, "true", ptr("disabled"), false},
		{DurableAckReplicated, "true", ptr("replicated"), false},
		{DurableAckLocal, "local", ptr("local"), true},
		{DurableAckLocal, "local", ptr("enabled"), false},
		{DurableAckLocal, "local", nil, false},
		{DurableAckLocalReplicated, "local,replicated", ptr("local,replicated"), true},
		{DurableAckLocalReplicated, "local,replicated", ptr("local"), false},
		{DurableAckLocalReplicated, "local,replicated", ptr(""), false},
	} {
		var sent string
		url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header {
			sent = r.Header.Get(HeaderRequestDurableAck)
			h := okHeaders()
			if tc.answer != nil {
				h[HeaderDurableAck] = []string{*tc.answer}
			}
			return h
		})
		c, err := Dial(context.Background(), DialOptions{URL: url, DurableAck: tc.ask})
		if sent != tc.wantSent {
			t.Errorf("ask %q: sent %q, want %q", tc.ask, sent, tc.wantSent)
		}
		if tc.ok {
			if err != nil {
				t.Errorf("ask %q answer %q: %v", tc.ask, *tc.answer, err)
				continue
			}
			if c.DurableAck != tc.ask {
				t.Errorf("conn DurableAck %q, want %q", c.DurableAck, tc.ask)
			}
			c.Close()
			continue
		}
		var ue *UpgradeError
		if !errors.As(err, &ue) || ue.Kind != UpgradeTerminal || !strings.Contains(ue.Msg, `"`+tc.ask+`"`) {
			t.Errorf("ask %q answer %v: err %v, want a terminal UpgradeError naming the request", tc.ask, tc.answer, err)
			continue
		}
		if tc.answer == nil && !strings.Contains(ue.Msg, "no "+HeaderDurableAck) {
			t.Errorf("message %q does not say the header was missing", ue.Msg)
		}
		if tc.answer != nil && !strings.Contains(ue.Msg, `"`+*tc.answer+`"`) {
			t.Errorf("message %q does not quote the answer %q", ue.Msg, *tc.answer)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestDialResponseHeaders(t *testing.T) {
	for _, tc := range []struct {
		what     string
		h        http.Header
		kind     UpgradeErrorKind
		ok       bool
		contains string
	}{
		{"version 2", okHeaders(HeaderVersion, "2"), UpgradeVersionMismatch, false, `"2"`},
		{"version 0", okHeaders(HeaderVersion, "0"), UpgradeVersionMismatch, false, `"0"`},
		{"version garbage", okHeaders(HeaderVersion, "v1"), UpgradeVersionMismatch, false, `"v1"`},
		{"batch size garbage", okHeaders(HeaderMaxBatchSize, "2MB"), UpgradeTransient, false, `"2MB"`},
		{"batch size negative", okHeaders(HeaderMaxBatchSize, "-1"), UpgradeTransient, false, `"-1"`},
		{"batch size zero", okHeaders(HeaderMaxBatchSize, "0"), UpgradeTransient, false, `"0"`},
		{"batch size with spaces", okHeaders(HeaderMaxBatchSize, " 1000 "), 0, true, ""},
	} {
		url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header { return tc.h })
		c, err := Dial(context.Background(), DialOptions{URL: url})
		if tc.ok {
			if err != nil || c.MaxBatchSize != 1000 {
				t.Errorf("%s: %v %+v", tc.what, err, c)
			}
			if c != nil {
				c.Close()
			}
			continue
		}
		var ue *UpgradeError
		if !errors.As(err, &ue) || ue.Kind != tc.kind || ue.StatusCode != http.StatusSwitchingProtocols || !strings.Contains(ue.Msg, tc.contains) {
			t.Errorf("%s: err %v, want kind %s naming %s", tc.what, err, tc.kind, tc.contains)
		}
	}
}

func TestDialRefusals(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		code       int
		h          map[string]string
		body       string
		kind       UpgradeErrorKind
		role       string
		retryAfter time.Duration // exact, or -1: about an hour
	}{
		{401, nil, "", UpgradeTerminal, "", 0},
		{403, nil, "", UpgradeTerminal, "", 0},
		{421, map[string]string{HeaderRole: "REPLICA"}, "", UpgradeRoleReject, "REPLICA", 0},
		{421, map[string]string{HeaderRole: "PRIMARY_CATCHUP"}, "", UpgradeRoleReject, "PRIMARY_CATCHUP", 0},
		{421, nil, "", UpgradeTransient, "", 0},
		{503, map[string]string{"Retry-After": "7"}, "", UpgradeTransient, "", 7 * time.Second},
		{429, map[string]string{"Retry-After": future}, "", UpgradeTransient, "", -1},
		{503, nil, "", UpgradeTransient, "", 0},
		{500, map[string]string{"Retry-After": "7"}, "", UpgradeTransient, "", 0}, // only 429/503 carry it
		{404, nil, "", UpgradeTransient, "", 0},
		{426, map[string]string{"Sec-WebSocket-Version": "13"}, "", UpgradeTransient, "", 0},
		{400, nil, "Origin header not allowed", UpgradeTransient, "", 0},
	} {
		url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header {
			for k, v := range tc.h {
				w.Header().Set(k, v)
			}
			w.WriteHeader(tc.code)
			_, _ = w.Write([]byte(tc.body))
			return nil
		})
		_, err := Dial(context.Background(), DialOptions{URL: url})
		var ue *UpgradeError
		if !errors.As(err, &ue) {
			t.Fatalf("%d: err %v, want *UpgradeError", tc.code, err)
		}
		if ue.StatusCode != tc.code || ue.Kind != tc.kind || ue.Role != tc.role {
			t.Errorf("%d %v: got %+v", tc.code, tc.h, ue)
		}
		if tc.retryAfter >= 0 && ue.RetryAfter != tc.retryAfter {
			t.Errorf("%d %v: RetryAfter %v, want %v", tc.code, tc.h, ue.RetryAfter, tc.retryAfter)
		}
		if tc.retryAfter < 0 && (ue.RetryAfter < 50*time.Minute || ue.RetryAfter > time.Hour) {
			t.Errorf("%d %v: RetryAfter %v, want about an hour", tc.code, tc.h, ue.RetryAfter)
		}
		if !strings.Contains(ue.Error(), url) || !strings.Contains(ue.Error(), tc.body) {
			t.Errorf("%d: message %q does not name the endpoint and reason", tc.code, ue.Error())
		}
	}
}

func TestDialNetworkErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = Dial(context.Background(), DialOptions{URL: "ws://" + addr + "/write/v4"})
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.Kind != UpgradeTransient || ue.StatusCode != 0 || ue.Err == nil {
		t.Fatalf("refused connection: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	url := upgradeServer(t, func(w http.ResponseWriter, r *http.Request) http.Header { return okHeaders() })
	_, err = Dial(ctx, DialOptions{URL: url})
	if !errors.As(err, &ue) || ue.Kind != UpgradeTransient || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"7", 7 * time.Second}, {" 120 ", 2 * time.Minute}, {"0", 0}, {"-3", 0}, {"soon", 0},
		{"Mon, 30 Nov 2026 12:00:30 GMT", 30 * time.Second},
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute}, // RFC 850
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0},            // in the past
		{"99999999999999999999", 0},                     // overflows int64
		{"9223372036854775807", time.Duration(1<<63-1) / time.Second * time.Second},
	} {
		if got := parseRetryAfter(tc.v, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestUpgradeErrorKindString(t *testing.T) {
	for k, want := range map[UpgradeErrorKind]string{
		UpgradeTransient: "transient", UpgradeTerminal: "terminal", UpgradeRoleReject: "role_reject",
		UpgradeVersionMismatch: "version_mismatch", UpgradeErrorKind(9): "UpgradeErrorKind(9)",
	} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", int(k), k.String(), want)
		}
	}
}
