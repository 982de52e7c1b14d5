package manifestcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// manifestGlobs are the Kubernetes manifests under deploy/.
var manifestGlobs = []string{"../kubernetes/*.yaml", "../operator/*.yaml"}

func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range manifestGlobs {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found %d manifests (%v): the globs no longer match deploy/'s layout", len(files), files)
	}
	return files
}

func decodeFile(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: no Kubernetes object in it", path)
	}
	return objs
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, f := range manifestFiles(t) {
		t.Logf("%s: %d objects", f, len(decodeFile(t, f)))
	}
}

func TestDecodeRefusesWhatKubernetesWouldNot(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\nspec:\n  replicaz: 3\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nmetadata: {name: b}\n",
		"wrong type":      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {backoffLimit: many}\n",
		"unknown kind":    "apiVersion: v1\nkind: Sevrice\nmetadata: {name: a}\n",
		"operator field":  "apiVersion: opentelemetry.io/v1beta1\nkind: OpenTelemetryCollector\nmetadata: {name: a}\nspec: {mode: statefulset, replica: 2}\n",
	} {
		if _, err := Decode([]byte("# a comment\n---\n" + doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// gatewayConfig is what the consistency checks read from a gateway's
// collector configuration.
type gatewayConfig struct {
	Exporters struct {
		QuestDB struct {
			SFDir             string `json:"sf_dir"`
			SenderID          string `json:"sender_id"`
			CloseFlushTimeout string `json:"close_flush_timeout"`
		} `json:"questdb"`
	} `json:"exporters"`
	Extensions struct {
		HealthCheck struct {
			Endpoint string `json:"endpoint"`
		} `json:"health_check"`
	} `json:"extensions"`
}

func parseGatewayConfig(t *testing.T, where string, raw []byte) gatewayConfig {
	t.Helper()
	var c gatewayConfig
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return c
}

// checkGateway holds a gateway's pod to what the README's "Running a fleet"
// promises: the grace period outlasts close_flush_timeout, sender_id is the
// pod name, sf_dir is on the claim, and the probes use the health_check
// extension's plain endpoint (which stays healthy through a QuestDB outage).
func checkGateway(t *testing.T, where string, c gatewayConfig, grace int64, env []corev1.EnvVar, mounts []corev1.VolumeMount, claims []corev1.PersistentVolumeClaim, args []string) {
	t.Helper()
	q := c.Exporters.QuestDB
	cft, err := time.ParseDuration(q.CloseFlushTimeout)
	if err != nil {
		t.Fatalf("%s: close_flush_timeout %q: %v", where, q.CloseFlushTimeout, err)
	}
	if time.Duration(grace)*time.Second <= cft+10*time.Second {
		t.Errorf("%s: terminationGracePeriodSeconds %d leaves under 10s beyond close_flush_timeout %s", where, grace, cft)
	}
	if q.SenderID != "${env:POD_NAME}" {
		t.Errorf("%s: sender_id %q, want ${env:POD_NAME}", where, q.SenderID)
	}
	fromPodName := false
	for _, e := range env {
		if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			fromPodName = true
		}
	}
	if !fromPodName {
		t.Errorf("%s: no POD_NAME from the downward API's metadata.name", where)
	}
	onClaim := false
	for _, m := range mounts {
		for _, c := range claims {
			if m.Name == c.Name && m.MountPath == q.SFDir {
				onClaim = true
			}
		}
	}
	if !onClaim {
		t.Errorf("%s: sf_dir %q is not the mount of a volumeClaimTemplate", where, q.SFDir)
	}
	for _, a := range args {
		if strings.Contains(a, "useComponentStatus") {
			t.Errorf("%s: %q makes the health check follow component status: liveness would fail during a QuestDB outage", where, a)
		}
	}
}

func TestGatewayManifestsKeepTheirPromises(t *testing.T) {
	var sts *appsv1.StatefulSet
	configs := map[string]*corev1.ConfigMap{}
	for _, o := range decodeFile(t, "../kubernetes/gateway.yaml") {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			sts = o
		case *corev1.ConfigMap:
			configs[o.Name] = o
		}
	}
	if sts == nil {
		t.Fatal("gateway.yaml has no StatefulSet")
	}
	pod := sts.Spec.Template.Spec
	cm := configs[pod.Volumes[0].ConfigMap.Name]
	if cm == nil {
		t.Fatalf("the StatefulSet's config volume names ConfigMap %q, which gateway.yaml lacks", pod.Volumes[0].ConfigMap.Name)
	}
	c := parseGatewayConfig(t, "gateway.yaml", []byte(cm.Data["config.yaml"]))
	ctr := pod.Containers[0]
	// The drain on SIGTERM is what the grace period is sized for; a pod's
	// own stop signal would override the image's.
	if l := ctr.Lifecycle; l != nil && l.StopSignal != nil && *l.StopSignal != corev1.SIGTERM {
		t.Errorf("gateway.yaml: lifecycle.stopSignal %s; the grace period and close_flush_timeout assume SIGTERM", *l.StopSignal)
	}
	checkGateway(t, "gateway.yaml", c, *pod.TerminationGracePeriodSeconds, ctr.Env, ctr.VolumeMounts, sts.Spec.VolumeClaimTemplates, ctr.Args)
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/" {
			t.Fatalf("gateway.yaml: probe %+v, want an httpGet of the health_check extension's /", p)
		}
		port := p.HTTPGet.Port.String()
		for _, cp := range ctr.Ports {
			if cp.Name == port {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
		if !strings.HasSuffix(c.Extensions.HealthCheck.Endpoint, ":"+port) {
			t.Errorf("gateway.yaml: probe on port %s, health_check listens on %s", port, c.Extensions.HealthCheck.Endpoint)
		}
	}
	if sts.Spec.PersistentVolumeClaimRetentionPolicy == nil || sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Error("gateway.yaml: a scale-down must retain the removed pod's claim (its slot may hold data)")
	}

	var op *OpenTelemetryCollector
	for _, o := range decodeFile(t, "../operator/gateway.yaml") {
		op, _ = o.(*OpenTelemetryCollector)
	}
	if op == nil || op.Spec.Mode != "statefulset" {
		t.Fatal("operator/gateway.yaml: want an OpenTelemetryCollector in mode statefulset")
	}
	raw, err := yaml.Marshal(op.Spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	checkGateway(t, "operator/gateway.yaml", parseGatewayConfig(t, "operator", raw), *op.Spec.TerminationGracePeriodSeconds,
		op.Spec.Env, op.Spec.VolumeMounts, op.Spec.VolumeClaimTemplates, nil)
}

// binary returns the collector binary the env variable names, else the
// default path `make` builds.
func binary(t *testing.T, env, def string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = def
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("%s: %v (build it with `make build agent`, or name it in %s)", abs, err, env)
	}
	return abs
}

