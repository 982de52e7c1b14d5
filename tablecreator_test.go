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
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
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
		_ = json.NewEncoder(w).Encode(map[string]any{"query": q, "error": "unsupported column type: FOO", "position": 42})
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
	var counted []string
	var outcomes []error
	tc, err := newTableCreator(tableCreatorConfig{
		Tables: datamodel.DefaultTables(), Username: "admin", Password: "quest", Logger: zap.New(core), TTL: "30d",
		OnRefused: func(table string) { counted = append(counted, table) },
		OnOutcome: func(err error) { outcomes = append(outcomes, err) },
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
	// The refusal is loud: Error, with the SQL, QuestDB's message and the fix.
	failedLogs := logs.FilterMessageSnippet("QuestDB refused the CREATE TABLE").All()
	if len(failedLogs) != 1 || failedLogs[0].Level != zapcore.ErrorLevel {
		t.Fatalf("want one Error log for the refused statement: %v", failedLogs)
	}
	fields := failedLogs[0].ContextMap()
	fix, _ := fields["fix"].([]any)
	if !strings.Contains(fields["statement"].(string), "otel_metrics_sum") ||
		!strings.Contains(fields["error"].(string), "unsupported column type: FOO") ||
		len(fix) != 2 || fix[0] != "ALTER TABLE otel_metrics_sum DEDUP ENABLE UPSERT KEYS(timestamp, series_id)" ||
		fix[1] != "ALTER TABLE otel_metrics_sum SET TTL 30 DAYS" {
		t.Fatalf("the log must carry the statement, QuestDB's message and the fixing statements: %v", fields)
	}
	warn := logs.FilterMessageSnippet("exists without dedup keys").All()
	if len(warn) != 1 || warn[0].ContextMap()["fix"] != "ALTER TABLE otel_metrics_gauge DEDUP ENABLE UPSERT KEYS(timestamp, series_id)" {
		t.Fatalf("want one warning naming the ALTER TABLE for the gauge table: %v", warn)
	}
	if len(outcomes) != 1 || outcomes[0] == nil || !strings.Contains(outcomes[0].Error(), "otel_metrics_sum refused") ||
		!strings.Contains(outcomes[0].Error(), "otel_metrics_gauge has no dedup keys") {
		t.Fatalf("the outcome must name the refused table and the one without keys: %v", outcomes)
	}
	// A second connection runs the DDL again, counts the refusal again, but
	// logs neither the refusal nor the warning twice.
	if _, err := tc.ensure(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterMessageSnippet("exists without dedup keys").Len(); n != 1 {
		t.Fatalf("dedup warning logged %d times, want once", n)
	}
	if n := logs.FilterMessageSnippet("QuestDB refused the CREATE TABLE").Len(); n != 1 {
		t.Fatalf("refusal logged %d times, want once per table", n)
	}
	if len(counted) != 2 || counted[0] != "otel_metrics_sum" || counted[1] != "otel_metrics_sum" {
		t.Fatalf("counted refusals %v, want the sum table once per connection", counted)
	}
	// Once QuestDB takes every statement and the tables have their keys,
	// the outcome clears.
	fe.mu.Lock()
	fe.fail, fe.tables = nil, [][]any{{"otel_metrics_gauge", true}}
	fe.mu.Unlock()
	if _, err := tc.ensure(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if last := outcomes[len(outcomes)-1]; last != nil {
		t.Fatalf("outcome %v after a clean run, want nil", last)
	}
}

// TestTableCreatorClassifiesQuestDBAnswers sorts the answers QuestDB's
// JsonQueryProcessor gives into refusals of the statement (final, loud),
// failures of the moment (retried on a new connection) and uncertain ones
// (retried a bounded number of times). The messages are QuestDB's own.
func TestTableCreatorClassifiesQuestDBAnswers(t *testing.T) {
	const (
		refusal = iota
		passing
		uncertain
	)
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   int
	}{
		{"parse error", 400, `{"query":"q","error":"unexpected token [TTL]","position":374}`, refusal},
		{"keyword", 400, `{"query":"q","error":"table and column names that are SQL keywords have to be enclosed in double quotes, such as \"order\"","position":331}`, refusal},
		// Permanent engine errors come at position 0.
		{"read-only instance", 403, `{"query":"q","error":"Write permission denied","position":0}`, refusal},
		{"permission denied at 0", 400, `{"query":"q","error":"permission denied","position":0}`, refusal},
		{"invalid table name at 0", 400, `{"query":"q","error":"invalid table name [table=a/b]","position":0}`, refusal},
		{"forbidden, no JSON", 403, "Forbidden", refusal},
		{"unauthorized", 401, "Unauthorized", refusal},
		{"no /exec", 404, "not found", refusal},
		{"busy", 400, `{"query":"q","error":"resource is busy and retry queue is full","position":0}`, passing},
		{"timeout", 400, `{"query":"q","error":"timeout, query aborted [fd=12, runtime=5001ms, timeout=5000ms]","position":0}`, passing},
		{"async timeout", 400, `{"query":"q","error":"Query timeout. Please add HTTP header 'Statement-Timeout' with timeout in ms [timeout=5000ms]","position":0}`, passing},
		{"cancelled", 400, `{"query":"q","error":"cancelled by user [fd=12]","position":0}`, passing},
		{"500", 500, `{"query":"q","error":"unexpected","position":0}`, passing},
		{"503", 503, `{"error":"restarting"}`, passing},
		{"429", 429, "", passing},
		{"reserved name", 400, `{"query":"q","error":"name is reserved [table=otel_logs]","position":0}`, uncertain},
		{"already exists", 400, `{"query":"q","error":"table already exists","position":27}`, uncertain},
		{"engine error", 400, `{"query":"q","error":"could not open read-write [file=/db/x]","position":0}`, uncertain},
		{"no position", 400, `{"query":"q","error":"something"}`, uncertain},
		{"proxy page", 200, "<html>gateway</html>", uncertain},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables()})
			if err != nil {
				t.Fatal(err)
			}
			defer tc.close()
			_, err = tc.exec(context.Background(), srv.URL+"/exec", "CREATE TABLE IF NOT EXISTS x (a INT)")
			var te *transientDDLError
			var re *refusedDDLError
			switch {
			case c.want == refusal && !errors.As(err, &re):
				t.Fatalf("%v, want a refusal", err)
			case c.want != refusal && !errors.As(err, &te):
				t.Fatalf("%v, want a transient error", err)
			case c.want != refusal && te.uncertain != (c.want == uncertain):
				t.Fatalf("%v: uncertain = %v, want %v", err, te.uncertain, c.want == uncertain)
			}
		})
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

