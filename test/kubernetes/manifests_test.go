// Package kubernetes checks the manifests of examples/kubernetes: every
// object decodes strictly as the upstream type of its kind (k8s.io/api, the
// Prometheus Operator's PodMonitor), the ports and paths they name exist in
// turbo, the configuration they mount passes `turbo config check` with the
// Secret mounted as the pod would see it, and the numbers agree (grace
// period above shutdown_timeout, a swarm's memory limit above its nodes').
package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// imageUser is the image's USER (examples/container/Dockerfile).
const imageUser = 65532

// manifests is one file's objects, by kind.
type manifests struct {
	configMaps  map[string]corev1.ConfigMap
	secrets     map[string]corev1.Secret
	deployments []appsv1.Deployment
	pdbs        []policyv1.PodDisruptionBudget
	podMonitors []monitoringv1.PodMonitor
}

func TestManifests(t *testing.T) {
	files, err := filepath.Glob("../../examples/kubernetes/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples/kubernetes: %v files (%v), want run.yaml and swarm.yaml at least", files, err)
	}
	modes := map[string]bool{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			m := decodeFile(t, file)
			if len(m.deployments) != 1 || len(m.pdbs) != 1 || len(m.podMonitors) != 1 {
				t.Fatalf("%d deployments, %d disruption budgets, %d pod monitors; want one of each", len(m.deployments), len(m.pdbs), len(m.podMonitors))
			}
			d := m.deployments[0]
			modes[checkDeployment(t, m, d)] = true
			pods := labels.Set(d.Spec.Template.Labels)
			for what, sel := range map[string]map[string]string{
				"the Deployment's selector": d.Spec.Selector.MatchLabels,
				"the PodDisruptionBudget's": m.pdbs[0].Spec.Selector.MatchLabels,
				"the PodMonitor's":          m.podMonitors[0].Spec.Selector.MatchLabels,
			} {
				if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(pods) {
					t.Errorf("%s %v does not select the pods (labels %v)", what, sel, pods)
				}
			}
			container := d.Spec.Template.Spec.Containers[0]
			for _, ep := range m.podMonitors[0].Spec.PodMetricsEndpoints {
				if ep.Port == nil || portNamed(container, *ep.Port) == nil {
					t.Errorf("the PodMonitor scrapes port %v, which the container does not name", ep.Port)
				}
				if ep.Path != "/metrics" {
					t.Errorf("the PodMonitor scrapes %q, turbo serves /metrics", ep.Path)
				}
			}
		})
	}
	if !modes["run"] || !modes["swarm"] {
		t.Fatalf("deployments for %v, want turbo run and turbo swarm", modes)
	}
}

// decodeFile decodes every document of file strictly into its kind's type.
func decodeFile(t *testing.T, file string) manifests {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{configMaps: map[string]corev1.ConfigMap{}, secrets: map[string]corev1.Secret{}}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for i := 0; ; i++ {
		var doc map[string]any // anchors resolved
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		kind := fmt.Sprintf("%v %v", doc["apiVersion"], doc["kind"])
		switch kind {
		case "v1 ConfigMap":
			var o corev1.ConfigMap
			strict(t, kind, js, &o)
			m.configMaps[o.Name] = o
		case "v1 Secret":
			var o corev1.Secret
			strict(t, kind, js, &o)
			m.secrets[o.Name] = o
		case "apps/v1 Deployment":
			var o appsv1.Deployment
			strict(t, kind, js, &o)
			m.deployments = append(m.deployments, o)
		case "policy/v1 PodDisruptionBudget":
			var o policyv1.PodDisruptionBudget
			strict(t, kind, js, &o)
			m.pdbs = append(m.pdbs, o)
		case "monitoring.coreos.com/v1 PodMonitor":
			var o monitoringv1.PodMonitor
			strict(t, kind, js, &o)
			m.podMonitors = append(m.podMonitors, o)
		default:
			t.Fatalf("document %d is a %s, which this test does not know", i, kind)
		}
	}
	return m
}

// strict decodes js into v, refusing a field the type does not have.
func strict(t *testing.T, kind string, js []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s does not decode as one: %v", kind, err)
	}
}

