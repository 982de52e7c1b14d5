package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// monitorInterval is how often the queue is sampled for the gauges, the
// level alerts and the component status.
const monitorInterval = time.Second

// questdbExporter is the shared instance of one component ID (see
// shared.go): one store-and-forward slot, one writer (the group-commit
// loop), one sender (the I/O loop) and one connection for every signal.
//
// Start opens and recovers the queue, loads the dictionary, and starts the
// writer, the sender and the queue monitor; it never waits for the network.
// A consume call hands its batch to the writer and returns once the frames
// are in the queue (after the fsync in flush durability), or, with
// wait_for_ack, once the server acknowledged them. Shutdown stops accepting,
// lets the writer finish, gives the sender close_flush_timeout to get
// everything acknowledged, and closes the queue.
type questdbExporter struct {
	cfg      *Config
	logger   *zap.Logger
	senderID string
	tel      *telemetry
	tb       *metadata.TelemetryBuilder
	now      func() time.Time
	errLog   logLimiter // for refuse

	mu       sync.RWMutex // the components below, replaced only by Start and Shutdown
	queue    *sfqueue.Queue
	writer   *writer
	sender   *sender.Sender
	status   *statusReporter
	slot     string // this instance's slot: claimed in newInstance, active from Start
	stop     chan struct{}
	stopped  chan struct{}
	tables   *tableCreator      // CREATE TABLE ... DEDUP on every new connection
	drainEnd context.CancelFunc // stops the orphan drainers
	drained  chan struct{}      // closed when the orphan drainers returned
	shutdown bool

	queueFS sfqueue.FS // tests only: a file system that injects faults (nil: the OS's)
}

var _ instance = (*questdbExporter)(nil)

// newInstance builds the instance of one component ID; it does no I/O.
func newInstance(cfg *Config, set exporter.Settings) (instance, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("questdb exporter %s: telemetry: %w", set.ID, err)
	}
	// Everything this exporter logs at Error is a condition it expects and
	// explains (a full queue, DATA_LOSS, a refused login): no stack traces.
	logger := set.Logger.WithOptions(zap.AddStacktrace(zapcore.FatalLevel))
	tel, err := newTelemetry(tb, logger, set.ID)
	if err != nil {
		tb.Shutdown()
		return nil, fmt.Errorf("questdb exporter %s: telemetry: %w", set.ID, err)
	}
	// Until Start loads the dictionary, the limit a generation starts at,
	// not a limit of 0 bytes.
	tel.dictLimit.Store(int64(cfg.symbolDictStartBytes()))
	e := &questdbExporter{
		cfg:      cfg,
		logger:   logger,
		senderID: cfg.senderID(set.ID),
		tel:      tel,
		tb:       tb,
		now:      time.Now,
		errLog:   logLimiter{interval: unreportedErrorInterval},
	}
	e.slot = "memory:" + e.senderID
	if cfg.SFDir != "" {
		e.slot = filepath.Join(cfg.SFDir, e.senderID)
	}
	// Claimed before any exporter starts (the collector builds every
	// component first), so no orphan drainer takes a slot whose exporter
	// has not started yet.
	activeSlots.claim(e.slot)
	return e, nil
}

// Start opens the queue and starts the writer, the sender and the monitor.
func (e *questdbExporter) Start(ctx context.Context, host component.Host) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutdown {
		return errShutDown
	}
	slot := e.slot
	if err := activeSlots.add(slot); err != nil {
		return err
	}
	q, gen, err := e.openQueue(ctx)
	if err != nil {
		activeSlots.remove(slot)
		return err
	}
	w, err := e.newWriter(q, gen)
	if err != nil {
		activeSlots.remove(slot)
		return errors.Join(err, q.Close())
	}
	status := newStatusReporter(host, e.cfg.OnFull == "evict_oldest")
	s, err := e.newSender(ctx, q, status)
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		w.close()
		activeSlots.remove(slot)
		return errors.Join(fmt.Errorf("questdb exporter: starting the sender: %w", err), q.Close())
	}
	e.queue, e.writer, e.sender, e.status = q, w, s, status
	e.tel.attachQueue(q)
	e.stop, e.stopped = make(chan struct{}), make(chan struct{})
	go e.monitor(newLevelAlerter(e.logger, e.now, e.cfg.OnFull == "evict_oldest"))
	e.startDrainers(ctx)
	e.logStart(q.Recovery().FramesRecovered)
	return nil
}

