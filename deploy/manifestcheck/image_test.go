package manifestcheck

import (
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// localExtras are the files distroless brings and the FROM scratch recipe
// copies itself.
var localExtras = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/etc/group"}

func readContract(t *testing.T, path string) (ImageContract, string) {
	t.Helper()
	raw := mustRead(t, path)
	c, err := ParseImageContract(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c, string(raw)
}

// TestImageRecipesShareTheirContract: the offline recipe (make image-local)
// builds the image the manifests run, the same as the registry recipe (make
// image), and both agree with the manifests' user, volume and sf_dir.
func TestImageRecipesShareTheirContract(t *testing.T) {
	reg, _ := readContract(t, "../image/Containerfile")
	local, _ := readContract(t, "../image/Containerfile.local")
	for _, d := range reg.Differences(local, localExtras) {
		t.Errorf("Containerfile.local: %s", d)
	}
	if len(reg.Files) < 4 || reg.User == "" || reg.Entrypoint == "" {
		t.Fatalf("Containerfile's final stage read as %+v: the parser missed it", reg)
	}
	if _, ok := reg.Files["."]; ok {
		t.Error("the build stage's COPY was read as part of the runtime image")
	}

	// README, Running a fleet: on SIGTERM the exporter drains within
	// close_flush_timeout, inside the pod's grace period; another signal
	// (containerd sends the image's STOPSIGNAL) would skip the drain or
	// kill it outright.
	if sig := reg.EffectiveStopSignal(); sig != "SIGTERM" {
		t.Errorf("Containerfile stops the collector with %s; the grace period and close_flush_timeout assume SIGTERM", sig)
	}

	volume := strings.Trim(reg.Volume, `[]" `)
	c := parseGatewayConfig(t, "image/config.yaml", mustRead(t, "../image/config.yaml"))
	if c.Exporters.QuestDB.SFDir != volume {
		t.Errorf("image/config.yaml: sf_dir %q, the image's volume is %q", c.Exporters.QuestDB.SFDir, volume)
	}
	if chown := reg.Files[volume]; chown != reg.User {
		t.Errorf("the volume %s is owned by %q, the image runs as %q: a fresh volume would not be writable", volume, chown, reg.User)
	}
	for _, o := range decodeFile(t, "../kubernetes/gateway.yaml") {
		sts, ok := o.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		pod := sts.Spec.Template.Spec
		user := strconv.FormatInt(*pod.SecurityContext.RunAsUser, 10) + ":" + strconv.FormatInt(*pod.SecurityContext.RunAsGroup, 10)
		if user != reg.User {
			t.Errorf("gateway.yaml runs as %s, the image as %s", user, reg.User)
		}
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == "slot" && m.MountPath != volume {
				t.Errorf("gateway.yaml mounts the slot at %s, the image's volume is %s", m.MountPath, volume)
			}
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImageContractDifferencesCatchDrift: each way the offline recipe could
// drift from the registry one is reported.
func TestImageContractDifferencesCatchDrift(t *testing.T) {
	reg, _ := readContract(t, "../image/Containerfile")
	_, local := readContract(t, "../image/Containerfile.local")
	for name, c := range map[string]struct{ old, new, want string }{
		"user":        {"USER 10001:10001", "USER 0:0", `USER "0:0"`},
		"volume":      {`VOLUME ["/var/lib/otelcol/questdb"]`, `VOLUME ["/data"]`, "VOLUME"},
		"port":        {"EXPOSE 4317 4318 13133 8888", "EXPOSE 4317 4318 13133", "EXPOSE"},
		"entrypoint":  {`ENTRYPOINT ["/usr/local/bin/otelcol-questdb"]`, `ENTRYPOINT ["/otelcol"]`, "ENTRYPOINT"},
		"command":     {`CMD ["--config", "/etc/otelcol/config.yaml"]`, `CMD ["--config", "/config.yaml"]`, "CMD"},
		"binary path": {"COPY questdb-slot /usr/local/bin/questdb-slot", "COPY questdb-slot /bin/questdb-slot", "no COPY to /usr/local/bin/questdb-slot"},
		"owner":       {"COPY --chown=10001:10001 questdb/", "COPY questdb/", "owned by"},
		"extra file":  {"COPY group /etc/group", "COPY group /etc/group\nCOPY sh /bin/sh", "/bin/sh"},
		// The process's surroundings, which the parser once skipped.
		"environment": {"USER 10001:10001", "USER 10001:10001\nENV GOMEMLIMIT=400MiB", "ENV GOMEMLIMIT"},
		"workdir":     {"USER 10001:10001", "USER 10001:10001\nWORKDIR /tmp", "WORKDIR"},
		"label":       {"USER 10001:10001", "USER 10001:10001\nLABEL org.opencontainers.image.version=0.0.1", "LABEL org.opencontainers.image.version"},
		"stop signal": {"USER 10001:10001", "USER 10001:10001\nSTOPSIGNAL SIGINT", `STOPSIGNAL "SIGINT", want "SIGTERM"`},
	} {
		if !strings.Contains(local, c.old) {
			t.Fatalf("%s: Containerfile.local no longer has %q", name, c.old)
		}
		drifted, err := ParseImageContract([]byte(strings.Replace(local, c.old, c.new, 1)))
		if err != nil {
			t.Fatal(err)
		}
		d := strings.Join(reg.Differences(drifted, localExtras), "; ")
		if !strings.Contains(d, c.want) {
			t.Errorf("%s: differences %q do not name %q", name, d, c.want)
		}
	}
}

func TestParseImageContractJoinsContinuationsAndNeedsFrom(t *testing.T) {
	c, err := ParseImageContract([]byte("FROM a AS b\nCOPY x /y\nFROM scratch\n# note\nCOPY --from=b \\\n  --chown=1:1 /y /z/\nUSER 1:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 1 || c.Files["/z"] != "1:1" || c.User != "1:1" {
		t.Fatalf("got %+v, want only /z owned by 1:1 and USER 1:1", c)
	}
	if _, err := ParseImageContract([]byte("COPY a /b\n")); err == nil {
		t.Error("a Containerfile without FROM parsed")
	}
}

// TestImageContractReadsTheProcessSettings: ENV and LABEL in both forms,
// quotes and escapes, later keys replacing earlier ones, a relative WORKDIR
// joined to the one before, and STOPSIGNAL by name or number; the same
// settings written another way are no drift, a changed one is.
func TestImageContractReadsTheProcessSettings(t *testing.T) {
	parse := func(stage string) ImageContract {
		t.Helper()
		c, err := ParseImageContract([]byte("FROM scratch\n" + stage))
		if err != nil {
			t.Fatalf("%q: %v", stage, err)
		}
		return c
	}
	c := parse("ENV A=1 B=\"two words\" C=a\\ b\nENV A=3\nENV D the whole value\n" +
		"LABEL x=\"y z\" 'q'=r\nWORKDIR /srv\nWORKDIR data\nSTOPSIGNAL 15\n")
	wantEnv := map[string]string{"A": "3", "B": "two words", "C": "a b", "D": "the whole value"}
	if !maps.Equal(c.Env, wantEnv) || !maps.Equal(c.Labels, map[string]string{"x": "y z", "q": "r"}) ||
		c.Workdir != "/srv/data" || c.EffectiveStopSignal() != "SIGTERM" {
		t.Fatalf("read %+v; want env %v, labels x and q, workdir /srv/data, SIGTERM", c, wantEnv)
	}

	same := parse("ENV A=3 B='two words'\nENV C=\"a b\"\nENV D=\"the whole value\"\n" +
		"LABEL q=r x=\"y z\"\nWORKDIR /srv/./data/\nSTOPSIGNAL term\n")
	if d := c.Differences(same, nil); len(d) != 0 {
		t.Errorf("the same settings written another way: %q", d)
	}
	// The older ENV form with a quoted value or a tab after the key, and a
	// tab between pairs: the builder drops the quotes and splits at tabs.
	legacy := parse("ENV A\t3\nENV B \"two words\"\nENV C=a\\ b\tD='the whole value'\n" +
		"LABEL q=r\tx=\"y z\"\nWORKDIR /srv/data\nSTOPSIGNAL SIGTERM\n")
	if d := c.Differences(legacy, nil); len(d) != 0 {
		t.Errorf("the older ENV form and tabs: %q (env %v)", d, legacy.Env)
	}
	if spaced := parse("ENV D the  whole 'value'\n"); spaced.Env["D"] != "the  whole value" {
		t.Errorf("ENV D the  whole 'value': %q, want the spaces kept and the quotes dropped", spaced.Env["D"])
	}
	for _, tc := range []struct{ stage, want string }{
		{"ENV A=4 B=\"two words\" C=\"a b\" D=\"the whole value\"", `ENV A="4", want "3"`},
		{"ENV B=\"two words\" C=\"a b\" D=\"the whole value\"", "no ENV A"},
		{"LABEL x=\"y z\"", "no LABEL q"},
		{"WORKDIR /srv", `WORKDIR "/srv", want "/srv/data"`},
		{"STOPSIGNAL 9", `STOPSIGNAL "SIGKILL", want "SIGTERM"`},
	} {
		other := parse(tc.stage)
		if d := strings.Join(c.Differences(other, nil), "; "); !strings.Contains(d, tc.want) {
			t.Errorf("%q: differences %q do not name %q", tc.stage, d, tc.want)
		}
	}
	for _, bad := range []string{"ENV A=\"open", "LABEL novalue", "ENV"} {
		if _, err := ParseImageContract([]byte("FROM scratch\n" + bad + "\n")); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
