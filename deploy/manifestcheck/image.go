package manifestcheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ImageContract is what a Containerfile's final stage promises the
// manifests that run its image: the files it puts where (with their owner
// when set), the user, the volumes, the ports, the entrypoint and the
// default command.
type ImageContract struct {
	// Files maps each COPY destination to its --chown ("" when none).
	Files                                 map[string]string
	User, Volume, Expose, Entrypoint, Cmd string
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
	c := ImageContract{Files: map[string]string{}}
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
		}
	}
	return c, nil
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
	} {
		if s.a != s.b {
			d = append(d, fmt.Sprintf("%s %s, want %s", s.name, s.b, s.a))
		}
	}
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

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