// startDrainers adopts orphaned slots under sf_dir (drain_orphans) in the
// background, excluding the slot of every questdb exporter of this
// collector.
func (e *questdbExporter) startDrainers(ctx context.Context) {
	e.drained = make(chan struct{})
	noDrainers := func() {
		e.drainEnd = func() {}
		close(e.drained)
	}
	if !e.cfg.DrainOrphans || e.cfg.SFDir == "" {
		noDrainers()
		return
	}
	so, err := e.senderOptions(ctx, nil)
	if err == nil {
		// Drainers do not drive this component's status; the table
		// creator, made by Start's sender, is shared.
		so.OnState = nil
		err = e.createTablesOnConnect(&so, e.status)
	}
	if err != nil {
		e.logger.Error("drain_orphans: cannot build the drainers' sender options; orphans are not drained", zap.Error(err))
		noDrainers()
		return
	}
	qo := e.cfg.queueOptions("", e.logger)
	dctx, cancel := context.WithCancel(context.Background())
	e.drainEnd = cancel
	exclude := activeSlots.senderIDsIn(e.cfg.SFDir)
	go func() {
		defer close(e.drained)
		rep, err := sender.DrainOrphans(dctx, e.cfg.SFDir, exclude, e.cfg.MaxBackgroundDrainers, sender.DrainOptions{Queue: qo, Sender: so})
		if err != nil {
			e.logger.Error("drain_orphans failed", zap.String("sf_dir", e.cfg.SFDir), zap.Error(err))
			return
		}
		for _, dl := range rep.DataLoss {
			e.reportUnreplayable(dl, []zap.Field{zap.String("sf_dir", e.cfg.SFDir), zap.String("orphan_slot", dl.Path)})
		}
		if len(rep.Drained)+len(rep.Failed)+len(rep.Skipped) > 0 {
			e.logger.Info("drain_orphans finished", zap.Strings("drained", rep.Drained),
				zap.Strings("failed", rep.Failed), zap.Strings("skipped", rep.Skipped))
		}
	}()
}

// openQueue opens (in SF mode: recovers) the slot, logs what recovery
// found, and returns the dictionary generation to continue with: the newest
// one that frames or .symbol-dict know of.
func (e *questdbExporter) openQueue(ctx context.Context) (*sfqueue.Queue, uint32, error) {
	if e.cfg.SFDir != "" {
		if err := prepareSFDir(e.cfg.SFDir, e.cfg.isDefaultSFDir(), e.logger); err != nil {
			return nil, 0, err
		}
	}
	opts := e.cfg.queueOptions(e.senderID, e.logger)
	opts.ClearFailed = true // a drainer's .failed in our slot is stale once we own it
	if e.queueFS != nil {
		opts.FS = e.queueFS
	}
	var maxGen uint32
	opts.SymbolUse = func(payload []byte) (uint32, int64) {
		gen, maxID := payloadSymbolUse(payload)
		maxGen = max(maxGen, gen)
		return gen, maxID
	}
	q, err := e.openSlot(ctx, opts)
	if err != nil {
		return nil, 0, fmt.Errorf("questdb exporter: opening the queue (sf_dir %q, sender_id %q): %w", e.cfg.SFDir, e.senderID, err)
	}
	rep := q.Recovery()
	fields := []zap.Field{zap.String("sf_dir", e.cfg.SFDir), zap.String("sender_id", e.senderID)}
	e.reportRecovery(rep, fields)
	if rep.WatermarkIgnored {
		e.logger.Warn("the .ack-watermark file was unusable; frames after the oldest retained segment are replayed (QuestDB may see duplicates)", fields...)
	}
	if gens := q.SymbolGenerations(); len(gens) > 0 {
		maxGen = max(maxGen, slices.Max(gens))
	}
	if e.cfg.SFDir != "" {
		e.tel.unacked.recovered(q.AckedFSN(), q.PublishedFSN(), filepath.Join(e.cfg.SFDir, e.senderID), time.Now())
	}
	return q, maxGen, nil
}

