package qwptest

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func adminDo(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestAdminTables(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	p := append(blockHeader("mix", 2,
		"d", qwp.TypeDouble, "s", qwp.TypeVarchar, "a", qwp.TypeDoubleArray, "u", qwp.TypeUUID, "dec", qwp.TypeDecimal64, "", qwp.TypeTimestamp),
		wire{}.u8(0).f64(math.NaN()).f64(1.5).
			u8(1, 0x02).u32(0).u32(2).u8('h', 'i').
			u8(0).u8(2).u32(2).u32(1).f64(1).f64(2).u8(2).u32(2).u32(0).
			u8(0).u64(1).u64(2).u64(3).u64(4).
			u8(0, 2).i64(-150).i64(5).
			u8(0).i64(10).i64(20)...)
	c.send(message(0, 1, p), longRows(0, "other", 4))
	c.ackedThrough(1)
	h := s.AdminHandler()

	rec := adminDo(t, h, http.MethodGet, "/tables")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"mix":2,"other":4}`, rec.Body.String())

	rec = adminDo(t, h, http.MethodGet, "/tables/MIX")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"name":"mix","row_count":2,
		"columns":[{"name":"d","type":"DOUBLE"},{"name":"s","type":"VARCHAR"},{"name":"a","type":"DOUBLE_ARRAY"},
			{"name":"u","type":"UUID"},{"name":"dec","type":"DECIMAL64"},{"name":"timestamp","type":"TIMESTAMP"}],
		"rows":[[null,"hi",[[1],[2]],"00000000-0000-0002-0000-000000000001","-1.50",10],
			[1.5,null,[[],[]],"00000000-0000-0004-0000-000000000003","0.05",20]]}`, rec.Body.String())

	rec = adminDo(t, h, http.MethodGet, "/tables/other?limit=1")
	var td struct{ Rows [][]any }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &td))
	assert.Len(t, td.Rows, 1)

	// the same handler is mounted on the server's port
	resp, err := http.Get("http://" + s.Addr() + "/tables/other?limit=0")
	require.NoError(t, err)
	defer resp.Body.Close()
	var td2 struct {
		RowCount int64 `json:"row_count"`
		Rows     [][]any
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&td2))
	assert.Equal(t, int64(4), td2.RowCount)
	assert.Empty(t, td2.Rows)
}

func TestAdminRefusals(t *testing.T) {
	s := newServer(t, Options{})
	h := s.AdminHandler()
	cases := []struct {
		method, target string
		code           int
		body           string
	}{
		{http.MethodGet, "/tables/nope", http.StatusNotFound, `table "nope" does not exist`},
		{http.MethodGet, "/tables/x?limit=-1", http.StatusBadRequest, `limit "-1"`},
		{http.MethodGet, "/tables/x?limit=abc", http.StatusBadRequest, `limit "abc"`},
		{http.MethodPost, "/outage", http.StatusBadRequest, `seconds ""`},
		{http.MethodPost, "/outage?seconds=-2", http.StatusBadRequest, `seconds "-2"`},
		{http.MethodPost, "/outage?seconds=NaN", http.StatusBadRequest, `seconds "NaN"`},
		{http.MethodPost, "/tables", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/outage", http.StatusMethodNotAllowed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec := adminDo(t, h, tc.method, tc.target)
			assert.Equal(t, tc.code, rec.Code)
			assert.Contains(t, rec.Body.String(), tc.body)
		})
	}
}

func TestAdminOutage(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(longRows(0, "t", 2))
	c.ackedThrough(0)
	rec := adminDo(t, s.AdminHandler(), http.MethodPost, "/outage?seconds=30")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"outage":"30s"}`, rec.Body.String())
	c.expect("gone")
	_, resp, err := dialPath(t, s, "/write/v4", nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, map[string]int64{"t": 2}, s.Tables(), "tables survive the outage")
	assert.True(t, strings.HasPrefix(s.URL(), "ws://127.0.0.1:"))
}

func TestJSONValue(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{math.Inf(1), `"+Inf"`},
		{math.Inf(-1), `"-Inf"`},
		{float32(1.5), `1.5`},
		{Long256{1, 0, 0, 0}, `"0x0000000000000000000000000000000000000000000000000000000000000001"`},
		{Array{Shape: []int32{2, 2}, Longs: []int64{1, 2, 3, 4}}, `[[1,2],[3,4]]`},
		{Array{Shape: []int32{0}, Doubles: []float64{}}, `[]`},
		{Array{Shape: []int32{1, 0, 2}, Doubles: []float64{}}, `[[]]`},
		{[]byte{0xFF}, `"/w=="`},
		{int16(-3), `-3`},
		{nil, `null`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(jsonValue(tc.in))
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b), "%#v", tc.in)
	}
}
