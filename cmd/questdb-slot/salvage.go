package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	questdbexporter "github.com/questdbexporter/questdbexporter"
	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// salvageFlags are the options of the salvage command.
type salvageFlags struct {
	slot                      string
	endpoint                  string
	config, exporter          string
	username, password, token string
	passwordFile, tokenFile   string
	all, delete               bool
	// acceptLoss is --accept-loss: the frames nothing can send that the
	// operator accepts to lose (-1: none given). --delete then removes a
	// slot whose only undelivered frames are those, if it is exactly their
	// count.
	acceptLoss int64
	timeout    time.Duration
}

func salvageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("questdb-slot salvage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f salvageFlags
	fs.StringVar(&f.endpoint, "endpoint", "", "QuestDB's QWP endpoint, ws://host:9000 or wss://host:9000 (default: the first endpoint of --config)")
	fs.StringVar(&f.config, "config", "", "collector YAML whose exporters.questdb section gives table names, attributes_as_symbols, metric_attributes_type, ttl, credentials and TLS")
	fs.StringVar(&f.exporter, "exporter", "", `the exporter of --config to use ("questdb/primary"), when it has several`)
	fs.StringVar(&f.username, "username", "", "HTTP basic auth user (overrides --config)")
	fs.StringVar(&f.password, "password", "", "HTTP basic auth password (overrides --config; other users see it in ps: prefer --password-file)")
	fs.StringVar(&f.passwordFile, "password-file", "", "read the HTTP basic auth password from this file (one line)")
	fs.StringVar(&f.token, "token", "", "bearer token (overrides --config; other users see it in ps: prefer --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file (one line)")
	fs.BoolVar(&f.all, "all", false, "send the frames at or below the acknowledged watermark too")
	fs.BoolVar(&f.delete, "delete", false, "delete the slot after a complete salvage (every frame in scope delivered, none unreadable or refused)")
	fs.Int64Var(&f.acceptLoss, "accept-loss", -1, "with --delete: delete a slot whose only undelivered frames are ones nothing can send (damaged, of unknown FSN, or lacking their dictionary), accepting their loss; give their exact count, as the salvage reports it (it refuses any other number)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up waiting for QuestDB's acknowledgements after this long")
	// The slot may come before or after the flags.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		f.slot, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.slot == "" && fs.NArg() == 1 {
		f.slot = fs.Arg(0)
	} else if fs.NArg() != 0 || f.slot == "" {
		fmt.Fprint(stderr, "usage: questdb-slot salvage <slot> --endpoint ws://host:9000 [--config collector.yaml] [--all] [--delete]\n")
		return 2
	}
	// --accept-loss only narrows what --delete may delete: alone it would
	// be a deletion the operator believes ordered and that never happens.
	// Whether it was given, not its value: -1, the default, is also a
	// negative count an operator may type.
	acceptLossSet := false
	fs.Visit(func(fl *flag.Flag) { acceptLossSet = acceptLossSet || fl.Name == "accept-loss" })
	if acceptLossSet && (!f.delete || f.acceptLoss < 0) {
		fmt.Fprintf(stderr, "questdb-slot salvage: --accept-loss=%d needs --delete and a count of 0 or more, the frames the salvage reports it cannot send\n", f.acceptLoss)
		return 2
	}
	if f.endpoint == "" && f.config == "" {
		fmt.Fprint(stderr, "questdb-slot salvage: give --endpoint (or --config with endpoints)\n")
		return 2
	}
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		// Locked: the sender logs from more than one goroutine, and stderr
		// need not be an *os.File (tests pass a buffer).
		zapcore.Lock(zapcore.AddSync(stderr)), zap.WarnLevel))
	rep, err := salvage(ctx, f, logger)
	if rep != nil {
		rep.print(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "questdb-slot: %v\n", err)
		return 1
	}
	if !rep.complete() && !rep.lossAccepted {
		return 1
	}
	return 0
}