// handoverWait bounds how long Start waits for the lock of its slot while
// another process holds it: an orphan drainer of another collector yields
// within a poll; anything else (a second collector on the same sender_id,
// questdb-slot salvage) does not, and Start fails naming its PID.
var handoverWait = 15 * time.Second

// openSlot opens the queue; when another process holds the slot's lock, it
// asks an orphan drainer holding it to hand it over (sender.RequestHandover)
// and retries until handoverWait. A collector that restarts while another
// collector's drain_orphans adopted its slot (both starting at once, or a
// crash loop) gets its slot back instead of failing until that drain ends,
// which during an outage it never does.
func (e *questdbExporter) openSlot(ctx context.Context, opts sfqueue.Options) (*sfqueue.Queue, error) {
	q, err := sfqueue.Open(opts)
	var le *sfqueue.LockedError
	if opts.Dir == "" || !errors.As(err, &le) {
		return q, err
	}
	e.logger.Info("the slot is held by another process; asking an orphan drainer holding it to hand it over",
		zap.String("slot", le.Path), zap.Int("holder_pid", le.PID))
	defer func() {
		if werr := sender.WithdrawHandover(le.Path); werr != nil {
			e.logger.Warn("cannot remove the slot's handover request", zap.String("slot", le.Path), zap.Error(werr))
		}
	}()
	deadline := time.Now().Add(handoverWait)
	for errors.As(err, &le) && time.Now().Before(deadline) {
		// A slot that vanished meanwhile (drained and removed) is
		// simply created by the next Open.
		if rerr := sender.RequestHandover(le.Path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, errors.Join(err, rerr)
		}
		// Start holds e.mu meanwhile, so a cancelled Start must not wait
		// the rest of handoverWait.
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(handoverRetry):
		}
		q, err = sfqueue.Open(opts)
	}
	return q, err
}

// handoverRetry is the pause between two attempts at a held slot.
const handoverRetry = 100 * time.Millisecond

// reportRecovery makes what recovery lost loud: an Error log naming the
// slot, the FSN ranges and the cause, and the data_loss_frames and
// torn_frames counters. A torn tail cut in flush durability was never
// answered to a caller (seed 004): logged at Info, counted all the same.
func (e *questdbExporter) reportRecovery(rep sfqueue.RecoveryReport, fields []zap.Field) {
	if rep.Unreplayable != nil {
		e.reportUnreplayable(rep.Unreplayable, fields)
	}
	for _, r := range rep.Lost {
		e.logger.Error("DATA_LOSS: frames the slot recorded as on disk are gone; they will never reach QuestDB",
			append(fields, zap.Uint64("first_fsn", r.First), zap.Uint64("last_fsn", r.Last), zap.Uint64("frames", r.Frames()),
				zap.String("cause", r.Cause))...)
		e.tel.dataLoss(lossVanished, r.Frames())
	}
	for _, r := range rep.Torn {
		// The slot's writer's mode sets the window (a restart may have
		// changed sf_durability).
		mode := rep.TornDurability.String()
		torn := append(fields, zap.Uint64("first_fsn", r.First), zap.Uint64("last_fsn", r.Last),
			zap.Uint64("frames", r.Frames()), zap.String("cause", r.Cause), zap.String("torn_cause", string(r.TornCause)), zap.String("sf_durability", mode))
		if rep.TornDurability == sfqueue.DurabilityFlush {
			e.logger.Info("recovery cut torn frames: frames whose write never completed, answered to no caller", torn...)
		} else {
			e.logger.Error("recovery lost torn frames: "+tornWhat(r.TornCause)+" (the loss window of sf_durability "+mode+"; flush has none)", torn...)
		}
		e.tel.tornFrames(r.TornCause, r.Frames())
	}
	if rep.SymbolTornBytes > 0 || rep.SymbolsRebuilt > 0 {
		e.logger.Warn("recovery cut a torn .symbol-dict tail; entries the frames still define were rebuilt from them",
			append(fields, zap.Int64("symbol_dict_bytes", rep.SymbolTornBytes), zap.Int("entries_rebuilt", rep.SymbolsRebuilt))...)
	}
}