// collectorConfig is one collector configuration found in deploy/.
type collectorConfig struct {
	where string
	raw   []byte
	env   []string // what the pod's environment would hold
}

// collectorConfigs gathers every collector configuration under deploy/: the
// ConfigMaps' config.yaml, the Operator resource's spec.config, the Helm
// values' config (with the chart's defaults it removes by null dropped), the
// image's default and the fleet test's.
func collectorConfigs(t *testing.T) []collectorConfig {
	t.Helper()
	podEnv := []string{"POD_NAME=otelcol-gateway-0"}
	var out []collectorConfig
	for _, f := range manifestFiles(t) {
		for _, o := range decodeFile(t, f) {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				raw, ok := o.Data["config.yaml"]
				if !ok {
					t.Fatalf("%s: ConfigMap %s has no config.yaml", f, o.Name)
				}
				out = append(out, collectorConfig{f + ": ConfigMap " + o.Name, []byte(raw), podEnv})
			case *OpenTelemetryCollector:
				raw, err := yaml.Marshal(o.Spec.Config)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, collectorConfig{f + ": spec.config", raw, podEnv})
			}
		}
	}
	data, err := os.ReadFile("../helm/gateway-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Mode   string         `json:"mode"`
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("helm/gateway-values.yaml: %v", err)
	}
	if values.Mode != "statefulset" {
		t.Errorf("helm/gateway-values.yaml: mode %q, want statefulset", values.Mode)
	}
	raw, err := yaml.Marshal(dropNulls(values.Config))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, collectorConfig{"helm/gateway-values.yaml: config", raw, podEnv})
	for _, f := range []string{"../image/config.yaml", "../fleet/gateway.yaml", "../fleet/agent.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, collectorConfig{f, raw, []string{
			"POD_NAME=otelcol-gateway-0", "QUESTDB_ENDPOINT=questdb:9000",
			"FLEET_OTLP_GRPC_PORT=4317", "FLEET_HEALTH_PORT=13133", "FLEET_METRICS_PORT=8888",
			"FLEET_QUESTDB_ENDPOINT=127.0.0.1:9000", "FLEET_SF_DIR=/tmp/sf", "FLEET_SENDER_ID=gateway-0",
			"FLEET_OTLP_HTTP_PORT=4318", "FLEET_GATEWAYS=[127.0.0.1:4317, 127.0.0.1:4319]",
		}})
	}
	return out
}