// salvageReport is what a salvage did.
type salvageReport struct {
	slot     string
	endpoint string
	acked    uint64 // the watermark
	all      bool
	tables   []string // tables created (if missing) with the exporter's DDL
	ddlNotes []string // how each table's DDL was chosen
	refused  int      // DDL statements QuestDB refused

	skippedAcked int      // readable frames at or below the watermark, not sent
	sent         []uint64 // FSNs delivered (acknowledged), ascending
	rows         int      // rows in the delivered frames
	notSent      []string // frames refused before sending, and why (each is in unsendable)
	unsent       []uint64 // frames in scope not delivered (the sender stopped or timed out)
	sendErr      string
	unreadable   []string // unreadable ranges in scope
	// damaged counts the FSNs of the unreadable ranges in scope that are
	// no valid frame; strays the valid frames in them whose FSN nothing
	// fixes (sfqueue.FSNRange.Strays); damagedUnknown: a range's end is
	// unknown, so its damage cannot be counted (nor accepted).
	damaged, strays uint64
	damagedUnknown  bool
	// unsendable holds the readable frames in scope that what the slot
	// holds keeps from being sent, by cause, as FSNs.
	unsendable   map[refusal][]uint64
	dictNote     string   // the state of the dictionary generations of unsendable[refusedDict]
	lossAccepted bool     // --accept-loss matched lost() and the slot was deleted
	torn         []string // a flush-mode slot's torn tail: frames no caller was told were stored
	window       []string // frames lost in the durability mode's loss window (counted by recovery), not to be found
	deleted      string   // what --delete did
}

// refusal is why a readable frame cannot be sent.
type refusal int

const (
	// refusedDict: its dictionary generation lacks the symbols it uses
	// (the generation's file is gone or damaged, or a damaged frame
	// defined them).
	refusedDict refusal = iota
	// refusedOther: a malformed payload, or one a server refuses for
	// another reason.
	refusedOther
)

// refuse records frame fsn as not sent for cause c, with line for the
// report.
func (r *salvageReport) refuse(fsn uint64, c refusal, line string) {
	if r.unsendable == nil {
		r.unsendable = map[refusal][]uint64{}
	}
	r.unsendable[c] = append(r.unsendable[c], fsn)
	r.notSent = append(r.notSent, line)
}

// countUnreadable adds the unreadable range g (its FSNs in scope) to the
// damaged and stray counts.
func (r *salvageReport) countUnreadable(g sfqueue.FSNRange, acked uint64, inScope func(uint64) bool) {
	r.strays += uint64(g.Strays)
	if g.Last == 0 {
		r.damagedUnknown = true
		return
	}
	first := g.First
	if !inScope(first) {
		first = acked + 1
	}
	r.damaged += g.Last - first + 1 - min(uint64(g.Strays), g.Last-first+1)
}

// lost is the frames in scope that nothing can send: damaged, valid but
// of unknown FSN, and readable but refused for what the slot holds.
func (r *salvageReport) lost() uint64 {
	n := r.damaged + r.strays
	for _, fsns := range r.unsendable {
		n += uint64(len(fsns))
	}
	return n
}

// onlyLost reports whether the frames in scope not delivered are exactly
// the ones nothing can send, a countable loss --accept-loss may accept.
func (r *salvageReport) onlyLost() bool {
	return len(r.unsent) == 0 && r.sendErr == "" && r.lost() > 0 && !r.damagedUnknown
}

// lossSummary says what an --accept-loss that does not match the salvage
// would have to accept.
func (r *salvageReport) lossSummary() string {
	switch {
	case r.onlyLost():
		return fmt.Sprintf("%d frames that cannot be sent (--accept-loss=%d accepts exactly them)", r.lost(), r.lost())
	case r.damagedUnknown:
		return "an unreadable range of unknown end, which cannot be counted or accepted"
	default:
		return "frames that are readable but were not delivered: salvage them first"
	}
}