// tornWhat says in the Error line what a torn range's frames were: all
// were accepted, but after_cut frames did reach the disk intact and were
// dropped only because the FSNs before them did not.
func tornWhat(c sfqueue.TornCause) string {
	if c == sfqueue.TornAfterCut {
		return "accepted frames that reached the disk intact after a cut, deleted because a replay cannot skip the FSNs lost before them"
	}
	return "accepted frames that had not reached the disk"
}

// reportUnreplayable logs and counts a slot set aside (or an orphan
// marked .failed) with every unreadable range.
func (e *questdbExporter) reportUnreplayable(dl *sfqueue.DataLossError, fields []zap.Field) {
	ranges := make([]string, len(dl.Unreadable))
	for i, r := range dl.Unreadable {
		ranges[i] = r.String()
	}
	e.logger.Error("DATA_LOSS: the store-and-forward slot could not be replayed and was set aside; its unacknowledged data will never reach QuestDB unless an operator salvages it",
		append(fields, zap.String("set_aside_as", dl.Path), zap.Int("readable_unacked_frames", dl.Frames),
			zap.Uint64("unreadable_frames", dl.UnreadableFrames), zap.Strings("unreadable", ranges),
			zap.String("reason", dl.Reason))...)
	e.tel.dataLoss(lossUnreplayable, uint64(dl.Frames)+dl.UnreadableFrames)
}

// logStart is the one line an operator needs to know what this exporter
// runs with: where its data waits, where it goes, the bounds, the
// authentication mode (never the secret) and what was recovered.
func (e *questdbExporter) logStart(recovered int) {
	auth := "none"
	switch {
	case e.cfg.Token != "":
		auth = "bearer token"
	case e.cfg.Username != "":
		auth = "basic, username " + string(e.cfg.Username)
	}
	slot, durability := e.slot, e.cfg.SFDurability
	if e.cfg.SFDir == "" {
		slot, durability = "memory only (sf_dir is empty): unacknowledged data is lost on a restart", "memory"
	}
	if urls := e.cfg.plaintextCredentialURLs(); len(urls) > 0 {
		e.logger.Warn("credentials (username/password or token) go unencrypted over the network: anyone on the path can read them and the data; use wss:// endpoints (or a tls section with host:port endpoints), which also makes the DDL use https://",
			zap.Strings("unencrypted", urls))
	}
	if keys := e.cfg.emptyCredentials; len(keys) > 0 {
		e.logger.Warn("credential keys are set but empty, usually an environment variable that is not set (token: ${env:QUESTDB_TOKEN} without QUESTDB_TOKEN); a server that requires authentication will refuse the connection with 401 until the variable is set and the collector restarted",
			zap.Strings("empty_keys", keys))
	}
	e.logger.Info("QuestDB exporter started",
		zap.String("slot", slot), zap.Strings("endpoints", e.cfg.endpointURLs()),
		zap.Stringer("sf_max_total_bytes", e.cfg.effectiveMaxTotalBytes()), zap.String("sf_durability", durability),
		zap.String("on_full", e.cfg.OnFull), zap.String("auth", auth), zap.Bool("tls", usesTLS(e.cfg.endpointURLs())),
		zap.Int("recovered_frames", recovered))
}