// dropNulls removes the keys Helm would delete from the chart's defaults.
func dropNulls(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
	return m
}

// TestCollectorConfigsValidate runs each configuration through the built
// collector's `validate`: the QuestDB collector for gateways, the ocb-built
// agent (deploy/agent) for a configuration with the loadbalancing exporter.
func TestCollectorConfigsValidate(t *testing.T) {
	gateway := binary(t, "QUESTDB_COLLECTOR", "../../_build/otelcol-questdb")
	agent := binary(t, "AGENT_COLLECTOR", "../../_build/agent/otelcol-agent")
	configs := collectorConfigs(t)
	if len(configs) < 7 {
		t.Fatalf("found %d collector configurations, want at least 7", len(configs))
	}
	dir := t.TempDir()
	for i, c := range configs {
		bin := gateway
		if strings.Contains(string(c.raw), "loadbalancing") {
			bin = agent
		}
		path := filepath.Join(dir, strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(path, c.raw, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "validate", "--config", path)
		cmd.Env = append(os.Environ(), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %s validate: %v\n%s", c.where, filepath.Base(bin), err, out)
		} else {
			t.Logf("%s: valid for %s", c.where, filepath.Base(bin))
		}
	}
}

// validateImageConfig runs the built collector's validate on
// image/config.yaml changed by edit (nil: as it is), with POD_NAME set and sf_dir in a
// temporary directory, so that only the edit can make it fail.
func validateImageConfig(t *testing.T, edit func(string) string) (string, error) {
	t.Helper()
	gateway := binary(t, "QUESTDB_COLLECTOR", "../../_build/otelcol-questdb")
	raw := string(mustRead(t, "../image/config.yaml"))
	sfDir := t.TempDir()
	local := strings.Replace(raw, "sf_dir: /var/lib/otelcol/questdb", "sf_dir: "+sfDir, 1)
	if local == raw {
		t.Fatal("image/config.yaml no longer sets sf_dir: /var/lib/otelcol/questdb")
	}
	edited := local
	if edit != nil {
		if edited = edit(local); edited == local {
			t.Fatal("the edit changed nothing in image/config.yaml")
		}
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gateway, "validate", "--config", path)
	cmd.Env = append(os.Environ(), "POD_NAME=otelcol-gateway-0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestValidateRefusesABrokenConfig shows the check can fail, and for the
// reason it names: the configuration as shipped validates, a misspelt
// exporter setting is refused naming it, and so is the batch processor,
// which this build leaves out (README, Quick start: it would answer the
// client before the exporter stored anything).
func TestValidateRefusesABrokenConfig(t *testing.T) {
	if out, err := validateImageConfig(t, nil); err != nil {
		t.Fatalf("image/config.yaml with POD_NAME set does not validate: %v\n%s", err, out)
	}
	for name, c := range map[string]struct {
		edit func(string) string
		want string
	}{
		"misspelt setting": {func(s string) string { return strings.Replace(s, "close_flush_timeout:", "close_flush_timout:", 1) }, "close_flush_timout"},
		"batch processor": {func(s string) string {
			s = strings.Replace(s, "\nextensions:", "\nprocessors:\n  batch: {}\n\nextensions:", 1)
			return strings.Replace(s, "      exporters: [ questdb ]", "      processors: [ batch ]\n      exporters: [ questdb ]", 1)
		}, `unknown type: "batch"`},
	} {
		out, err := validateImageConfig(t, c.edit)
		if err == nil {
			t.Errorf("%s: validate accepted it:\n%s", name, out)
		} else if !strings.Contains(out, c.want) {
			t.Errorf("%s: validate refused it without naming %q:\n%s", name, c.want, out)
		}
	}
}
