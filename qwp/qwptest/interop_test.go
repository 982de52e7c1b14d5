package qwptest

import (
	"context"
	"errors"
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
	s := newServer(t, Options{Token: "tok"})
	cases := map[string]struct {
		auth string
		ok   bool
	}{
		"none":          {"", false},
		"wrong token":   {"Bearer nope", false},
		"basic instead": {"Basic YWRtaW46cXVlc3Q=", false},
		"right token":   {"Bearer tok", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := map[string][]string{}
			if tc.auth != "" {
				h["Authorization"] = []string{tc.auth}
			}
			c, resp, err := dialPath(t, s, "/write/v4", h)
			if tc.ok {
				require.NoError(t, err)
				c.send(nil)
				c.ackedThrough(0)
				return
			}
			require.Error(t, err)
			assert.Equal(t, 401, resp.StatusCode)
			resp.Body.Close()
		})
	}
}