// newWriter loads dictionary generation gen and starts the writer on it.
// A generation that cannot be read whole fails the start.
func (e *questdbExporter) newWriter(q *sfqueue.Queue, gen uint32) (*writer, error) {
	dict, err := loadGenDict(q, e.cfg.SymbolDictMaxEntries, int(e.cfg.effectiveSymbolDictMaxBytes()), int(e.cfg.symbolDictStartBytes()), gen)
	if err != nil {
		// Starting on the entries read so far would give new symbols ids
		// that frames on disk already use. The slot stays as it is: the
		// next start recovers it again, by the SF contract.
		return nil, fmt.Errorf("questdb exporter: loading the symbol dictionary (sf_dir %q, sender_id %q): %w; "+
			"the exporter does not start, so that no new symbol can take an id the queued frames already use; "+
			"nothing in the slot was changed or dropped. Recovery had just read this file intact, so a read error means "+
			"the disk or file system is failing: check the system log, then restart (recovery checks the slot again)",
			e.cfg.SFDir, e.senderID, err)
	}
	enc := qwp.NewEncoder(dict, qwp.EncoderOptions{
		MaxFrameBytes:   int(e.cfg.MaxBatchBytes),
		Gorilla:         true,
		DeltaSymbolDict: true,
	})
	rows, err := datamodel.NewEncoder(enc, e.cfg.rowEncoderConfig(e.logger))
	if err != nil {
		return nil, fmt.Errorf("questdb exporter: %w", err)
	}
	be := &rowBatchEncoder{rows: rows, enc: enc, tel: e.tel, dict: dict}
	room := q.Fits
	if e.cfg.OnFull == "evict_oldest" {
		room = nil // evicting is not stalling
	}
	e.tel.observeDict(dict)
	return newWriter(q, dict, be, e.tel, room, int(e.cfg.MaxBatchBytes)), nil
}

// newSender starts nothing: it builds the I/O loop of q, reporting its
// state to status and to the queue (for the full-queue error).
func (e *questdbExporter) newSender(ctx context.Context, q *sfqueue.Queue, status *statusReporter) (*sender.Sender, error) {
	o, err := e.senderOptions(ctx, func(s sender.State) {
		e.tel.senderState(s)
		status.connState(s)
		q.SetConsumerState(sfqueue.ConsumerState{
			Reconnecting: s.Kind == sender.Reconnecting || s.Kind == sender.Connecting,
			Attempts:     s.Attempts,
			OutageStart:  s.Since,
		})
	})
	if err != nil {
		return nil, err
	}
	if e.cfg.SFDir != "" {
		o.SlotDir = e.slot
	}
	if err := e.createTablesOnConnect(&o, status); err != nil {
		return nil, err
	}
	return sender.New(q, o)
}

// createTablesOnConnect makes every connection of o (the exporter's own and
// its orphan drainers') create the tables with dedup keys before its first
// frame, when create_tables is on. The table creator is shared; what it
// finds goes to the ddl_failures counter and to status.
func (e *questdbExporter) createTablesOnConnect(o *sender.Options, status *statusReporter) error {
	if !e.cfg.CreateTables {
		return nil
	}
	if e.tables == nil {
		rc := e.cfg.rowEncoderConfig(e.logger)
		tc, err := newTableCreator(tableCreatorConfig{
			Tables: rc.Tables, AttributesVarchar: rc.AttributesVarchar, Promoted: rc.Promoted, TTL: e.cfg.TTL,
			TLS: o.TLS, Username: o.Username, Password: o.Password, Token: o.Token,
			Timeout: ddlTimeout, Logger: e.logger,
			OnRefused: e.tel.ddlRefused, OnOutcome: status.ddlOutcome,
		})
		if err != nil {
			return fmt.Errorf("questdb exporter: table DDL: %w", err)
		}
		e.tables = tc
		e.tel.ddlTables(tc.tables())
	}
	tc := e.tables
	o.OnConnect = func(ctx context.Context, endpoint string) error {
		ctx, cancel := context.WithTimeout(ctx, ddlTimeout)
		defer cancel()
		_, err := tc.ensure(ctx, endpoint)
		return err
	}
	return nil
}

// ddlTimeout bounds the table creation run on each new connection, which
// holds the connection's first frame.
const ddlTimeout = 10 * time.Second

