package sqlkeywords

import "testing"

func TestIs(t *testing.T) {
	for name, want := range map[string]bool{
		"order": true, "LIMIT": true, "From": true, "end": true, "table": true, "within": true,
		"orders": false, "timestamp": false, "series_id": false, "host_name": false, "": false,
	} {
		if got := Is(name); got != want {
			t.Errorf("Is(%q) = %v, want %v", name, got, want)
		}
	}
}
