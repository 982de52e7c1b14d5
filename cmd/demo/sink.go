package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sinkClient reads what landed in qwpsink through its admin endpoints.
type sinkClient struct {
	base string // http://127.0.0.1:port
	hc   *http.Client
}

// tableRows is qwpsink's GET /tables/{name} answer.
type tableRows struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows [][]any `json:"rows"`
	// DedupKeys and TTL are the table's DEDUP UPSERT KEYS and TTL, absent
	// for a table QWP auto-created.
	DedupKeys []string `json:"dedup_keys"`
	TTL       string   `json:"ttl"`
}

// column returns the index of the named column, or -1.
func (t *tableRows) column(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

func (s *sinkClient) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errNoTable
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber() // int64 nanosecond timestamps do not survive float64
	return dec.Decode(into)
}

// tables returns the row count of every table.
func (s *sinkClient) tables(ctx context.Context) (map[string]int64, error) {
	m := map[string]int64{}
	err := s.get(ctx, "/tables", &m)
	return m, err
}

// errNoTable is the sink's 404: no row has reached the table yet.
var errNoTable = errors.New("no such table")

// rows returns up to limit rows of a table; a table that does not exist yet
// has no rows.
func (s *sinkClient) rows(ctx context.Context, table string, limit int) (*tableRows, error) {
	var t tableRows
	err := s.get(ctx, "/tables/"+url.PathEscape(table)+"?limit="+itoa(limit), &t)
	if errors.Is(err, errNoTable) {
		return &tableRows{}, nil
	}
	return &t, err
}

// maxFrameBytes is the size of the largest QWP message (one WebSocket
// frame each) the sink has received.
func (s *sinkClient) maxFrameBytes(ctx context.Context) (int64, error) {
	var st struct {
		MaxFrameBytes int64 `json:"max_frame_bytes"`
	}
	err := s.get(ctx, "/stats", &st)
	return st.MaxFrameBytes, err
}

// checkBigFrames reports the largest message the sink received, and fails
// unless it is over 64 KiB: the size past which a client that cut messages
// into several WebSocket frames would have done so, and QuestDB refused them.
func (s *sinkClient) checkBigFrames(ctx context.Context) error {
	n, err := s.maxFrameBytes(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("largest QWP message the sink received: %d bytes (%.1f KiB), one WebSocket frame\n", n, float64(n)/1024)
	if n <= 64<<10 {
		return fmt.Errorf("the largest QWP message was %d bytes: the bulk load did not exercise messages over 64 KiB", n)
	}
	return nil
}

// outage makes the sink drop every connection and refuse new ones for d,
// keeping its tables, as a restarted QuestDB would.
func (s *sinkClient) outage(ctx context.Context, d time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		fmt.Sprintf("%s/outage?seconds=%d", s.base, int(d/time.Second)), nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /outage: %s", resp.Status)
	}
	return nil
}

// queueBytes reads the exporter's own queue_bytes gauge from the collector's
// Prometheus endpoint: the bytes the queue holds (acknowledged frames are
// freed a whole segment at a time).
func queueBytes(ctx context.Context, endpoint string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return parseGauge(resp.Body, "otelcol_exporter_questdb_queue_bytes")
}

// parseGauge sums the samples of one metric in Prometheus text format.
func parseGauge(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // a longer metric name with this prefix
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s in the collector's telemetry", name)
	}
	return int64(sum), nil
}