// senderOptions maps the configuration onto the I/O loop's options.
func (e *questdbExporter) senderOptions(ctx context.Context, onState func(sender.State)) (sender.Options, error) {
	o, err := e.cfg.senderOptions(ctx, e.senderID)
	o.OnState, o.Observer, o.Logger = onState, e.tel, e.logger
	return o, err
}

// senderOptions maps the configuration onto the I/O loop's options for the
// slot senderID, leaving the callbacks, observer and logger unset. Call only
// after Validate.
func (c *Config) senderOptions(ctx context.Context, senderID string) (sender.Options, error) {
	o := sender.Options{
		Endpoints:           c.endpointURLs(),
		Username:            string(c.Username),
		Password:            string(c.Password),
		Token:               string(c.Token),
		ClientID:            "otelcol-questdb/" + senderID,
		DurableAck:          c.durableAck(),
		DurableAckKeepalive: c.DurableAckKeepaliveInterval,
		MaxInFlight:         c.MaxInFlight,
		MaxBatchBytes:       int(c.MaxBatchBytes),
		InitialBackoff:      c.ReconnectInitialBackoff,
		MaxBackoff:          c.ReconnectMaxBackoff,
		MaxFrameRejections:  c.MaxFrameRejections,
		Policies:            map[qwp.Category]qwp.Policy{},
		CloseFlushTimeout:   c.CloseFlushTimeout,
		ErrorInboxCapacity:  c.ErrorInboxCapacity,
	}
	if c.CloseFlushTimeout == 0 {
		o.CloseFlushTimeout = -1 // do not wait
	}
	for cat := qwp.CategorySchemaMismatch; cat <= qwp.CategoryDataLoss; cat++ {
		if cat.Overridable() {
			o.Policies[cat] = c.errorPolicy(cat)
		}
	}
	if usesTLS(o.Endpoints) {
		tlsCfg, err := c.tlsSettings().LoadTLSConfig(ctx)
		if err != nil {
			return o, fmt.Errorf("questdb exporter: tls: %w", err)
		}
		o.TLS = tlsCfg
	}
	return o, nil
}

func usesTLS(urls []string) bool {
	return slices.ContainsFunc(urls, func(u string) bool { return len(u) > 6 && u[:6] == "wss://" })
}

// monitor samples the queue every monitorInterval for the gauges, the
// level alerts and the component status.
func (e *questdbExporter) monitor(alerts *levelAlerter) {
	defer close(e.stopped)
	t := time.NewTicker(monitorInterval)
	defer t.Stop()
	for {
		e.sampleQueue(alerts)
		select {
		case <-e.stop:
			// The last word on evictions since the last sample or summary:
			// the counters and the log account for every evicted row.
			s := e.queue.Stats()
			e.tel.observeQueue(s)
			alerts.flushEvictions(sampleQueue(s))
			return
		case <-t.C:
		}
	}
}

func (e *questdbExporter) sampleQueue(alerts *levelAlerter) {
	s := e.queue.Stats()
	e.tel.observeQueue(s)
	e.status.queueLevel(alerts.observe(sampleQueue(s)))
	e.status.queueFatal(s.Fatal)
	if e.cfg.SFDir != "" {
		aside, err := sfqueue.SetAsideSlots(e.cfg.SFDir)
		if err != nil {
			e.logger.Warn("cannot list set-aside slots", zap.String("sf_dir", e.cfg.SFDir), zap.Error(err))
			return
		}
		e.tel.setAside.Store(int64(len(aside)))
		e.status.setAside(aside)
	}
}

