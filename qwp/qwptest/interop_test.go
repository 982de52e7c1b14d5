package qwptest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// TestDialInterop runs package qwp's handshake against this server: the
// two sides must agree on every header the I/O loop depends on.
func TestDialInterop(t *testing.T) {
	s := newServer(t, Options{DurableAck: true, DurableTiers: true, Role: "PRIMARY", Username: "admin", Password: "quest", RecvBufferSize: 1 << 20})
	ctx := context.Background()
	for _, tier := range []string{qwp.DurableAckNone, qwp.DurableAckLocal, qwp.DurableAckReplicated, qwp.DurableAckLocalReplicated} {
		c, err := qwp.Dial(ctx, qwp.DialOptions{URL: s.URL(), Username: "admin", Password: "quest", DurableAck: tier, ClientID: "interop/1"})
		require.NoError(t, err, "tier %q", tier)
		assert.Equal(t, 1, c.Version)
		assert.Equal(t, 1<<20-14, c.MaxBatchSize)
		assert.Equal(t, tier, c.DurableAck)
		assert.Equal(t, "PRIMARY", c.Role)
		require.NoError(t, c.WS.WriteMessage(websocket.BinaryMessage, longRows(0, "interop", 1)))
		_, b, err := c.WS.ReadMessage()
		require.NoError(t, err)
		var r qwp.Response
		require.NoError(t, qwp.DecodeResponse(b, &r))
		assert.Equal(t, qwp.StatusOK, r.Status)
		require.NoError(t, c.Close())
	}

	upgradeErr := func(o qwp.DialOptions) *qwp.UpgradeError {
		t.Helper()
		o.URL = s.URL()
		_, err := qwp.Dial(ctx, o)
		var ue *qwp.UpgradeError
		require.True(t, errors.As(err, &ue), "want an *UpgradeError, got %v", err)
		return ue
	}
	ue := upgradeErr(qwp.DialOptions{Username: "admin", Password: "wrong"})
	assert.Equal(t, 401, ue.StatusCode)
	assert.Equal(t, qwp.UpgradeTerminal, ue.Kind)

	s.RefuseUpgrades(1, Refusal{Status: 421, Role: "REPLICA"})
	ue = upgradeErr(qwp.DialOptions{Username: "admin", Password: "quest"})
	assert.Equal(t, qwp.UpgradeRoleReject, ue.Kind)
	assert.Equal(t, "REPLICA", ue.Role)

	s.RefuseUpgrades(1, Refusal{Status: 503, RetryAfter: "3"})
	ue = upgradeErr(qwp.DialOptions{Username: "admin", Password: "quest"})
	assert.Equal(t, qwp.UpgradeTransient, ue.Kind)
	assert.Equal(t, 3*time.Second, ue.RetryAfter)
}

func TestAuth(t *testing.T) {
	const adminQuest = "YWRtaW46cXVlc3Q=" // base64("admin:quest")
	cases := map[string]struct {
		opts Options
		auth string
		ok   bool
	}{
		"token: none":          {Options{Token: "tok"}, "", false},
		"token: wrong token":   {Options{Token: "tok"}, "Bearer nope", false},
		"token: basic instead": {Options{Token: "tok"}, "Basic " + adminQuest, false},
		"token: right token":   {Options{Token: "tok"}, "Bearer tok", true},
		"basic: none":          {Options{Username: "admin", Password: "quest"}, "", false},
		"basic: right":         {Options{Username: "admin", Password: "quest"}, "Basic " + adminQuest, true},
		"basic: wrong":         {Options{Username: "admin", Password: "quest"}, "Basic YWRtaW46bm9wZQ==", false},
		"basic: a token":       {Options{Username: "admin", Password: "quest"}, "Bearer tok", false},
		// QuestDB compares the header byte for byte with "Basic " + base64
		"basic: lower-case scheme": {Options{Username: "admin", Password: "quest"}, "basic " + adminQuest, false},
		"basic: two spaces":        {Options{Username: "admin", Password: "quest"}, "Basic  " + adminQuest, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, tc.opts)
			h := map[string][]string{}
			if tc.auth != "" {
				h["Authorization"] = []string{tc.auth}
			}
			for _, path := range []string{"/write/v4", "/api/v4/write"} {
				c, resp, err := dialPath(t, s, path, h)
				if tc.ok {
					require.NoError(t, err, path)
					c.send(nil)
					c.ackedThrough(0)
					continue
				}
				require.Error(t, err, path)
				assert.Equal(t, 401, resp.StatusCode, path)
				resp.Body.Close()
			}
			req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/exec?query="+url.QueryEscape("SELECT * FROM tables()"), nil)
			require.NoError(t, err)
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			want := http.StatusUnauthorized
			if tc.ok {
				want = http.StatusOK
			}
			assert.Equal(t, want, resp.StatusCode, "/exec")
		})
	}
}