// A failure of the moment stops ensure at the first statement: the caller
// retries on a new connection instead of letting the first frame
// auto-create a table without dedup keys, and nothing is counted.
func TestTableCreatorStopsAtTransientFailure(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.FailExec(1, qwptest.ExecFailure{Message: "resource is busy and retry queue is full"})
	var counted []string
	tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables(),
		OnRefused: func(table string) { counted = append(counted, table) }})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	n, err := tc.ensure(context.Background(), srv.URL())
	var te *transientDDLError
	if !errors.As(err, &te) || n != 0 || len(counted) != 0 || len(srv.TableNames()) != 0 {
		t.Fatalf("ensure = %d refused, %v, counted %v, tables %v; want a transient error before any table", n, err, counted, srv.TableNames())
	}
	if n, err := tc.ensure(context.Background(), srv.URL()); n != 0 || err != nil {
		t.Fatalf("retry: %d refused, %v", n, err)
	}
	if len(srv.TableNames()) != len(tc.ddl) {
		t.Fatalf("tables %v after the retry, want all %d", srv.TableNames(), len(tc.ddl))
	}
}

// An uncertain failure holds the frames for maxUncertain runs in a row, then
// is refused (loud, counted) so the rows flow; while it persists later runs
// refuse it at once, and a clean run starts the count again.
func TestTableCreatorBoundsUncertainFailures(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	core, logs := observer.New(zapcore.InfoLevel)
	var counted []string
	tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables(), Logger: zap.New(core),
		OnRefused: func(table string) { counted = append(counted, table) }})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	tc.maxUncertain = 3
	diskFull := qwptest.ExecFailure{Message: "could not open read-write [file=/db/otel_metrics_gauge~1/_meta, errno=28]"}
	srv.FailExec(2+len(tc.ddl)+1+len(tc.ddl)+1, diskFull)
	for run := 1; run < tc.maxUncertain; run++ {
		n, err := tc.ensure(context.Background(), srv.URL())
		var te *transientDDLError
		if !errors.As(err, &te) || !te.uncertain || n != 0 || len(counted) != 0 {
			t.Fatalf("run %d: %d refused, %v, counted %v; want an uncertain failure that holds the frames", run, n, err, counted)
		}
	}
	// The bound is reached: every statement of the run is refused, the
	// dedup check too, and the rows are free to go.
	if n, err := tc.ensure(context.Background(), srv.URL()); n != len(tc.ddl) || err != nil {
		t.Fatalf("run %d: %d refused, %v; want all %d refused and no error", tc.maxUncertain, n, err, len(tc.ddl))
	}
	if len(counted) != len(tc.ddl) {
		t.Fatalf("counted %v, want each table once", counted)
	}
	errs := logs.FilterMessageSnippet("QuestDB refused the CREATE TABLE").All()
	if len(errs) != len(tc.ddl) || errs[0].Level != zapcore.ErrorLevel ||
		!strings.Contains(errs[0].ContextMap()["error"].(string), "no definite answer in 3 runs") ||
		!strings.Contains(errs[0].ContextMap()["error"].(string), "errno=28") {
		t.Fatalf("want one Error per table naming the bound and QuestDB's message: %v", errs)
	}
	// Still the same answer: refused at once, not held again.
	if n, err := tc.ensure(context.Background(), srv.URL()); n != len(tc.ddl) || err != nil {
		t.Fatalf("after the bound: %d refused, %v; want all refused at once", n, err)
	}
	// The fault is gone: the run is clean and the count starts again.
	if n, err := tc.ensure(context.Background(), srv.URL()); n != 0 || err != nil {
		t.Fatalf("clean run: %d refused, %v", n, err)
	}
	srv.FailExec(1, diskFull)
	n, err := tc.ensure(context.Background(), srv.URL())
	var te *transientDDLError
	if !errors.As(err, &te) || !te.uncertain || n != 0 {
		t.Fatalf("after a clean run: %d refused, %v; want the frames held again", n, err)
	}
}

// A permanent refusal at position 0 is final at once: it never holds the
// frames, and a run with one does not count toward the bound.
func TestTableCreatorRefusesPermanentPositionZero(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	tc, err := newTableCreator(tableCreatorConfig{Tables: datamodel.DefaultTables()})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.close()
	srv.FailExec(len(tc.ddl)+1, qwptest.ExecFailure{Message: "permission denied"})
	if n, err := tc.ensure(context.Background(), srv.URL()); n != len(tc.ddl) || err != nil {
		t.Fatalf("%d refused, %v; want every CREATE TABLE refused in the first run", n, err)
	}
	if len(srv.TableNames()) != 0 || tc.uncertainRuns != 0 {
		t.Fatalf("tables %v, uncertain runs %d; want none", srv.TableNames(), tc.uncertainRuns)
	}
}