// Shutdown stops accepting data, lets the writer finish the calls it
// accepted, waits up to close_flush_timeout for acknowledgements (logging
// what remains), and closes the queue. Safe without Start.
func (e *questdbExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutdown {
		return nil
	}
	e.shutdown = true
	defer e.tb.Shutdown()
	defer activeSlots.release(e.slot)
	if e.queue == nil {
		return nil
	}
	e.drainEnd()
	<-e.drained
	e.writer.close()
	// The monitor stops after the writer: the groups it finishes may still
	// evict, and the monitor's last sample reports every evicted row.
	close(e.stop)
	<-e.stopped
	var errs []error
	if err := e.sender.Close(ctx); err != nil {
		e.logUnacknowledged(err)
	}
	e.tel.attachQueue(nil)
	if err := e.queue.Close(); err != nil {
		errs = append(errs, fmt.Errorf("questdb exporter: closing the queue: %w", err))
	}
	if e.tables != nil {
		e.tables.close()
	}
	e.queue, e.writer, e.sender, e.tables = nil, nil, nil, nil
	return errors.Join(errs...)
}

// logUnacknowledged tells the operator what Shutdown leaves behind: how
// many frames (QWP batches) and bytes QuestDB has not acknowledged, where
// they are, and the key that bounded the wait.
func (e *questdbExporter) logUnacknowledged(cause error) {
	s := e.queue.Stats()
	fields := []zap.Field{
		zap.Uint64("frames", s.PublishedFSN-s.AckedFSN), zap.Int64("bytes", s.UnackedBytes),
		zap.Stringer("close_flush_timeout", e.cfg.CloseFlushTimeout), zap.NamedError("cause", cause),
	}
	waited := fmt.Sprintf("waited close_flush_timeout (%v)", e.cfg.CloseFlushTimeout)
	if e.cfg.CloseFlushTimeout == 0 {
		waited = "did not wait (close_flush_timeout: 0)"
	}
	if e.cfg.SFDir == "" {
		e.logger.Error(fmt.Sprintf("QuestDB exporter stopped; %s; %d frames (%d bytes) QuestDB has not acknowledged are LOST: memory-only mode (sf_dir is empty) keeps nothing across a restart; raise close_flush_timeout or set sf_dir",
			waited, s.PublishedFSN-s.AckedFSN, s.UnackedBytes), fields...)
		return
	}
	e.logger.Warn(fmt.Sprintf("QuestDB exporter stopped; %s; %d frames (%d bytes) QuestDB has not acknowledged stay in %s and are sent at the next start",
		waited, s.PublishedFSN-s.AckedFSN, s.UnackedBytes, e.slot), fields...)
}

func (e *questdbExporter) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return e.consume(ctx, func(w *writer) (uint64, error) { return w.writeMetrics(ctx, md) })
}

func (e *questdbExporter) consumeLogs(ctx context.Context, ld plog.Logs) error {
	return e.consume(ctx, func(w *writer) (uint64, error) { return w.writeLogs(ctx, ld) })
}

func (e *questdbExporter) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	return e.consume(ctx, func(w *writer) (uint64, error) { return w.writeTraces(ctx, td) })
}

// consume is what every consume call does: hand the batch to the writer
// (write) and apply wait_for_ack, or say why the instance takes no data.
func (e *questdbExporter) consume(ctx context.Context, write func(w *writer) (uint64, error)) error {
	w, s, err := e.components()
	if err != nil {
		return receiverError(err)
	}
	fsn, err := write(w)
	return e.refuse(e.afterWrite(ctx, s, fsn, err))
}

// refuse is the error a consume call returns for err (receiverError),
// logging, at most every unreportedErrorInterval, the errors that no alert,
// status or earlier log line covers.
func (e *questdbExporter) refuse(err error) error {
	if err == nil {
		return nil
	}
	if !reportedOnce(err) {
		if ok, held := e.errLog.allow(e.now()); ok {
			e.logger.Error("QuestDB exporter could not store a batch; the source was told", zap.Error(err), zap.Int("similar_lines_held_back", held))
		}
	}
	return receiverError(err)
}

// unreportedErrorInterval bounds how often refuse logs.
const unreportedErrorInterval = 10 * time.Second

// components returns the writer and sender of a started instance, or why
// there are none. A sender that stopped for good refuses new data: it would
// only pile up behind the frame the server refuses.
func (e *questdbExporter) components() (*writer, *sender.Sender, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	switch {
	case e.shutdown:
		return nil, nil, errShutDown
	case e.writer == nil:
		return nil, nil, errNotStarted
	}
	if err := e.sender.Err(); err != nil {
		return nil, nil, err
	}
	return e.writer, e.sender, nil
}

