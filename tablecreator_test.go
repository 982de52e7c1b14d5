package questdbexporter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestExecURL(t *testing.T) {
	for in, want := range map[string]string{
		"ws://127.0.0.1:9000/write/v4":           "http://127.0.0.1:9000/exec",
		"wss://db.example:9000/api/v4/write?x=1": "https://db.example:9000/exec",
	} {
		got, err := execURL(in)
		if err != nil || got != want {
			t.Errorf("execURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := execURL("http://x:1/"); err == nil {
		t.Error("a non-WebSocket endpoint must be refused")
	}
}

// fakeExec is a QuestDB /exec endpoint: it records statements, fails the
// ones the test names, and reports a table list for the dedup check.
type fakeExec struct {
	mu      sync.Mutex
	queries []string
	auth    []string
	fail    map[string]bool
	tables  [][]any
}

func (f *fakeExec) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path != "/exec":
		w.WriteHeader(http.StatusNotFound)
	case strings.HasPrefix(q, "SELECT"):
		_ = json.NewEncoder(w).Encode(map[string]any{"columns": []map[string]string{{"name": "table_name"}, {"name": "dedup"}}, "dataset": f.tables})
	case f.fail[strings.Fields(q)[5]]:
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"query": q, "error": "table busy", "position": 0})
	default:
		_, _ = w.Write([]byte(`{"ddl":"OK"}`))
	}
}

func TestTableCreatorEnsure(t *testing.T) {
	fe := &fakeExec{
		fail:   map[string]bool{"otel_metrics_sum": true},
		tables: [][]any{{"otel_metrics_gauge", false}, {"otel_logs", true}, {"unrelated", false}},
	}
	srv := httptest.NewServer(fe)
	defer srv.Close()
	core, logs := observer.New(zapcore.InfoLevel)
	tc, err := newTableCreator(tableCreatorConfig{
		Tables: datamodel.DefaultTables(), Username: "admin", Password: "quest", Logger: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/write/v4"
	if refused, err := tc.ensure(context.Background(), ws); refused != 1 || err != nil {
		t.Fatalf("ensure = %d refused, %v; want 1 (the sum table) and no transient error", refused, err)
	}
	if len(fe.queries) != len(tc.ddl)+1 {
		t.Fatalf("%d statements, want %d CREATEs and the dedup check: %q", len(fe.queries), len(tc.ddl), fe.queries)
	}
	for _, a := range fe.auth {
		if a != "Basic YWRtaW46cXVlc3Q=" {
			t.Fatalf("Authorization = %q, want the configured basic credentials", a)
		}
	}
	failedLogs := logs.FilterMessageSnippet("CREATE TABLE failed").All()
	if len(failedLogs) != 1 || !strings.Contains(failedLogs[0].ContextMap()["statement"].(string), "otel_metrics_sum") {
		t.Fatalf("the failed statement must be logged with its SQL: %v", failedLogs)
	}
	warn := logs.FilterMessageSnippet("exists without dedup keys").All()
	if len(warn) != 1 || warn[0].ContextMap()["fix"] != "ALTER TABLE otel_metrics_gauge DEDUP ENABLE UPSERT KEYS(timestamp, series_id)" {
		t.Fatalf("want one warning naming the ALTER TABLE for the gauge table: %v", warn)
	}
	// A second connection runs the DDL again but does not repeat the warning.
	if _, err := tc.ensure(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessageSnippet("exists without dedup keys").Len(); n != 1 {
		t.Fatalf("dedup warning logged %d times, want once", n)
	}
}

func TestTableCreatorBearerTokenAndUnreachableServer(t *testing.T) {
	fe := &fakeExec{}
	srv := httptest.NewServer(fe)
	tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/write/v4"
	if n, err := tc.ensure(context.Background(), ws); n != 0 || err != nil {
		t.Fatalf("%d refused, %v against a healthy server", n, err)
	}
	if fe.auth[0] != "Bearer tok" {
		t.Fatalf("Authorization = %q", fe.auth[0])
	}
	srv.Close()
	n, err := tc.ensure(context.Background(), ws)
	var te *transientDDLError
	if !errors.As(err, &te) || n != 0 {
		t.Fatalf("unreachable server: %d refused, %v; want a transient error and nothing counted as refused", n, err)
	}
}

// A 5xx, 429 or a reply that is not QuestDB's is transient: ensure stops at
// the first one and reports it, so the caller retries on a new connection
// instead of letting the first frame auto-create a table without dedup keys.
func TestTableCreatorTransientFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"503", http.StatusServiceUnavailable, `{"error":"restarting"}`},
		{"429", http.StatusTooManyRequests, ""},
		{"proxy page", http.StatusOK, "<html>gateway</html>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables()})
			if err != nil {
				t.Fatal(err)
			}
			defer tc.close()
			n, err := tc.ensure(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/write/v4")
			var te *transientDDLError
			if !errors.As(err, &te) || n != 0 || calls != 1 {
				t.Fatalf("ensure = %d refused, %v after %d requests; want a transient error at the first statement", n, err, calls)
			}
		})
	}
}
