package qwptest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// DefaultRowLimit is the number of rows GET /tables/{name} returns without
// a limit parameter.
const DefaultRowLimit = 1000

// AdminHandler serves the server's inspection API (also mounted on the
// server's own port next to the QWP endpoints):
//
//	GET  /tables               {"table": rowCount, ...}
//	GET  /tables/{name}?limit=N {"name", "row_count", "columns": [{"name","type"}], "rows": [[...]]},
//	                           the first N rows (default DefaultRowLimit) in commit order,
//	                           and "dedup_keys": [...], "ttl" when the table has them
//	GET  /stats                {"frames": N, "max_frame_bytes": N}: Frames and MaxFrameBytes
//	POST /outage?seconds=N     Outage for N seconds (fractions allowed)
//
// Values are JSON numbers, booleans, strings (SYMBOL, VARCHAR, UUID,
// LONG256, decimals; BINARY as base64; NaN and infinities as "NaN", "+Inf",
// "-Inf"), nested lists (arrays, by shape) or null.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tables", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Tables())
	})
	mux.HandleFunc("GET /tables/{name}", func(w http.ResponseWriter, r *http.Request) {
		limit := DefaultRowLimit
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				http.Error(w, fmt.Sprintf("limit %q is not a non-negative integer", v), http.StatusBadRequest)
				return
			}
			limit = n
		}
		td, ok := s.rowsLimit(r.PathValue("name"), limit)
		if !ok {
			http.Error(w, fmt.Sprintf("table %q does not exist", r.PathValue("name")), http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, tableJSON(td))
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"frames": s.Frames(), "max_frame_bytes": s.MaxFrameBytes()})
	})
	mux.HandleFunc("POST /outage", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
		if err != nil || secs < 0 || math.IsInf(secs, 0) || math.IsNaN(secs) {
			http.Error(w, fmt.Sprintf("seconds %q is not a non-negative number", r.URL.Query().Get("seconds")), http.StatusBadRequest)
			return
		}
		d := time.Duration(secs * float64(time.Second))
		s.Outage(d)
		writeJSON(w, http.StatusOK, map[string]string{"outage": d.String()})
	})
	return mux
}

type columnJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type tableDataJSON struct {
	Name     string       `json:"name"`
	RowCount int64        `json:"row_count"`
	Columns  []columnJSON `json:"columns"`
	Rows     [][]any      `json:"rows"`
	// DedupKeys and TTL are left out for a table without them.
	DedupKeys []string `json:"dedup_keys,omitempty"`
	TTL       string   `json:"ttl,omitempty"`
}

func tableJSON(td TableData) tableDataJSON {
	out := tableDataJSON{Name: td.Name, RowCount: td.RowCount, Columns: make([]columnJSON, len(td.Columns)), Rows: make([][]any, len(td.Rows)),
		DedupKeys: td.DedupKeys, TTL: td.TTL}
	for i, c := range td.Columns {
		out.Columns[i] = columnJSON{Name: c.Name, Type: c.Type.String()}
	}
	for i, row := range td.Rows {
		jr := make([]any, len(row))
		for j, v := range row {
			jr[j] = jsonValue(v)
		}
		out.Rows[i] = jr
	}
	return out
}

// jsonValue maps a stored value to something encoding/json renders as the
// handler documents.
func jsonValue(v any) any {
	switch x := v.(type) {
	case float64:
		return jsonFloat(x)
	case float32:
		return jsonFloat(float64(x))
	case UUID, Long256, Decimal:
		return fmt.Sprint(x)
	case Array:
		if x.Doubles != nil {
			return nest(x.Shape, func(i int) any { return jsonFloat(x.Doubles[i]) })
		}
		return nest(x.Shape, func(i int) any { return x.Longs[i] })
	}
	return v
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

// nest renders row-major elements as nested lists of the given shape.
func nest(shape []int32, elem func(int) any) any {
	next := 0
	var build func(dim int) []any
	build = func(dim int) []any {
		out := make([]any, 0, shape[dim])
		for range int(shape[dim]) {
			if dim == len(shape)-1 {
				out = append(out, elem(next))
				next++
			} else {
				out = append(out, build(dim+1))
			}
		}
		return out
	}
	return build(0)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
