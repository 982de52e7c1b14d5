package questdbexporter

import (
	"context"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// TestSlotToolSettings maps a configuration as the exporter would, and
// CreateTables runs the DDL it is given with the configured credentials.
func TestSlotToolSettings(t *testing.T) {
	srv := newServer(t, qwptest.Options{Token: "tok"})
	cfg := testConfig(t, srv.Addr())
	cfg.Token = "tok"
	cfg.Tables.Gauge = "g"
	cfg.AttributesAsSymbols = []string{"host.name"}
	cfg.MetricAttributesType = "varchar"
	cfg.TTL = "2w"
	s, err := cfg.SlotToolSettings(context.Background(), "slot-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sender.Endpoints) != 1 || s.Sender.Endpoints[0] != srv.URL() || s.Sender.Token != "tok" ||
		s.Sender.ClientID != "otelcol-questdb/slot-a" || s.Tables.Gauge != "g" || !s.AttributesVarchar ||
		len(s.Promoted) != 1 || s.Promoted[0].Column != "host_name" || s.TTL != "2w" {
		t.Fatalf("settings %+v", s)
	}
	ddl, err := datamodel.DDL(s.Tables, s.AttributesVarchar, s.Promoted, s.TTL)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := CreateTables(context.Background(), srv.URL(), ddl[:1], s.Sender, nil); n != 0 || err != nil {
		t.Fatalf("CreateTables = %d, %v", n, err)
	}
	if td, ok := srv.Rows("g"); !ok || td.TTL != "2 WEEKS" || len(td.DedupKeys) != 2 || len(srv.TableNames()) != 1 {
		t.Errorf("tables %v, g: %+v", srv.TableNames(), td)
	}
	s.Sender.Token = "wrong"
	if n, err := CreateTables(context.Background(), srv.URL(), ddl[:1], s.Sender, nil); n == 0 && err == nil {
		t.Error("CreateTables with a wrong token succeeded")
	}

	cfg.TTL = "5x"
	if _, err := cfg.SlotToolSettings(context.Background(), "slot-a"); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("an invalid configuration: %v", err)
	}
}