// causes says, per cause, what could not be sent; dictNote explains the
// dictionary generations of the frames refused for it.
func (r *salvageReport) causes(dictNote string) []string {
	var out []string
	if r.damaged > 0 || r.damagedUnknown {
		what := fmt.Sprintf("%d damaged frames (the unreadable ranges above, less the valid frames found in them)", r.damaged)
		if r.damagedUnknown {
			what += " and a damaged run of unknown end"
		}
		out = append(out, what)
	}
	if r.strays > 0 {
		out = append(out, fmt.Sprintf("%d valid frames after a damage whose FSNs nothing fixes (the ranges above say why): "+
			"only the next segment's base places them, so they cannot be sent in order", r.strays))
	}
	if fsns := r.unsendable[refusedDict]; len(fsns) > 0 {
		out = append(out, fmt.Sprintf("%d readable frames whose dictionary lacks the symbols they use%s: %s", len(fsns), fsnRuns(fsns), dictNote))
	}
	if fsns := r.unsendable[refusedOther]; len(fsns) > 0 {
		out = append(out, fmt.Sprintf("%d readable frames that are malformed or that a server refuses%s (not sent, above)", len(fsns), fsnRuns(fsns)))
	}
	return out
}

// complete reports whether every frame in scope was delivered.
func (r *salvageReport) complete() bool {
	return len(r.notSent) == 0 && len(r.unsent) == 0 && len(r.unreadable) == 0 && r.sendErr == ""
}

