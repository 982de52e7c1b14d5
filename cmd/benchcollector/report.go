package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// median of xs (the mean of the middle two for an even count); NaN-free
// input assumed, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// find returns the run of a round, shape and exporter, if there was one.
func find(results []runResult, round int, shape, exporter string) (runResult, bool) {
	for _, r := range results {
		if r.round == round && r.shape == shape && r.exporter == exporter {
			return r, true
		}
	}
	return runResult{}, false
}

// ratios is, per round that measured both, a's CPU per item over b's.
func ratios(results []runResult, shape, a, b string, rounds int) []float64 {
	var out []float64
	for round := 1; round <= rounds; round++ {
		ra, okA := find(results, round, shape, a)
		rb, okB := find(results, round, shape, b)
		if okA && okB && rb.cpuPerItem() > 0 {
			out = append(out, ra.cpuPerItem()/rb.cpuPerItem())
		}
	}
	return out
}

func join(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

// report prints the medians per shape and exporter, then the per-round
// ratios of the questdb configuration to nop and to otlp_http.
func report(w io.Writer, results []runResult, shapeNames, exporterNames []string, rounds int, o runOptions) {
	orDefault := func(s string) string {
		if s == "" {
			return "default"
		}
		return s
	}
	fmt.Fprintf(w, "\n%d rounds, %d requests x %d items per run, %d clients; questdb sf_durability: %s, symbol_dict_max_bytes: %s, max_batch_bytes: %s\n\n",
		rounds, o.requests, itemsPerRequest, o.concurrency, o.durability, orDefault(o.dictBytes), orDefault(o.batchBytes))
	fmt.Fprintln(w, "| shape | exporter | CPU µs/item, median (min-max) | peak RSS MB, median (max) | wall s, median | frames/request | KB to sink/request | accepted = arrived |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, sh := range shapeNames {
		for _, ex := range exporterNames {
			var cpu, rss, wall []float64
			var frames, requests, toSink int64
			lost, runs := int64(0), 0
			for _, r := range results {
				if r.shape != sh || r.exporter != ex {
					continue
				}
				runs++
				cpu = append(cpu, r.cpuPerItem())
				rss = append(rss, float64(r.peakRSS)/(1<<20))
				wall = append(wall, r.wall.Seconds())
				lost += r.lost() + r.load.rejected*itemsPerRequest
				if r.frames >= 0 {
					frames += r.frames
					toSink += r.toSink
					requests += r.load.requests
				}
			}
			if runs == 0 {
				continue
			}
			fpr, kpr := "–", "–"
			if requests > 0 {
				fpr = fmt.Sprintf("%.2f", float64(frames)/float64(requests))
				kpr = fmt.Sprintf("%.1f", float64(toSink)/1024/float64(requests))
			}
			check := "yes"
			switch {
			case ex == "nop":
				check = "– (nop keeps nothing)"
			case lost > 0:
				check = fmt.Sprintf("NO: %d items missing or refused", lost)
			}
			fmt.Fprintf(w, "| %s | %s | %.2f (%.2f-%.2f) | %.0f (%.0f) | %.1f | %s | %s | %s |\n",
				sh, ex, median(cpu), slices.Min(cpu), slices.Max(cpu), median(rss), slices.Max(rss), median(wall), fpr, kpr, check)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| shape | ratio | per round | median |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, sh := range shapeNames {
		for _, q := range exporterNames {
			if !strings.HasPrefix(q, "questdb") {
				continue
			}
			for _, base := range exporterNames {
				if base != "nop" && !strings.HasPrefix(base, "otlp_http") {
					continue
				}
				rs := ratios(results, sh, q, base, rounds)
				if len(rs) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %s / %s | %s | **%.2f** |\n", sh, q, base, join(rs, "%.2f"), median(rs))
			}
		}
	}
}