// afterWrite applies wait_for_ack: the call returns once the server
// acknowledged the frame holding the batch's last row.
func (e *questdbExporter) afterWrite(ctx context.Context, s *sender.Sender, fsn uint64, err error) error {
	if err != nil || !e.cfg.WaitForAck || fsn == 0 {
		return err
	}
	if err := s.WaitAcked(ctx, fsn); err != nil {
		return fmt.Errorf("questdb exporter: stored, but not acknowledged by QuestDB (wait_for_ack): %w", err)
	}
	return nil
}

// rowBatchEncoder adapts the data model's rowEncoder to the writer: it
// counts rows and skipped points, and starts dictionary generations on the
// underlying qwp.Encoder.
type rowBatchEncoder struct {
	rows *datamodel.Encoder
	enc  *qwp.Encoder
	tel  *telemetry
	dict *genDict
}

func (b *rowBatchEncoder) encodeMetrics(md pmetric.Metrics, emit func([]byte) error) (int, error) {
	st, err := b.rows.EncodeMetrics(md, emit)
	return b.done(signalMetrics, st, err)
}

func (b *rowBatchEncoder) encodeLogs(ld plog.Logs, emit func([]byte) error) (int, error) {
	st, err := b.rows.EncodeLogs(ld, emit)
	return b.done(signalLogs, st, err)
}

func (b *rowBatchEncoder) encodeTraces(td ptrace.Traces, emit func([]byte) error) (int, error) {
	st, err := b.rows.EncodeTraces(td, emit)
	return b.done(signalTraces, st, err)
}

func (b *rowBatchEncoder) done(sig signal, st datamodel.Stats, err error) (int, error) {
	b.tel.skipped(sig, st)
	rows := 0
	for _, n := range st.Rows {
		rows += n
	}
	return rows, err
}

func (b *rowBatchEncoder) flush(emit func([]byte) error) error {
	err := b.rows.Flush(emit)
	b.tel.observeDict(b.dict)
	return err
}

func (b *rowBatchEncoder) finishInto(buf *[]byte, gap int) { b.rows.FinishInto(buf, gap) }

func (b *rowBatchEncoder) reset(dict qwp.SymbolDict) { b.enc.Reset(dict) }

func (b *rowBatchEncoder) frameRows() int { return b.enc.FinishedRows() }

// activeSlots tracks the slots of this process's questdb exporters: claimed
// from newInstance to Shutdown (an orphan drainer never takes one), active
// from Start to Shutdown (two exporters never share one). Keys are
// <sf_dir>/<sender_id> (memory:<sender_id> in memory-only mode).
var activeSlots = &slotRegistry{claimed: map[string]int{}, active: map[string]bool{}}

type slotRegistry struct {
	mu      sync.Mutex
	claimed map[string]int // instances built and not yet shut down
	active  map[string]bool
}

func (r *slotRegistry) claim(slot string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claimed[slot]++
}

// release ends a claim, and the slot's activity if it was started.
func (r *slotRegistry) release(slot string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claimed[slot]--; r.claimed[slot] <= 0 {
		delete(r.claimed, slot)
	}
	delete(r.active, slot)
}

// add marks slot active, refusing a slot another exporter already runs on.
func (r *slotRegistry) add(slot string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[slot] {
		return fmt.Errorf("questdb exporter: slot %s is already used by another questdb exporter in this collector; give each a distinct sender_id", slot)
	}
	r.active[slot] = true
	return nil
}

// remove undoes add after a failed Start.
func (r *slotRegistry) remove(slot string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, slot)
}

// senderIDsIn lists the claimed slots under dir, by sender_id.
func (r *slotRegistry) senderIDsIn(dir string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for s := range r.claimed {
		if filepath.Dir(s) == filepath.Clean(dir) {
			ids = append(ids, filepath.Base(s))
		}
	}
	slices.Sort(ids)
	return ids
}
