package sender

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// DrainOptions configure DrainOrphans.
type DrainOptions struct {
	// Queue is the template for opening each orphan slot; Dir and SenderID
	// are set per orphan.
	Queue sfqueue.Options
	// Sender configures each drainer's Sender. Its callbacks (OnState,
	// ErrorHandler, Observer) receive the drainers' events too; SlotDir and
	// CloseFlushTimeout are set per drainer.
	Sender Options
}

// DrainReport says what DrainOrphans did with each orphan it found.
type DrainReport struct {
	Drained []string // emptied and removed
	Failed  []string // marked .failed (terminal error) or could not be opened
	Skipped []string // locked by another process, or left when ctx ended
	// DataLoss lists the orphans recovery could not replay (also in
	// Failed): each was left in place, marked .failed with the reason, and
	// its unacknowledged frames will not be sent (seed 000's DATA_LOSS).
	DataLoss []*sfqueue.DataLossError
}

// DrainOrphans adopts the abandoned slots under sfDir (those with unacked
// frames, no .failed marker and a free lock; exclude names the caller's own
// slots) and drains each over its own connection, at most maxDrainers at a
// time. A drained slot is removed; one whose sender hits a terminal error
// (an authentication failure, a poison frame) is marked .failed with the
// reason and kept for an operator. It returns when every orphan is handled
// or ctx ends; an orphan interrupted by ctx keeps its remaining frames.
func DrainOrphans(ctx context.Context, sfDir string, exclude []string, maxDrainers int, o DrainOptions) (DrainReport, error) {
	var rep DrainReport
	if maxDrainers < 1 {
		return rep, fmt.Errorf("sender: maxDrainers %d must be at least 1", maxDrainers)
	}
	if _, err := o.Sender.withDefaults(); err != nil {
		return rep, err
	}
	log := o.Sender.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if gone, err := sfqueue.RemoveLeftovers(sfDir); err != nil {
		log.Warn("deleting drained slots a crash left behind", zap.Strings("deleted", gone), zap.Error(err))
	} else if len(gone) > 0 {
		log.Info("deleted drained slots a crash left behind", zap.Strings("deleted", gone))
	}
	ids, err := sfqueue.ListOrphans(sfDir, exclude)
	if err != nil {
		return rep, fmt.Errorf("sender: listing orphan slots in %s: %w", sfDir, err)
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, maxDrainers)
	)
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			mu.Lock()
			rep.Skipped = append(rep.Skipped, id)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, dl := drainOrphan(ctx, sfDir, id, o)
			mu.Lock()
			defer mu.Unlock()
			if dl != nil {
				rep.DataLoss = append(rep.DataLoss, dl)
			}
			switch r {
			case drained:
				rep.Drained = append(rep.Drained, id)
			case failed:
				rep.Failed = append(rep.Failed, id)
			default:
				rep.Skipped = append(rep.Skipped, id)
			}
		}()
	}
	wg.Wait()
	return rep, nil
}

type drainResult int

const (
	skipped drainResult = iota
	drained
	failed
)

