package manifestcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// gatewayTier is deploy/kubernetes/gateway.yaml's objects.
type gatewayTier struct {
	sts    *appsv1.StatefulSet
	svc    *corev1.Service
	config *corev1.ConfigMap
}

func readGatewayTier(t *testing.T) gatewayTier {
	t.Helper()
	var g gatewayTier
	for _, o := range decodeFile(t, "../kubernetes/gateway.yaml") {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			g.sts = o
		case *corev1.Service:
			g.svc = o
		case *corev1.ConfigMap:
			g.config = o
		}
	}
	if g.sts == nil || g.svc == nil || g.config == nil {
		t.Fatalf("gateway.yaml: want a StatefulSet, a Service and a ConfigMap, got %+v", g)
	}
	return g
}

// helmValues is what the checks read of deploy/helm/gateway-values.yaml,
// typed as the chart passes it into the pod.
type helmValues struct {
	ExtraEnvs                     []corev1.EnvVar             `json:"extraEnvs"`
	ExtraVolumeMounts             []corev1.VolumeMount        `json:"extraVolumeMounts"`
	TerminationGracePeriodSeconds int64                       `json:"terminationGracePeriodSeconds"`
	Resources                     corev1.ResourceRequirements `json:"resources"`
	Statefulset                   struct {
		VolumeClaimTemplates                 []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates"`
		PersistentVolumeClaimRetentionPolicy struct {
			Enabled    bool   `json:"enabled"`
			WhenScaled string `json:"whenScaled"`
		} `json:"persistentVolumeClaimRetentionPolicy"`
	} `json:"statefulset"`
	Service struct {
		ClusterIP string `json:"clusterIP"`
	} `json:"service"`
	Config map[string]any `json:"config"`
}

func readHelmValues(t *testing.T) helmValues {
	t.Helper()
	var v helmValues
	if err := yaml.Unmarshal(mustRead(t, "../helm/gateway-values.yaml"), &v); err != nil {
		t.Fatalf("helm/gateway-values.yaml: %v", err)
	}
	return v
}

// TestHelmValuesKeepTheGatewayPromises holds the Helm values to what
// gateway.yaml and the Operator resource are held to, and to a headless
// Service and retained claims.
func TestHelmValuesKeepTheGatewayPromises(t *testing.T) {
	v := readHelmValues(t)
	raw, err := yaml.Marshal(dropNulls(v.Config))
	if err != nil {
		t.Fatal(err)
	}
	checkGateway(t, "helm/gateway-values.yaml", parseGatewayConfig(t, "helm", raw), v.TerminationGracePeriodSeconds,
		v.ExtraEnvs, v.ExtraVolumeMounts, v.Statefulset.VolumeClaimTemplates, nil)
	if p := v.Statefulset.PersistentVolumeClaimRetentionPolicy; !p.Enabled || p.WhenScaled != "Retain" {
		t.Errorf("helm/gateway-values.yaml: claim retention %+v, want enabled with whenScaled Retain", p)
	}
	if v.Service.ClusterIP != "None" {
		t.Errorf("helm/gateway-values.yaml: service.clusterIP %q, want None (headless, for the agents' resolver)", v.Service.ClusterIP)
	}
}

