package manifestcheck

import (
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
		"user":        {"USER 10001:10001", "USER 0:0", "USER 0:0"},
		"volume":      {`VOLUME ["/var/lib/otelcol/questdb"]`, `VOLUME ["/data"]`, "VOLUME"},
		"port":        {"EXPOSE 4317 4318 13133 8888", "EXPOSE 4317 4318 13133", "EXPOSE"},
		"entrypoint":  {`ENTRYPOINT ["/usr/local/bin/otelcol-questdb"]`, `ENTRYPOINT ["/otelcol"]`, "ENTRYPOINT"},
		"command":     {`CMD ["--config", "/etc/otelcol/config.yaml"]`, `CMD ["--config", "/config.yaml"]`, "CMD"},
		"binary path": {"COPY questdb-slot /usr/local/bin/questdb-slot", "COPY questdb-slot /bin/questdb-slot", "no COPY to /usr/local/bin/questdb-slot"},
		"owner":       {"COPY --chown=10001:10001 questdb/", "COPY questdb/", "owned by"},
		"extra file":  {"COPY group /etc/group", "COPY group /etc/group\nCOPY sh /bin/sh", "/bin/sh"},
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
