package sfqueue

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The power-loss campaign of RELIABILITY.md: in each durability mode, many
// simulated power losses (crashFS) of a queue with several segments under
// concurrent appends and acks; then a restart, a QuestDB outage (appends,
// no acks), a process crash (kill -9) and a second restart. In every run:
// the accepted frames lost are inside the mode's loss window (rule.go),
// every one of them that the slot holds a trace of is counted as torn (the
// count equals that loss exactly), no slot is set aside, and every frame
// accepted after the restart is delivered.

// envPowerLossSeeds overrides the seeds per mode (SFQUEUE_POWERLOSS_SEEDS=N).
const envPowerLossSeeds = "SFQUEUE_POWERLOSS_SEEDS"

func powerLossCampaignSeeds(t *testing.T) int {
	if s := os.Getenv(envPowerLossSeeds); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of seeds", envPowerLossSeeds, s)
		}
		return n
	}
	if os.Getenv("QDB_LONG") == "1" {
		return 300
	}
	if testing.Short() {
		return 6
	}
	return 20
}

// campaignFigures sum a mode's runs.
type campaignFigures struct {
	runs, lulls, segments int
	returned, lost        int // unacked frames whose Append returned before the cut; of them lost
	counted, untraced     int // lost frames counted as torn; lost with no trace on disk (appended after the last save)
	torn                  uint64
	byCause               map[TornCause]uint64 // the torn frames by cause
	maxWindow             int                  // most frames one run lost
	afterRestart, second  int                  // frames accepted after the restart; delivered after the second crash
}

func TestPowerLossCampaign(t *testing.T) {
	seeds := powerLossCampaignSeeds(t)
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			f := campaignFigures{byCause: map[TornCause]uint64{}}
			for seed := range seeds {
				powerLossCampaignRun(t, d, uint64(seed), &f)
			}
			if f.returned == 0 || f.afterRestart == 0 {
				t.Fatal("no append returned: the campaign checked nothing")
			}
			t.Logf("%v: %d power losses (%d after a lull in appends; %d segments at the cut on average), %d returned unacked frames, %d lost (%d counted as torn, %d appended after the last .ack-watermark save with no trace on disk), at most %d in one run; %d torn frames counted (by cause: %v); 0 slots set aside; %d frames accepted after the restart, %d delivered after the second crash",
				d, f.runs, f.lulls, f.segments/max(f.runs, 1), f.returned, f.lost, f.counted, f.untraced, f.maxWindow, f.torn, f.byCause, f.afterRestart, f.second)
		})
	}
}