// TestGatewayServiceIsHeadlessForTheAgents: the loadbalancing exporter's
// k8s resolver must see each gateway pod, so the Service is headless,
// selects the StatefulSet's pods, is its serviceName, and is the one the
// agents resolve, on the port the gateways receive OTLP on.
func TestGatewayServiceIsHeadlessForTheAgents(t *testing.T) {
	g := readGatewayTier(t)
	if g.svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q, want None", g.svc.Name, g.svc.Spec.ClusterIP)
	}
	if g.sts.Spec.ServiceName != g.svc.Name {
		t.Errorf("StatefulSet serviceName %q, the Service is %q", g.sts.Spec.ServiceName, g.svc.Name)
	}
	labels := g.sts.Spec.Template.Labels
	for k, val := range g.svc.Spec.Selector {
		if labels[k] != val {
			t.Errorf("Service selector %s=%s does not select the gateway pods (labels %v)", k, val, labels)
		}
	}
	want := fmt.Sprintf("%s.%s", g.svc.Name, g.svc.Namespace)
	var ports []int32
	for _, p := range g.svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	resolvers := 0
	for _, o := range decodeFile(t, "../kubernetes/agent.yaml") {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		var agent struct {
			Exporters map[string]struct {
				Resolver struct {
					K8s *struct {
						Service string  `json:"service"`
						Ports   []int32 `json:"ports"`
					} `json:"k8s"`
				} `json:"resolver"`
			} `json:"exporters"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &agent); err != nil {
			t.Fatal(err)
		}
		for name, e := range agent.Exporters {
			if !strings.HasPrefix(name, "loadbalancing") || e.Resolver.K8s == nil {
				continue
			}
			resolvers++
			if e.Resolver.K8s.Service != want {
				t.Errorf("agent %s resolves %q, the gateways' Service is %q", name, e.Resolver.K8s.Service, want)
			}
			for _, p := range e.Resolver.K8s.Ports {
				if !slices.Contains(ports, p) {
					t.Errorf("agent %s sends to port %d, the Service has %v", name, p, ports)
				}
			}
		}
	}
	if resolvers == 0 {
		t.Error("agent.yaml: no loadbalancing exporter with the k8s resolver")
	}
}

// TestDrainJobSalvagesTheRetainedClaim: the drain Job mounts the claim the
// StatefulSet retained for pod otelcol-gateway-2 where the gateways mount
// theirs, reads the gateways' ConfigMap, runs the image's questdb-slot
// salvage on that pod's slot and deletes it only after a complete delivery.
func TestDrainJobSalvagesTheRetainedClaim(t *testing.T) {
	g := readGatewayTier(t)
	var job *batchv1.Job
	for _, o := range decodeFile(t, "../kubernetes/drain-job.yaml") {
		job, _ = o.(*batchv1.Job)
	}
	if job == nil {
		t.Fatal("drain-job.yaml has no Job")
	}
	pod := job.Spec.Template.Spec
	gw := g.sts.Spec.Template.Spec.Containers[0]
	c := pod.Containers[0]
	podName := g.sts.Name + "-2"
	claim := g.sts.Spec.VolumeClaimTemplates[0].Name + "-" + podName
	sfDir := parseGatewayConfig(t, "gateway.yaml", []byte(g.config.Data["config.yaml"])).Exporters.QuestDB.SFDir

	mounted := map[string]string{} // volume name -> mount path
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = m.MountPath
	}
	var claimAt, configAt string
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim:
			claimAt = mounted[v.Name]
		case v.ConfigMap != nil && v.ConfigMap.Name == g.config.Name:
			configAt = mounted[v.Name]
		}
	}
	if claimAt != sfDir {
		t.Errorf("the Job mounts claim %s at %q, want sf_dir %q", claim, claimAt, sfDir)
	}
	if configAt == "" {
		t.Errorf("the Job does not mount the gateways' ConfigMap %s", g.config.Name)
	}
	if c.Image != gw.Image {
		t.Errorf("the Job runs %s, the gateways %s: its questdb-slot must read their slot format", c.Image, gw.Image)
	}
	want := []string{"salvage", sfDir + "/" + podName, "--config", configAt + "/config.yaml", "--delete"}
	if !slices.Equal(c.Command, []string{"/usr/local/bin/questdb-slot"}) || !slices.Equal(c.Args, want) {
		t.Errorf("the Job runs %q %q, want questdb-slot %q", c.Command, c.Args, want)
	}
	for _, e := range c.Env {
		if e.Name == "POD_NAME" && e.Value != podName {
			t.Errorf("the Job's POD_NAME %q (the config's sender_id), the slot is %s's", e.Value, podName)
		}
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != *g.sts.Spec.Template.Spec.SecurityContext.RunAsUser {
		t.Error("the Job does not run as the gateways' user: it could not write (and delete) their slot")
	}
}

// TestGatewayResourcesAgree: the three ways to install the gateway tier ask
// for the same resources (sized in gateway.yaml's header from BENCHMARKS.md),
// with a memory limit and a memory_limiter that refuses data before it.
func TestGatewayResourcesAgree(t *testing.T) {
	g := readGatewayTier(t)
	want := g.sts.Spec.Template.Spec.Containers[0].Resources
	if want.Requests.Cpu().IsZero() || want.Requests.Memory().IsZero() || want.Limits.Memory().IsZero() {
		t.Fatalf("gateway.yaml: resources %+v, want CPU and memory requests and a memory limit", want)
	}
	if want.Limits.Memory().Cmp(*want.Requests.Memory()) <= 0 {
		t.Errorf("gateway.yaml: memory limit %s not above the request %s", want.Limits.Memory(), want.Requests.Memory())
	}
	var op *OpenTelemetryCollector
	for _, o := range decodeFile(t, "../operator/gateway.yaml") {
		op, _ = o.(*OpenTelemetryCollector)
	}
	for where, r := range map[string]corev1.ResourceRequirements{
		"operator/gateway.yaml": op.Spec.Resources, "helm/gateway-values.yaml": readHelmValues(t).Resources,
	} {
		if !equality.Semantic.DeepEqual(r, want) {
			t.Errorf("%s: resources %s, gateway.yaml has %s", where, describe(r), describe(want))
		}
	}
	for _, c := range collectorConfigs(t) {
		if !strings.Contains(string(c.raw), "questdb:") || strings.Contains(c.where, "image/") || strings.Contains(c.where, "fleet/") {
			continue // the image's default and the fleet test run without a memory limit
		}
		var cfg struct {
			Processors map[string]struct {
				LimitPercentage int `json:"limit_percentage"`
			} `json:"processors"`
		}
		if err := yaml.Unmarshal(c.raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if p := cfg.Processors["memory_limiter"].LimitPercentage; p <= 0 || p >= 100 {
			t.Errorf("%s: memory_limiter limit_percentage %d, want one below the container's limit", c.where, p)
		}
	}
}

func describe(r corev1.ResourceRequirements) string {
	return fmt.Sprintf("requests cpu %s memory %s, limits cpu %s memory %s",
		r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Cpu(), r.Limits.Memory())
}

// TestDrainJobEditsAreCounted: the README and the Job's own header tell an
// operator how many "otelcol-gateway-2" to replace for another ordinal; that
// is every one in the Job, so none is left pointing at the old pod.
func TestDrainJobEditsAreCounted(t *testing.T) {
	raw := mustRead(t, "../kubernetes/drain-job.yaml")
	podName := readGatewayTier(t).sts.Name + "-2"
	in := strings.Count(string(stripComments(raw)), podName)
	words := map[string]int{"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
	for where, text := range map[string]string{"README.md": string(mustRead(t, "../../README.md")), "drain-job.yaml": string(raw)} {
		m := regexp.MustCompile("(?:edit|replace) the (\\w+) [`\"]" + regexp.QuoteMeta(podName) + "[`\"]").FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s no longer says how many %q to replace", where, podName)
			continue
		}
		if words[m[1]] != in {
			t.Errorf("%s says to replace %s %q; the Job holds %d", where, m[1], podName, in)
		}
	}
}
