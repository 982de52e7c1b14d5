package questdbexporter

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/sender"
)

// What the operator tool cmd/questdb-slot takes from the exporter, so that a
// salvage connects, authenticates and creates tables exactly as the exporter
// would.

// SlotToolSettings is an exporter configuration as the slot tool uses it.
type SlotToolSettings struct {
	// Sender holds the endpoints (as URLs), credentials, TLS, limits,
	// backoff and error policies of the exporter's I/O loop.
	Sender sender.Options
	// The data model's table settings: table names, metric_attributes_type,
	// attributes_as_symbols and ttl.
	Tables            datamodel.Tables
	AttributesVarchar bool
	Promoted          []datamodel.PromotedColumn
	TTL               string
	// Durability is sf_durability: with "flush", a torn tail of the newest
	// segment holds only frames whose append never returned.
	Durability string
}

// SlotToolSettings validates c and maps it for the slot tool; senderID
// names the client in the upgrade request. sf_dir is not checked: the tool
// is given the slot's path, and may run where sf_dir is not.
func (c *Config) SlotToolSettings(ctx context.Context, senderID string) (SlotToolSettings, error) {
	if err := errors.Join(c.validateValues(), c.validateTLSFiles()); err != nil {
		return SlotToolSettings{}, err
	}
	o, err := c.senderOptions(ctx, senderID)
	if err != nil {
		return SlotToolSettings{}, err
	}
	rc := c.rowEncoderConfig(nil)
	return SlotToolSettings{Sender: o, Tables: rc.Tables, AttributesVarchar: rc.AttributesVarchar,
		Promoted: rc.Promoted, TTL: c.TTL, Durability: c.SFDurability}, nil
}

// CreateTables runs ddl over QuestDB's HTTP /exec beside the QWP endpoint
// wsURL with the exporter's table creator, with the TLS settings and
// credentials of o: each CREATE TABLE IF NOT EXISTS, then the check that
// existing tables have dedup keys (a warning on logger for each that has
// none). It returns how many statements QuestDB refused, and an error when
// QuestDB could not be asked.
func CreateTables(ctx context.Context, wsURL string, ddl []datamodel.TableDDL, o sender.Options, logger *zap.Logger) (refused int, err error) {
	tc, err := newTableCreator(tableCreatorConfig{DDL: ddl, TLS: o.TLS, Username: o.Username, Password: o.Password,
		Token: o.Token, Timeout: ddlTimeout, Logger: logger})
	if err != nil {
		return 0, err
	}
	defer tc.close()
	refused, err = tc.ensure(ctx, wsURL)
	var te *transientDDLError
	if errors.As(err, &te) {
		return refused, fmt.Errorf("QuestDB's /exec beside %s could not be asked: %w", wsURL, err)
	}
	return refused, err
}