func powerLossCampaignRun(t *testing.T, d Durability, seed uint64, f *campaignFigures) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, uint64(d)+23))
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, SyncInterval: 10 * time.Millisecond, MaxSegmentBytes: 2048}
	q := mustOpen(t, o)

	var mu sync.Mutex
	returned := map[uint64]uint64{} // FSN -> payload id, Appends returned before the cut
	cut := false
	ctx, stop := context.WithCancel(context.Background())
	appCtx, stopAppends := context.WithCancel(ctx)
	var wg, appenders sync.WaitGroup
	for g := range 2 {
		gs := r.Uint64()
		appenders.Go(func() {
			rg := rand.New(rand.NewPCG(gs, uint64(g)))
			for seq := uint64(0); appCtx.Err() == nil; seq++ {
				id := uint64(g+1)<<40 | seq
				fsn, err := q.Append(appCtx, testPayload(id, 12+rg.IntN(200)))
				if err != nil {
					return
				}
				mu.Lock()
				if !cut {
					returned[fsn] = id
				}
				mu.Unlock()
				time.Sleep(time.Duration(rg.IntN(200)) * time.Microsecond)
			}
		})
	}
	wg.Go(func() { ackWithLag(ctx, q, 60) }) // several segments stay unacked
	// Before and after the first .ack-watermark saves (every 250 ms). In
	// half of the runs the appends stop 300 ms before the cut (a lull):
	// the last save then records every published frame, and every frame
	// lost must be counted.
	time.Sleep(time.Duration(50+r.IntN(600)) * time.Millisecond)
	lull := r.IntN(2) == 0
	if lull {
		stopAppends()
		appenders.Wait()
		time.Sleep(300 * time.Millisecond)
	}
	mode := []crashMode{dropUnsynced, keepSomeWrites, keepAndGarbage, keepNames}[r.IntN(4)]
	mu.Lock()
	q.mu.Lock()
	durable, acked := q.durable, q.acked
	unsynced := 0 // segments holding frames no completed fsync covered
	for _, s := range q.segs {
		if s.end()-1 > durable {
			unsynced++
		}
	}
	f.segments += len(q.segs)
	snap := cfs.PowerLoss(mode, r)
	q.mu.Unlock()
	cut = true
	mu.Unlock()
	stopAppends()
	stop()
	appenders.Wait()
	wg.Wait()
	q.Close()
	if d == DurabilityMemory && unsynced > 2 {
		t.Fatalf("seed %d: %d segments held unsynced frames at the cut; memory durability promises the active one and at most one sealed", seed, unsynced)
	}
	wm, _, _ := readWatermark(snap, "/d/s")

	// Life 2: recovery after the power loss.
	o.FS = snap
	q = mustOpen(t, o)
	rep := q.Recovery()
	if rep.Unreplayable != nil || rep.LostFrames != 0 {
		t.Fatalf("seed %d (%v, crash mode %d): a power loss set the slot aside or lost frames outside the window: %+v", seed, d, mode, rep)
	}
	recovered := map[uint64]uint64{}
	for _, fr := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(fr.payload)
		if err != nil {
			t.Fatalf("seed %d: FSN %d: %v", seed, fr.fsn, err)
		}
		if want, ok := returned[fr.fsn]; ok && want != id {
			t.Fatalf("seed %d: FSN %d holds payload %x, Append returned it for %x", seed, fr.fsn, id, want)
		}
		recovered[fr.fsn] = id
	}
	inTorn := func(fsn uint64) bool {
		for _, tr := range rep.Torn {
			if fsn >= tr.First && fsn <= tr.Last {
				return true
			}
		}
		return false
	}
	var tornLast uint64
	for _, tr := range rep.Torn {
		tornLast = max(tornLast, tr.Last)
		for fsn := tr.First; fsn <= tr.Last; fsn++ {
			if _, ok := recovered[fsn]; ok {
				t.Fatalf("seed %d: FSN %d counted torn and replayed: %+v", seed, fsn, rep)
			}
		}
	}
	lost := 0
	for fsn := range returned {
		if fsn <= acked {
			continue // QuestDB has it
		}
		f.returned++
		if _, ok := recovered[fsn]; ok {
			continue
		}
		lost++
		if fsn <= durable {
			t.Fatalf("seed %d (%v): FSN %d lost, but a completed fsync covered up to %d: outside the window", seed, d, fsn, durable)
		}
		switch {
		case inTorn(fsn):
			f.counted++
		case fsn > tornLast && fsn > wm.published && !lull:
			f.untraced++ // appended after the last save; no byte of it, nor a name, on disk
		default:
			t.Fatalf("seed %d (%v, crash mode %d): FSN %d lost and not counted (torn %v, published recorded %d): %+v",
				seed, d, mode, fsn, rep.Torn, wm.published, rep)
		}
	}
	if d == DurabilityFlush && lost > 0 {
		t.Fatalf("seed %d: flush durability lost %d answered frames", seed, lost)
	}
	f.runs++
	if lull {
		f.lulls++
	}
	f.lost += lost
	f.torn += rep.TornFrames
	for _, r := range rep.Torn {
		switch r.TornCause {
		case TornTail, TornCreation, TornUnwrittenSegment, TornNeverWritten, TornAfterCut:
			f.byCause[r.TornCause] += r.Frames()
		default:
			t.Fatalf("seed %d: torn range %v has no known cause (%q)", seed, r, r.TornCause)
		}
	}
	f.maxWindow = max(f.maxWindow, lost)

	// QuestDB is down: appends, no acks; then kill -9.
	after := map[uint64]bool{}
	for k := range 20 + r.IntN(60) {
		id := uint64(1)<<50 | uint64(k)
		mustAppend(t, q, testPayload(id, 12+r.IntN(200)))
		after[id] = true
	}
	f.afterRestart += len(after)
	kill(q)

	// Life 3: everything life 2 had is delivered.
	q = mustOpen(t, o)
	defer q.Close()
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.TornFrames != 0 || rep.LostFrames != 0 {
		t.Fatalf("seed %d: recovery after a kill -9: %+v", seed, rep)
	}
	got := map[uint64]bool{}
	for _, fr := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(fr.payload)
		if err != nil {
			t.Fatalf("seed %d: after the second crash FSN %d: %v", seed, fr.fsn, err)
		}
		got[id] = true
	}
	for id := range after {
		if !got[id] {
			t.Fatalf("seed %d (%v): frame %x accepted after the restart was not delivered after the second crash", seed, d, id)
		}
		f.second++
	}
	for _, id := range recovered {
		if !got[id] {
			t.Fatalf("seed %d (%v): frame %x recovered after the power loss is gone after the second crash", seed, d, id)
		}
	}
}
