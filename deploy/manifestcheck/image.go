package manifestcheck

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// ImageContract is what a Containerfile's final stage promises the
// manifests that run its image: the files it puts where (with their owner
// when set), the user, the volumes, the ports, the entrypoint and the
// default command, and the process's surroundings: its environment, its
// working directory, its labels and the signal that stops it.
type ImageContract struct {
	// Files maps each COPY destination to its --chown ("" when none).
	Files                                 map[string]string
	User, Volume, Expose, Entrypoint, Cmd string
	// Env and Labels hold every ENV and LABEL of the stage, a later one
	// replacing an earlier one of the same key, as the builder does.
	Env, Labels map[string]string
	// Workdir is the working directory the last WORKDIR leaves ("" when
	// none: the base image's).
	Workdir string
	// StopSignal is STOPSIGNAL as written ("" when none: SIGTERM).
	StopSignal string
}

// ParseImageContract reads the final stage of a Containerfile: the
// instructions after its last FROM. Continuation lines are joined; RUN and
// the like are not part of the contract and are skipped.
func ParseImageContract(containerfile []byte) (ImageContract, error) {
	var lines []string
	cont := ""
	for _, l := range strings.Split(string(containerfile), "\n") {
		t := strings.TrimSpace(l)
		if cont == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cont += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cont+t)
		cont = ""
	}
	last := -1
	for i, l := range lines {
		if strings.EqualFold(firstWord(l), "FROM") {
			last = i
		}
	}
	if last < 0 {
		return ImageContract{}, fmt.Errorf("no FROM")
	}
	c := ImageContract{Files: map[string]string{}, Env: map[string]string{}, Labels: map[string]string{}}
	for _, l := range lines[last+1:] {
		word := strings.ToUpper(firstWord(l))
		rest := strings.TrimSpace(l[len(word):])
		switch word {
		case "COPY":
			f := strings.Fields(rest)
			chown := ""
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--chown="); ok {
					chown = v
				}
				f = f[1:]
			}
			if len(f) < 2 {
				return c, fmt.Errorf("COPY without a destination: %q", l)
			}
			c.Files[strings.TrimSuffix(f[len(f)-1], "/")] = chown
		case "USER":
			c.User = rest
		case "VOLUME":
			c.Volume = rest
		case "EXPOSE":
			c.Expose = rest
		case "ENTRYPOINT":
			c.Entrypoint = rest
		case "CMD":
			c.Cmd = rest
		case "ENV":
			if err := keyValues(c.Env, rest, true); err != nil {
				return c, fmt.Errorf("ENV: %w: %q", err, l)
			}
		case "LABEL":
			if err := keyValues(c.Labels, rest, false); err != nil {
				return c, fmt.Errorf("LABEL: %w: %q", err, l)
			}
		case "WORKDIR":
			if path.IsAbs(rest) || c.Workdir == "" {
				c.Workdir = path.Clean("/" + rest)
			} else {
				c.Workdir = path.Join(c.Workdir, rest)
			}
		case "STOPSIGNAL":
			c.StopSignal = rest
		}
	}
	return c, nil
}

// keyValues adds to m the pairs of an ENV or LABEL instruction:
// key=value pairs, a value quoted when it holds spaces, or, for ENV only,
// the older form "key the whole value".
func keyValues(m map[string]string, rest string, legacy bool) error {
	words, err := splitQuoted(rest, true)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return fmt.Errorf("no key")
	}
	// The older form: the key, a space or tab, and the rest, whose quotes
	// and escapes the builder removes while keeping its spaces.
	if i := strings.IndexAny(rest, " \t"); legacy && !strings.Contains(words[0], "=") && i > 0 {
		value, err := splitQuoted(strings.TrimSpace(rest[i:]), false)
		if err != nil {
			return err
		}
		m[rest[:i]] = strings.Join(value, "")
		return nil
	}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", w)
		}
		m[k] = v
	}
	return nil
}

// splitQuoted splits s at spaces and tabs outside double or single quotes
// (with split; without, it keeps them and returns one word at most) and
// drops the quotes; a backslash outside single quotes takes the next
// character as it is.
func splitQuoted(s string, split bool) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case split && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("unterminated quote or escape")
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// signalNumbers names the signals STOPSIGNAL may give by number that a
// collector image could plausibly use.
var signalNumbers = map[string]string{"1": "SIGHUP", "2": "SIGINT", "3": "SIGQUIT", "9": "SIGKILL", "15": "SIGTERM"}

// EffectiveStopSignal is the signal a container engine (docker, podman,
// containerd under Kubernetes) sends to stop the image: STOPSIGNAL,
// named in upper case with its SIG prefix, or SIGTERM without one.
func (c ImageContract) EffectiveStopSignal() string {
	s := strings.ToUpper(strings.TrimSpace(c.StopSignal))
	if s == "" {
		return "SIGTERM"
	}
	if n, ok := signalNumbers[s]; ok {
		return n
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return s
}

func firstWord(l string) string {
	if f := strings.Fields(l); len(f) > 0 {
		return f[0]
	}
	return ""
}

// Differences lists where other breaks c's contract: a setting that
// differs, or a file of c that other lacks or owns differently. Files other
// adds beyond c's are allowed only when named in extra (what c's base image
// provides and other's must bring itself).
func (c ImageContract) Differences(other ImageContract, extra []string) []string {
	var d []string
	for _, s := range []struct{ name, a, b string }{
		{"USER", c.User, other.User}, {"VOLUME", c.Volume, other.Volume}, {"EXPOSE", c.Expose, other.Expose},
		{"ENTRYPOINT", c.Entrypoint, other.Entrypoint}, {"CMD", c.Cmd, other.Cmd},
		{"WORKDIR", c.Workdir, other.Workdir}, {"STOPSIGNAL", c.EffectiveStopSignal(), other.EffectiveStopSignal()},
	} {
		if s.a != s.b {
			d = append(d, fmt.Sprintf("%s %q, want %q", s.name, s.b, s.a))
		}
	}
	d = append(d, mapDifferences("ENV", c.Env, other.Env)...)
	d = append(d, mapDifferences("LABEL", c.Labels, other.Labels)...)
	for _, dst := range sortedKeys(c.Files) {
		chown, ok := other.Files[dst]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("no COPY to %s", dst))
		case chown != c.Files[dst]:
			d = append(d, fmt.Sprintf("COPY to %s owned by %q, want %q", dst, chown, c.Files[dst]))
		}
	}
	for _, dst := range sortedKeys(other.Files) {
		if _, ok := c.Files[dst]; !ok && !slices.Contains(extra, dst) {
			d = append(d, fmt.Sprintf("COPY to %s, which the other recipe lacks", dst))
		}
	}
	return d
}

// mapDifferences lists the keys of an ENV or LABEL set that other lacks,
// sets differently or adds.
func mapDifferences(what string, want, got map[string]string) []string {
	var d []string
	for _, k := range sortedKeys(want) {
		switch v, ok := got[k]; {
		case !ok:
			d = append(d, fmt.Sprintf("no %s %s", what, k))
		case v != want[k]:
			d = append(d, fmt.Sprintf("%s %s=%q, want %q", what, k, v, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s %s=%q, which the other recipe lacks", what, k, got[k]))
		}
	}
	return d
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
