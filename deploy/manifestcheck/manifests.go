// Package manifestcheck checks the deployment files under deploy/: every
// Kubernetes manifest decodes strictly (an unknown or duplicated field is an
// error) into the k8s.io/api type its apiVersion and kind name, and every
// collector configuration in them passes the built collector's `validate`.
// It is a module of its own so that the exporter's go.mod stays free of the
// Kubernetes API types.
package manifestcheck

import (
	"bytes"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// OpenTelemetryCollector mirrors the fields of the OpenTelemetry Operator's
// opentelemetry.io/v1beta1 resource that deploy/operator uses, with the
// Kubernetes types the Operator embeds, so that they decode strictly without
// the Operator's module. A field it does not list is refused: add it here
// only after checking the Operator's CRD.
type OpenTelemetryCollector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Mode                                 string                                                  `json:"mode"`
		Replicas                             *int32                                                  `json:"replicas,omitempty"`
		Image                                string                                                  `json:"image,omitempty"`
		Args                                 map[string]string                                       `json:"args,omitempty"`
		Env                                  []corev1.EnvVar                                         `json:"env,omitempty"`
		TerminationGracePeriodSeconds        *int64                                                  `json:"terminationGracePeriodSeconds,omitempty"`
		PersistentVolumeClaimRetentionPolicy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`
		VolumeClaimTemplates                 []corev1.PersistentVolumeClaim                          `json:"volumeClaimTemplates,omitempty"`
		VolumeMounts                         []corev1.VolumeMount                                    `json:"volumeMounts,omitempty"`
		PodSecurityContext                   *corev1.PodSecurityContext                              `json:"podSecurityContext,omitempty"`
		Resources                            corev1.ResourceRequirements                             `json:"resources,omitempty"`
		LivenessProbe                        *OperatorProbe                                          `json:"livenessProbe,omitempty"`
		ReadinessProbe                       *OperatorProbe                                          `json:"readinessProbe,omitempty"`
		// Config is the collector configuration, checked by validate.
		Config map[string]any `json:"config"`
	} `json:"spec"`
}

// OperatorProbe is the Operator's probe settings: it points them at the
// health_check extension itself.
type OperatorProbe struct {
	InitialDelaySeconds *int32 `json:"initialDelaySeconds,omitempty"`
	PeriodSeconds       *int32 `json:"periodSeconds,omitempty"`
	TimeoutSeconds      *int32 `json:"timeoutSeconds,omitempty"`
	FailureThreshold    *int32 `json:"failureThreshold,omitempty"`
	SuccessThreshold    *int32 `json:"successThreshold,omitempty"`
}

// kinds maps "apiVersion kind" to a constructor of its API type.
var kinds = map[string]func() any{
	"v1 ConfigMap":                                    func() any { return &corev1.ConfigMap{} },
	"v1 Service":                                      func() any { return &corev1.Service{} },
	"v1 ServiceAccount":                               func() any { return &corev1.ServiceAccount{} },
	"apps/v1 StatefulSet":                             func() any { return &appsv1.StatefulSet{} },
	"apps/v1 DaemonSet":                               func() any { return &appsv1.DaemonSet{} },
	"batch/v1 Job":                                    func() any { return &batchv1.Job{} },
	"rbac.authorization.k8s.io/v1 Role":               func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1 RoleBinding":        func() any { return &rbacv1.RoleBinding{} },
	"opentelemetry.io/v1beta1 OpenTelemetryCollector": func() any { return &OpenTelemetryCollector{} },
}

// Decode splits a multi-document YAML file and decodes each document
// strictly into its API type.
func Decode(data []byte) ([]any, error) {
	var objs []any
	for i, doc := range splitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("document %d: apiVersion %q kind %q: no type known to manifestcheck", i, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// splitDocuments returns the non-empty documents of a YAML stream.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(d []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(d), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}