func portNamed(c corev1.Container, name string) *corev1.ContainerPort {
	for i, p := range c.Ports {
		if p.Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

// checkDeployment checks the pod against turbo and the configuration it
// mounts, and returns its mode (run or swarm).
func checkDeployment(t *testing.T, m manifests, d appsv1.Deployment) string {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want turbo's", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) < 3 || !slices.Contains([]string{"run", "swarm"}, c.Args[0]) {
		t.Fatalf("args %v: want run or swarm --config FILE", c.Args)
	}
	mode := c.Args[0]
	cfgPath := flagValue(t, c.Args, "--config")

	// The pod's files: every ConfigMap and Secret volume, where it mounts.
	root := t.TempDir()
	for _, vm := range c.VolumeMounts {
		vol := volumeNamed(t, spec, vm.Name)
		dir := filepath.Join(root, vm.MountPath)
		switch {
		case vol.ConfigMap != nil:
			cm, ok := m.configMaps[vol.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s names ConfigMap %s, which the file does not define", vm.Name, vol.ConfigMap.Name)
			}
			writeFiles(t, dir, cm.Data)
		case vol.Secret != nil:
			s, ok := m.secrets[vol.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s names Secret %s, which the file does not define", vm.Name, vol.Secret.SecretName)
			}
			writeFiles(t, dir, s.StringData)
		case vol.EmptyDir != nil:
			writeFiles(t, dir, nil)
		default:
			t.Fatalf("volume %s: only ConfigMap, Secret and emptyDir volumes are expected", vm.Name)
		}
	}
	// The mounted configuration, with the pod's paths rooted in the test's
	// directory, passes `turbo config check`.
	body, err := os.ReadFile(filepath.Join(root, cfgPath))
	if err != nil {
		t.Fatalf("--config %s is not in a mounted volume: %v", cfgPath, err)
	}
	var pairs []string // one pass: a rewritten path is not rewritten again
	for _, vm := range c.VolumeMounts {
		pairs = append(pairs, vm.MountPath+"/", filepath.Join(root, vm.MountPath)+"/")
	}
	local := strings.NewReplacer(pairs...).Replace(string(body))
	localPath := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(localPath, []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}
	check := exec.Command(testkit.Binary(t), "config", "check", "--config", localPath)
	check.Env = testkit.ChildEnv()
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("turbo config check of the mounted %s: %v\n%s", cfgPath, err, out)
	}
	cfg, err := config.Load(localPath, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Ports and paths: http.listen is the container's port, and the probes
	// ask for paths turbo serves.
	_, port, _ := strings.Cut(cfg.HTTP.Listen, ":")
	if strings.HasPrefix(cfg.HTTP.Listen, "127.") || strings.HasPrefix(cfg.HTTP.Listen, "localhost") {
		t.Errorf("http.listen %s: the kubelet cannot reach a loopback address", cfg.HTTP.Listen)
	}
	for what, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", what)
			continue
		}
		p := portNamed(c, probe.HTTPGet.Port.String())
		if p == nil || strconv.Itoa(int(p.ContainerPort)) != port {
			t.Errorf("the %s probe's port %s is not http.listen's %s", what, probe.HTTPGet.Port.String(), port)
		}
		if want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[what]; probe.HTTPGet.Path != want {
			t.Errorf("the %s probe asks for %s, want %s", what, probe.HTTPGet.Path, want)
		}
		assertServed(t, probe.HTTPGet.Path)
	}
	assertServed(t, "/metrics")

	// Numbers that must agree.
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds (%s) is not above shutdown_timeout %s: the kubelet would kill the drain", grace(g), cfg.ShutdownTimeout)
	}
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != imageUser {
		t.Errorf("the pod must run as non-root user %d, the image's", imageUser)
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if limit.IsZero() {
		t.Error("no memory limit")
	}
	if mode == "swarm" {
		// Every node at its limit, and the supervisor (about 30 MiB).
		need := resource.NewQuantity(int64(cfg.Swarm.Nodes)*int64(cfg.Swarm.MemoryLimit)+128<<20, resource.BinarySI)
		if cfg.Swarm.MemoryLimit == 0 || limit.Cmp(*need) < 0 {
			t.Errorf("memory limit %s below %d nodes × swarm.memory_limit %s + 128Mi = %s: the kernel would kill the pod before the supervisor restarts a node",
				limit.String(), cfg.Swarm.Nodes, cfg.Swarm.MemoryLimit, need.String())
		}
		if c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem &&
			!slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == "/tmp" && !vm.ReadOnly }) {
			t.Error("a read-only root file system without a writable /tmp: the supervisor's health socket has nowhere to go")
		}
	}
	return mode
}

func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %v have no %s", args, name)
	}
	return args[i+1]
}

func volumeNamed(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("volume mount %s names no volume", name)
	return corev1.Volume{}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// assertServed fails unless turbo's HTTP handler answers path with
// something other than 404.
func assertServed(t *testing.T, path string) {
	t.Helper()
	h := web.Handler(prometheus.NewRegistry(), source{}, zerolog.Nop())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusNotFound {
		t.Errorf("turbo does not serve %s (404)", path)
	}
}

// source is a healthy, ready process with nothing running.
type source struct{}

func (source) Live() web.Check    { return web.Check{OK: true} }
func (source) Ready() web.Check   { return web.Check{OK: true} }
func (source) Status() web.Status { return web.Status{Mode: web.ModeRun} }

func grace(g *int64) string {
	if g == nil {
		return "unset: 30s"
	}
	return strconv.FormatInt(*g, 10) + "s"
}