// drainOrphan runs one drainer: open, send until empty, remove. A slot
// recovery cannot replay is marked .failed by the queue and returned as
// data loss.
func drainOrphan(ctx context.Context, dir, id string, o DrainOptions) (drainResult, *sfqueue.DataLossError) {
	so := o.Sender
	if so.Logger == nil {
		so.Logger = zap.NewNop()
	}
	so.Logger = so.Logger.With(zap.String("orphan_slot", id))
	so.SlotDir = filepath.Join(dir, id)
	so.CloseFlushTimeout = -1 // WaitAcked below is the flush
	obs := so.Observer
	if obs == nil {
		obs = NopObserver{}
	}
	log := so.Logger
	qo := o.Queue
	qo.Dir, qo.SenderID = dir, id
	qo.MarkUnreplayableFailed = true
	if qo.Logger == nil {
		qo.Logger = log
	}
	q, err := sfqueue.Open(qo)
	if err != nil {
		var le *sfqueue.LockedError
		if errors.As(err, &le) {
			log.Info("orphan slot is busy; skipped", zap.Error(err))
			return skipped, nil
		}
		var dl *sfqueue.DataLossError
		switch {
		case !errors.As(err, &dl):
			log.Error("orphan slot cannot be opened", zap.Error(err))
		case !qo.CallerLogsDataLoss: // else DrainOrphans' caller logs it (Report.DataLoss)
			log.Error("DATA_LOSS: orphan slot cannot be replayed; marked .failed and kept for inspection",
				zap.String("slot", dl.Path), zap.Int("readable_unacked_frames", dl.Frames),
				zap.Uint64("unreadable_frames", dl.UnreadableFrames), zap.String("reason", dl.Reason))
		}
		obs.DrainerStarted()
		obs.DrainerFailed()
		return failed, dl
	}
	obs.DrainerStarted()
	s, err := New(q, so)
	if err == nil {
		err = s.Start()
	}
	var handedOver bool
	if err == nil {
		log.Info("draining orphan slot", zap.Uint64("frames", q.PublishedFSN()-q.AckedFSN()))
		wctx, yield := watchHandover(ctx, so.SlotDir)
		err = s.WaitAcked(wctx, q.PublishedFSN())
		handedOver = yield()
		_ = s.Close(context.Background())
	}
	var te *TerminalError
	switch {
	case err == nil:
		if cerr := q.Close(); cerr != nil {
			log.Error("closing the drained orphan slot", zap.Error(cerr))
			obs.DrainerFailed()
			return failed, nil
		}
		var le *sfqueue.LockedError
		if rerr := sfqueue.RemoveSlot(dir, id); errors.As(rerr, &le) {
			// Every frame is acknowledged; whoever took the lock between
			// our Close and RemoveSlot (another drainer, the slot's owner)
			// finds it empty and removes or reuses it.
			log.Info("orphan slot drained; another process took it before its removal", zap.Error(rerr))
			obs.DrainerSucceeded()
			return drained, nil
		} else if errors.Is(rerr, sfqueue.ErrSlotLeftover) {
			// Renamed away with every frame acknowledged: delivered; the
			// next scan's RemoveLeftovers deletes what is left.
			log.Warn("orphan slot drained; its deletion is unfinished and the next orphan scan retries it", zap.Error(rerr))
			obs.DrainerSucceeded()
			return drained, nil
		} else if rerr != nil {
			log.Error("removing the drained orphan slot", zap.Error(rerr))
			obs.DrainerFailed()
			return failed, nil
		}
		log.Info("orphan slot drained and removed")
		obs.DrainerSucceeded()
		return drained, nil
	case errors.As(err, &te):
		if merr := sfqueue.MarkFailed(dir, id, te.Error()); merr != nil {
			log.Error("marking the orphan slot failed", zap.Error(merr))
		}
		_ = q.Close()
		log.Error("orphan drainer gave up; slot marked .failed and kept", zap.Error(te))
		obs.DrainerFailed()
		return failed, nil
	}
	_ = q.Close()
	if handedOver {
		log.Info("the slot's own exporter asked for it back; orphan drainer handed it over with its remaining frames")
	} else {
		log.Info("orphan drainer interrupted; the slot keeps its frames", zap.Error(err))
	}
	if o, ok := obs.(DrainInterruptObserver); ok {
		o.DrainerInterrupted()
	}
	return skipped, nil
}

// DrainInterruptObserver is optionally implemented by an Observer to learn
// of a drainer stopped by its context before the slot was empty (neither
// succeeded nor failed), so that an active-drainers gauge can go down.
type DrainInterruptObserver interface {
	DrainerInterrupted()
}

// handoverFile in a slot is the request of the slot's own exporter,
// restarted while an orphan drainer holds its lock, to have the slot back.
const handoverFile = ".handover"

// handoverPoll is how often a drainer looks for a handover request.
const handoverPoll = 100 * time.Millisecond

// RequestHandover asks the orphan drainer holding the slot, if any, to
// close it: the slot's own exporter calls it on every retry while the lock
// is held, and WithdrawHandover once it has the slot or gives up. Each call
// writes new content, and a drainer yields only to content that changes
// while it holds the slot, so a request left by a process that died is not
// taken for a live one.
func RequestHandover(slot string) error {
	b := fmt.Appendf(nil, "%d %d\n", os.Getpid(), time.Now().UnixNano())
	return os.WriteFile(filepath.Join(slot, handoverFile), b, 0o600)
}

// WithdrawHandover removes the slot's handover request.
func WithdrawHandover(slot string) error {
	if err := os.Remove(filepath.Join(slot, handoverFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// watchHandover returns a context that ends with ctx or when a handover
// request for slot appears; yield stops the watch and reports the latter.
func watchHandover(ctx context.Context, slot string) (context.Context, func() bool) {
	read := func() string {
		b, _ := os.ReadFile(filepath.Join(slot, handoverFile))
		return string(b)
	}
	initial := read()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var asked atomic.Bool
	go func() {
		defer close(done)
		t := time.NewTicker(handoverPoll)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if c := read(); c != "" && c != initial {
				asked.Store(true)
				cancel()
				return
			}
		}
	}()
	return wctx, func() bool {
		cancel()
		<-done
		return asked.Load()
	}
}