func (r *salvageReport) print(w io.Writer) {
	fmt.Fprintf(w, "slot:        %s\n", r.slot)
	fmt.Fprintf(w, "endpoint:    %s\n", r.endpoint)
	if len(r.tables) > 0 {
		fmt.Fprintf(w, "tables:      %s (created if missing, with dedup keys", strings.Join(r.tables, ", "))
		if r.refused > 0 {
			fmt.Fprintf(w, "; QuestDB refused %d statements, see the log", r.refused)
		}
		fmt.Fprintln(w, ")")
		for _, n := range r.ddlNotes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	fmt.Fprintf(w, "sent:        %d frames, %d rows, acknowledged%s\n", len(r.sent), r.rows, fsnRuns(r.sent))
	if !r.all {
		fmt.Fprintf(w, "skipped:     %d readable frames at or below acked FSN %d (--all sends them)\n", r.skippedAcked, r.acked)
	}
	for _, n := range r.notSent {
		fmt.Fprintf(w, "not sent:    %s\n", n)
	}
	if len(r.unsent) > 0 {
		fmt.Fprintf(w, "undelivered: %d frames%s: %s\n", len(r.unsent), fsnRuns(r.unsent), r.sendErr)
	} else if r.sendErr != "" {
		fmt.Fprintf(w, "error:       %s\n", r.sendErr)
	}
	for _, u := range r.unreadable {
		fmt.Fprintf(w, "unreadable:  %s\n", u)
	}
	for _, l := range r.window {
		fmt.Fprintf(w, "lost:        %s\n", l)
	}
	for _, t := range r.torn {
		fmt.Fprintf(w, "torn tail:   %s: writes a crash cut short before their fsync; with sf_durability: flush no caller was told they were stored, so nothing accepted is lost\n", t)
	}
	for _, c := range r.causes(r.dictNote) {
		fmt.Fprintf(w, "unsendable:  %s\n", c)
	}
	verdict := "complete: every frame in scope was delivered"
	switch {
	case r.lossAccepted:
		verdict = fmt.Sprintf("loss accepted: every other frame in scope was delivered; the %d frames that cannot be sent (above) are lost (--accept-loss=%d)", r.lost(), r.lost())
	case r.onlyLost():
		verdict = fmt.Sprintf("INCOMPLETE: %d frames cannot be sent (unsendable, above), every other frame in scope was delivered; the slot is kept (--delete --accept-loss=%d deletes it, accepting their loss)", r.lost(), r.lost())
	case !r.complete() && r.damagedUnknown:
		verdict = "INCOMPLETE: the frames above were not delivered; the slot is kept (an unreadable range of unknown end cannot be counted, so no --accept-loss applies)"
	case !r.complete():
		verdict = "INCOMPLETE: the frames above were not delivered; the slot is kept"
	}
	fmt.Fprintf(w, "result:      %s\n", verdict)
	if r.deleted != "" {
		fmt.Fprintf(w, "delete:      %s\n", r.deleted)
	}
}

// fsnRuns renders ascending FSNs as " (FSN a..b, c)".
func fsnRuns(fsns []uint64) string {
	if len(fsns) == 0 {
		return ""
	}
	var runs []string
	for i := 0; i < len(fsns); {
		j := i
		for j+1 < len(fsns) && fsns[j+1] == fsns[j]+1 {
			j++
		}
		if i == j {
			runs = append(runs, fmt.Sprint(fsns[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d..%d", fsns[i], fsns[j]))
		}
		i = j + 1
	}
	if len(runs) > 8 {
		runs = append(runs[:8], fmt.Sprintf("and %d more runs", len(runs)-8))
	}
	return " (FSN " + strings.Join(runs, ", ") + ")"
}

// planned is a frame that passed the checks and will be sent.
type planned struct {
	fsn  uint64
	rows int
}

// salvage takes the slot's lock and sends its readable frames. The report
// is nil when nothing was attempted.
func salvage(ctx context.Context, f salvageFlags, logger *zap.Logger) (*salvageReport, error) {
	if err := checkSlot(f.slot); err != nil {
		return nil, err
	}
	lock, err := sfqueue.LockSlot(f.slot)
	if le := (*sfqueue.LockedError)(nil); errors.As(err, &le) {
		return nil, fmt.Errorf("slot %s is in use (%v): stop the collector that holds it, or wait for it to close the slot, then salvage", f.slot, err)
	}
	if err != nil {
		return nil, fmt.Errorf("lock slot %s: %w", f.slot, err)
	}
	locked := true
	defer func() {
		if locked {
			lock.Close()
		}
	}()
	settings, err := salvageSettings(ctx, f, logger)
	if err != nil {
		return nil, err
	}
	v, err := readSlot(f.slot)
	if err != nil {
		return nil, err
	}
	if d, err := sfqueue.ParseDurability(settings.Durability); err == nil && settings.Durability != "" {
		v.scan.AssumeDurability(d) // where .ack-watermark does not record the mode
		v.judge()
	}
	mode, modeKnown := v.scan.WindowDurability()
	rep := &salvageReport{slot: f.slot, endpoint: settings.Sender.Endpoints[0], acked: v.acked, all: f.all}
	inScope := func(fsn uint64) bool { return f.all || fsn > v.acked }
	for _, r := range v.ranges {
		switch {
		case r.Readable || (r.Last != 0 && !inScope(r.Last)):
		case r.Torn && modeKnown && mode == sfqueue.DurabilityFlush:
			// A flush-mode append returns after the fsync that covers its
			// frame: a frame cut at the tail was answered to no caller.
			rep.torn = append(rep.torn, r.String())
		case r.Torn && modeKnown:
			// The mode's promised loss: nothing left to find, so the
			// salvage can still be complete.
			rep.window = append(rep.window, r.String()+
				" (accepted, lost to the crash inside the loss window of sf_durability: "+mode.String()+"; recovery counts them as torn frames)")
		case r.Torn:
			rep.unreadable = append(rep.unreadable, r.String()+
				" (a torn tail: accepted data the crash lost, unless the exporter ran with sf_durability: flush; say so with --config)")
			rep.countUnreadable(r.FSNRange, v.acked, inScope)
		default:
			rep.unreadable = append(rep.unreadable, r.String())
			rep.countUnreadable(r.FSNRange, v.acked, inScope)
		}
	}

	// Check every frame in scope as a server would read it after the
	// exporter's catch-up, and learn the tables' columns for the DDL.
	plan, schemas, err := checkFrames(v, inScope, rep)
	if err != nil {
		return rep, err
	}
	if len(plan) > 0 {
		if err := createTables(ctx, settings, f.config != "", schemas, rep, logger); err != nil {
			return rep, err
		}
		if err := send(ctx, v, plan, settings, f.timeout, rep, logger); err != nil {
			return rep, err
		}
	}
	if f.delete {
		accept := !rep.complete() && rep.onlyLost() && f.acceptLoss >= 0 && uint64(f.acceptLoss) == rep.lost()
		switch {
		case !rep.complete() && f.acceptLoss >= 0 && !accept:
			rep.deleted = fmt.Sprintf("not deleted: --accept-loss=%d does not name what the salvage left: %s", f.acceptLoss, rep.lossSummary())
		case !rep.complete() && !accept:
			rep.deleted = "not deleted: the salvage is incomplete"
		default:
			if err := sfqueue.DeleteLockedSlot(f.slot); err != nil {
				rep.deleted = "failed: " + err.Error()
				return rep, fmt.Errorf("delete slot %s: %w", f.slot, err)
			}
			lock.Close()
			locked = false
			rep.deleted, rep.lossAccepted = "the slot was deleted", accept
		}
	}
	return rep, nil
}

// salvageSettings merges --config and the flags.
func salvageSettings(ctx context.Context, f salvageFlags, logger *zap.Logger) (questdbexporter.SlotToolSettings, error) {
	var s questdbexporter.SlotToolSettings
	senderID := "questdb-slot/" + filepath.Base(f.slot)
	if err := readSecret(&f.password, "password", f.passwordFile); err != nil {
		return s, err
	}
	if err := readSecret(&f.token, "token", f.tokenFile); err != nil {
		return s, err
	}
	if f.config != "" {
		var err error
		if s, err = loadConfig(ctx, f.config, f.exporter, senderID, logger); err != nil {
			return s, err
		}
	}
	if f.endpoint != "" {
		u := f.endpoint
		if !strings.Contains(u, "://") {
			u = "ws://" + u
		}
		if i := strings.Index(u, "://"); !strings.Contains(u[i+3:], "/") {
			u += "/write/v4"
		}
		s.Sender.Endpoints = []string{u}
	}
	if f.username != "" || f.password != "" {
		s.Sender.Username, s.Sender.Password, s.Sender.Token = f.username, f.password, ""
	}
	if f.token != "" {
		s.Sender.Username, s.Sender.Password, s.Sender.Token = "", "", f.token
	}
	if s.Sender.ClientID == "" {
		s.Sender.ClientID = senderID
	}
	return s, nil
}

// readSecret sets *secret to the first line of file, for credentials that
// must not appear on the command line, where every user's ps shows them.
func readSecret(secret *string, name, file string) error {
	if file == "" {
		return nil
	}
	if *secret != "" {
		return fmt.Errorf("give --%s or --%s-file, not both", name, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--%s-file: %w", name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if *secret = strings.TrimSuffix(line, "\r"); *secret == "" {
		return fmt.Errorf("--%s-file %s: the first line is empty", name, file)
	}
	return nil
}

// checkFrames decodes every readable frame in scope with qwptest's strict
// decoder, holding the dictionary a connection holds after the exporter's
// catch-up of the frame's generation and the deltas of the frames checked
// before it. A frame the decoder refuses (an unknown symbol id above all: a
// real server answers PARSE_ERROR and ignores the rest of the connection)
// is reported and left out. It returns the frames to send and the columns
// each table receives.
func checkFrames(v *view, inScope func(uint64) bool, rep *salvageReport) ([]planned, map[string]map[string]qwp.ColumnType, error) {
	var plan []planned
	schemas := map[string]map[string]qwp.ColumnType{}
	var (
		dec      *qwptest.Decoder
		curGen   uint32
		dictGens = map[uint32]bool{} // generations of the frames refused for their dictionary
	)
	defer func() { rep.dictNote = dictState(v, dictGens) }()
	err := v.scan.EachFrame(func(fsn uint64, file string, off int64, payload []byte) error {
		if !inScope(fsn) {
			rep.skippedAcked++
			return nil
		}
		gen, msg, err := splitPayload(payload)
		if err != nil {
			rep.refuse(fsn, refusedOther, fmt.Sprintf("FSN %d (%s offset %d): %v", fsn, file, off, err))
			return nil
		}
		if dec == nil || gen != curGen {
			// The exporter's sender recycles the connection at every new
			// generation and sends that generation's dictionary first.
			d, err := v.dict.decoder(gen)
			if err != nil {
				rep.refuse(fsn, refusedDict, fmt.Sprintf("FSN %d (%s offset %d): %v", fsn, file, off, err))
				dictGens[gen] = true
				return nil
			}
			dec, curGen = d, gen
			dec.CountOnly = true
		}
		m, err := dec.Decode(msg)
		if err != nil {
			cause := refusedOther
			if dictionaryRefusal(dec, msg, err) {
				cause = refusedDict
				dictGens[gen] = true
			}
			rep.refuse(fsn, cause, fmt.Sprintf("FSN %d (%s offset %d, dictionary generation %d): a server would refuse it, poisoning the connection: %v",
				fsn, file, off, gen, err))
			return nil
		}
		p := planned{fsn: fsn}
		for _, b := range m.Tables {
			p.rows += b.Rows
			cols := schemas[b.Table]
			if cols == nil {
				cols = map[string]qwp.ColumnType{}
				schemas[b.Table] = cols
			}
			for _, c := range b.Columns {
				cols[c.Name] = c.Type
			}
		}
		plan = append(plan, p)
		return nil
	})
	return plan, schemas, err
}

// dictionaryRefusal reports whether dec refused msg with err for want of
// dictionary entries: a delta section that starts past what the
// connection's dictionary holds (DICTIONARY_GAP), or a symbol id beyond
// it. Either means the entries were lost with a damaged frame or a
// damaged or missing dictionary file.
func dictionaryRefusal(dec *qwptest.Decoder, msg []byte, err error) bool {
	var se *qwptest.StatusError
	if !errors.As(err, &se) {
		return false
	}
	if se.Status == qwp.StatusDictionaryGap {
		return true
	}
	start, _, derr := qwp.DeltaDictEntries(msg)
	return derr == nil && start > dec.Dict.Len() || se.UnknownSymbol
}

// dictState says, for the dictionary generations gens, what became of
// their files: missing, damaged, or intact (then a damaged frame defined
// the entries the refused frames use).
func dictState(v *view, gens map[uint32]bool) string {
	files := v.scan.Dict.Files()
	var notes []string
	for _, g := range slices.Sorted(maps.Keys(gens)) {
		note := fmt.Sprintf("generation %d: its dictionary file is missing", g)
		for _, f := range files {
			if f.Legacy && v.scan.Dict.Generations[g] == 0 || !f.Legacy && f.Generation != g {
				continue
			}
			switch {
			case f.Intact < f.Size:
				note = fmt.Sprintf("generation %d: its dictionary file %s is damaged from offset %d", g, f.Name, f.Intact)
			default:
				note = fmt.Sprintf("generation %d: its dictionary file %s is intact, so a damaged frame defined the missing entries", g, f.Name)
			}
		}
		notes = append(notes, note+fmt.Sprintf(" (%d entries known)", len(v.dict.gens[g])))
	}
	return strings.Join(notes, "; ")
}

// createTables creates every table the frames write to with the exporter's
// DDL: the configuration's settings for a table it names, else what the
// frames' columns show (the table kind, metric_attributes_type and the
// promoted columns; ttl from --config only).
func createTables(ctx context.Context, s questdbexporter.SlotToolSettings, haveConfig bool, schemas map[string]map[string]qwp.ColumnType,
	rep *salvageReport, logger *zap.Logger) error {
	var configured []datamodel.TableDDL
	if haveConfig {
		var err error
		if configured, err = datamodel.DDL(s.Tables, s.AttributesVarchar, s.Promoted, s.TTL); err != nil {
			return err
		}
	}
	var ddl []datamodel.TableDDL
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		i := slices.IndexFunc(configured, func(d datamodel.TableDDL) bool { return d.Table == name })
		if i >= 0 {
			ddl = append(ddl, configured[i])
			rep.ddlNotes = append(rep.ddlNotes, fmt.Sprintf("%s: as the configuration defines it", name))
			continue
		}
		g, err := datamodel.GuessTable(name, schemas[name])
		if err != nil {
			return fmt.Errorf("%w; give --config with the exporter's tables section", err)
		}
		d, err := g.DDL(s.TTL)
		if err != nil {
			return err
		}
		ddl = append(ddl, d)
		note := fmt.Sprintf("%s: a %s table, from the frames' columns", name, g.Kind)
		if len(g.Promoted) > 0 {
			var cols []string
			for _, p := range g.Promoted {
				cols = append(cols, p.Column)
			}
			note += ", promoted attributes " + strings.Join(cols, ", ")
		}
		if g.AttributesVarchar {
			note += ", attributes VARCHAR"
		}
		rep.ddlNotes = append(rep.ddlNotes, note)
	}
	for _, d := range ddl {
		rep.tables = append(rep.tables, d.Table)
	}
	refused, err := questdbexporter.CreateTables(ctx, s.Sender.Endpoints[0], ddl, s.Sender, logger)
	rep.refused = refused
	if err != nil {
		return fmt.Errorf("creating the tables before any frame is sent (a table QWP auto-creates has no dedup keys): %w", err)
	}
	return nil
}

// salvageQueueBytes bounds the frames held in memory between the slot and
// the wire: the reader waits for acknowledgements beyond it.
const salvageQueueBytes = 64 << 20

// send delivers the planned frames with the exporter's I/O loop (package
// sender): they are fed, in FSN order, into a memory-only queue that the
// sender drains, so dialling, the dictionary catch-up, the connection
// recycle at each new generation, acknowledgements, reconnects and error
// policies are the exporter's own. The slot itself is only read.
func send(ctx context.Context, v *view, plan []planned, s questdbexporter.SlotToolSettings, timeout time.Duration,
	rep *salvageReport, logger *zap.Logger) error {
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: salvageQueueBytes, AppendDeadline: time.Second})
	if err != nil {
		return err
	}
	defer q.Close()
	o := s.Sender
	o.Logger = logger
	o.CloseFlushTimeout = -1
	var lastState sender.State
	stateCh := make(chan sender.State, 1)
	o.OnState = func(st sender.State) {
		select {
		case <-stateCh:
		default:
		}
		stateCh <- st
	}
	snd, err := sender.New(q, o)
	if err != nil {
		return err
	}
	if err := snd.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fed := make(chan error, 1)
	go func() { fed <- feed(ctx, v, plan, q) }()
	waitErr := snd.WaitAcked(ctx, uint64(len(plan)))
	cancel()
	feedErr := <-fed
	// With no flush wait, Close reports nothing the ack count below does not.
	_ = snd.Close(context.Background())
	select {
	case lastState = <-stateCh:
	default:
	}
	acked := int(q.AckedFSN()) // memory FSN i+1 is plan[i]
	for i, p := range plan {
		if i < acked {
			rep.sent = append(rep.sent, p.fsn)
			rep.rows += p.rows
		} else {
			rep.unsent = append(rep.unsent, p.fsn)
		}
	}
	if acked < len(plan) {
		var te *sender.TerminalError
		switch {
		case errors.As(waitErr, &te):
			at := ""
			if te.FSN > 0 && int(te.FSN) <= len(plan) {
				at = fmt.Sprintf(" at FSN %d", plan[te.FSN-1].fsn)
			}
			rep.sendErr = fmt.Sprintf("the sender stopped%s: %s: %v", at, te.Category, te)
		case waitErr != nil:
			rep.sendErr = fmt.Sprintf("not acknowledged within %v (%v); last connection state: %s %s", timeout, waitErr, lastState.Kind, lastState.Reason)
		}
	}
	if feedErr != nil && !errors.Is(feedErr, context.Canceled) && !errors.Is(feedErr, context.DeadlineExceeded) {
		return feedErr
	}
	return nil
}

// feed appends the planned frames to q in order, registering each
// generation's dictionary before its first frame, as the exporter's writer
// does.
func feed(ctx context.Context, v *view, plan []planned, q *sfqueue.Queue) error {
	next := 0
	added := map[uint32]bool{}
	stop := errors.New("done")
	err := v.scan.EachFrame(func(fsn uint64, _ string, _ int64, payload []byte) error {
		if next == len(plan) {
			return stop
		}
		if fsn != plan[next].fsn {
			return nil
		}
		next++
		gen, _, _ := splitPayload(payload) // checkFrames accepted it
		if !added[gen] {
			entries := v.dict.gens[gen]
			if err := q.AddSymbols(gen, 0, entries); err != nil {
				return err
			}
			added[gen] = true
		}
		for {
			_, err := q.Append(ctx, payload)
			var full *sfqueue.FullError
			if !errors.As(err, &full) {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	})
	if errors.Is(err, stop) {
		return nil
	}
	if err == nil && next < len(plan) {
		return fmt.Errorf("frame FSN %d vanished from the slot while it was salvaged", plan[next].fsn)
	}
	return err
}
