package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/imageref"
)

// The kind cluster's registry (hack/kind.sh): pods pull from it as KRAY_KIND_REGISTRY, this host pushes to it at
// KRAY_KIND_REGISTRY_PUSH; hack/kind.sh has pushed the fake Ray to it as ray:<version>.

// manifestSchema2 is the media type of the manifests `docker push` writes.
const manifestSchema2 = "application/vnd.docker.distribution.manifest.v2+json"

// registryManifest is a Docker image manifest, schema 2.
type registryManifest struct {
	SchemaVersion int                  `json:"schemaVersion"`
	MediaType     string               `json:"mediaType"`
	Config        registryDescriptor   `json:"config"`
	Layers        []registryDescriptor `json:"layers"`
}

// registryDescriptor names a blob of an image.
type registryDescriptor struct {
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	Digest    string `json:"digest"`
}

// pushImageOfItsOwn pushes to the kind cluster's registry the image ray:<base> with one more layer, size random
// bytes in a file that no node has, as ray:<tag>, and returns the image's name as pods pull it: every pull of it
// transfers that layer, however many tests ran on the cluster before.
func pushImageOfItsOwn(t *testing.T, base, tag string, size int) string {
	t.Helper()
	push, pull := os.Getenv("KRAY_KIND_REGISTRY_PUSH"), os.Getenv("KRAY_KIND_REGISTRY")
	if push == "" || pull == "" {
		t.Fatal("KRAY_KIND_REGISTRY and KRAY_KIND_REGISTRY_PUSH name the kind cluster's registry (hack/kind-e2e.sh sets them)")
	}
	repo := "http://" + push + "/v2/ray"
	var m registryManifest
	registryGet(t, repo+"/manifests/"+base, manifestSchema2, &m)
	var config map[string]any
	registryGet(t, repo+"/blobs/"+m.Config.Digest, "", &config)

	// The layer: a tar of one file, gzipped as Docker's layers are; random bytes do not shrink.
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	name := "kray-e2e-" + tag
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(size), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(tarred.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	rootfs, _ := config["rootfs"].(map[string]any)
	diffIDs, _ := rootfs["diff_ids"].([]any)
	rootfs["diff_ids"] = append(diffIDs, sha256Digest(tarred.Bytes()))
	history, _ := config["history"].([]any)
	config["history"] = append(history, map[string]any{"created": time.Now().UTC().Format(time.RFC3339), "created_by": "kray e2e: " + name})
	configBytes, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	m.Layers = append(m.Layers, registryDescriptor{MediaType: "application/vnd.docker.image.rootfs.diff.tar.gzip",
		Size: int64(zipped.Len()), Digest: registryUpload(t, repo, zipped.Bytes())})
	m.Config.Size, m.Config.Digest = int64(len(configBytes)), registryUpload(t, repo, configBytes)
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	registryDo(t, http.MethodPut, repo+"/manifests/"+tag, manifestSchema2, body, http.StatusCreated)
	return pull + "/ray:" + tag
}

func sha256Digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// registryGet decodes the JSON the registry answers to a GET of u.
func registryGet(t *testing.T, u, accept string, into any) {
	t.Helper()
	body := registryDo(t, http.MethodGet, u, accept, nil, http.StatusOK)
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// registryUpload uploads blob to the repository at repo in one request and returns its digest.
func registryUpload(t *testing.T, repo string, blob []byte) string {
	t.Helper()
	digest := sha256Digest(blob)
	req, err := http.NewRequest(http.MethodPost, repo+"/blobs/uploads/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s/blobs/uploads/: %s", repo, resp.Status)
	}
	loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	registryDo(t, http.MethodPut, loc.String(), "application/octet-stream", blob, http.StatusCreated)
	return digest
}

// registryDo sends one request to the registry and returns the body of an answer with the status want.
func registryDo(t *testing.T, method, u, contentType string, body []byte, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", contentType)
	} else {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		short, _ := url.Parse(u)
		t.Fatalf("%s %s: %s: %s", method, short.Path, resp.Status, bytes.TrimSpace(out))
	}
	return out
}

// registryLimit lets one test at a time limit the registry.
var registryLimit sync.Mutex

// limitRegistry makes the kind cluster's registry send at most rate (tc's token bucket on its interface) until
// the test ends; a test that limits it meanwhile waits for that end.
func limitRegistry(t *testing.T, rate string) {
	t.Helper()
	registryLimit.Lock()
	t.Cleanup(registryLimit.Unlock)
	container, _, _ := strings.Cut(os.Getenv("KRAY_KIND_REGISTRY"), ":")
	tc := func(args ...string) {
		out, err := exec.Command("docker", append([]string{"exec", container, "tc", "qdisc"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tc qdisc %s in %s: %v: %s", strings.Join(args, " "), container, err, out)
		}
	}
	tc("replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kb", "latency", "1s")
	t.Cleanup(func() { tc("del", "dev", "eth0", "root") })
}

// A RayCluster of an image from a registry, written as users write it (no imagePullPolicy): the API server
// defaults the policy to IfNotPresent, the kubelets pull the image from the registry, and the cluster becomes
// ready; with kray.io/image-prepull then set, kruise-daemon pulls it on every node as well, through the same
// containerd.
// Then the workers' image changes, under RollingUpdate with workerDrain, to one the registry sends at 1 MB/s:
// kray's ImagePullJob pulls it onto the nodes, and the worker is drained and restarted in place only once it is
// on its node, so the kubelet finds it there.
func TestKindImagePulledFromTheRegistry(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	image := pushImageOfItsOwn(t, "2.46.0", "pull-"+ns, 8<<20)
	rc := kindRayCluster(ns, "pull", 1)
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 120)
	rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = image
	rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = image
	g.Expect(rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].ImagePullPolicy).To(BeEmpty())
	create(t, rc)
	waitKindReady(t, rc, 1)

	pods := clusterPods(g, rc)
	for _, p := range pods {
		g.Expect(p.Spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), "pod %s", p.Name)
		g.Expect(runsImage(&p, image)).To(BeTrue(), "pod %s", p.Name)
	}
	// Each node pulls once: a second pod on a node finds the image there.
	pulled := 0
	for _, p := range pods {
		for _, msg := range eventMessages(g, &p, "Pulled") {
			if strings.HasPrefix(msg, fmt.Sprintf("Successfully pulled image %q", image)) {
				pulled++
				t.Logf("%s: %s", p.Name, msg)
			}
		}
		g.Expect(eventMessages(g, &p, "Failed")).To(BeEmpty(), "pod %s", p.Name)
	}
	g.Expect(pulled).To(BeNumerically(">=", 1), "the kubelet pulled %s from the registry", image)

	update(t, rc, func(c *rayv1.RayCluster) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, constants.AnnotationImagePrepull, "true")
	})
	var nodes corev1.NodeList
	g.Expect(k8s.List(context.Background(), &nodes)).To(Succeed())
	owned := client.MatchingLabels{constants.LabelCluster: rc.Name}
	g.Eventually(func(g Gomega) {
		s := pullJobs(g, ns, owned)[image+" all nodes"].Status
		g.Expect(s.Failed).To(BeZero(), "failed pulls: %v", s.FailedNodes)
		g.Expect(s.Desired).To(Equal(int32(len(nodes.Items))))
		g.Expect(s.Succeeded).To(Equal(s.Desired), "kruise-daemon pulled %s on every node", image)
	}, kindTimeout, time.Second).Should(Succeed())

	next := pushImageOfItsOwn(t, "2.46.0", "next-"+ns, 8<<20)
	limitRegistry(t, "8mbit")
	worker := allWorkers(g, rc)[0]
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = next })
	g.Eventually(func(g Gomega) {
		w := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(&worker), w)).To(Succeed())
		g.Expect(w.UID).To(Equal(worker.UID), "updated in place")
		g.Expect(runsImage(w, next)).To(BeTrue())
		g.Expect(podReady(w)).To(BeTrue())
	}, kindTimeout, time.Second).Should(Succeed())
	var present, pulledAtRestart []string
	for _, msg := range eventMessages(g, &worker, "Pulled") {
		switch {
		case strings.Contains(msg, fmt.Sprintf("%q already present on machine", next)):
			present = append(present, msg)
		case strings.Contains(msg, fmt.Sprintf("pulled image %q", next)):
			pulledAtRestart = append(pulledAtRestart, msg)
		}
	}
	g.Expect(pulledAtRestart).To(BeEmpty(), "the kubelet pulled the new image at the restart")
	g.Expect(present).To(HaveLen(1), "the kubelet found the new image on the node")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(1))
	t.Logf("%s: %s", worker.Name, present[0])
}

// An image change under RollingUpdate with workerDrain, kray.io/image-prepull unset, on a busy cluster whose two
// workers run on both nodes, to an image the registry sends at 1 MB/s: kray pulls it onto both nodes with an
// ImagePullJob of the update's own while the group's CloneSet stays paused, so Kruise holds no worker (not
// ready, PreparingUpdate) before the worker's node reports the image pulled; each worker then drains, finishes
// its task, and restarts in place on an image already there. No task is killed.
func TestKindImageChangePullsBeforeAnyWorkerIsHeld(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	image := pushImageOfItsOwn(t, "2.46.0", "held-"+ns, 1<<20)
	rc := kindRayCluster(ns, "held", 2)
	rc.Spec.HeadGroupSpec.RayStartParams["num-cpus"] = "0"
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
	w := &rc.Spec.WorkerGroupSpecs[0]
	w.Template.Spec.Containers[0].Image = image
	w.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{constants.LabelCluster: rc.Name, constants.LabelGroup: w.GroupName}},
	}}
	create(t, rc)
	waitKindReady(t, rc, 2)
	workers := allWorkers(g, rc)
	nodeOf := map[string]string{}
	for _, p := range workers {
		nodeOf[p.Name] = p.Spec.NodeName
	}
	g.Expect(slices.Compact(slices.Sorted(maps.Values(nodeOf)))).To(HaveLen(2), "the workers run on both nodes")
	head := headPod(g, rc)
	rayTasks(t, head, "submit", "--count", "2", "--seconds", "20")
	g.Eventually(func() int { return rayTasks(t, head, "summary").Running }, time.Minute, time.Second).Should(Equal(2))

	next := pushImageOfItsOwn(t, "2.46.0", "heldnext-"+ns, 16<<20)
	name, tag, _ := imageref.NameTag(next)
	limitRegistry(t, "8mbit")
	pulled := watchPulls(t, name, tag)
	tl := watchTimeline(t, rc)
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = next })
	g.Eventually(func(g Gomega) {
		for _, p := range allWorkers(g, rc) {
			g.Expect(runsImage(&p, next) && podReady(&p)).To(BeTrue(), "pod %s runs the new image, ready", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())

	// When Kruise first held each worker, by its own record on the pod, against when its node reported the
	// image pulled.
	held := map[string]time.Time{}
	tl.replay(func(_ int, alive map[string]*corev1.Pod) {
		for _, p := range alive {
			if _, seen := held[p.Name]; !seen && p.Labels[constants.LabelKruiseLifecycleState] == constants.KruiseStatePreparingUpdate {
				at, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationKruiseLifecycleTimestamp])
				g.Expect(err).NotTo(HaveOccurred(), "pod %s's hold time", p.Name)
				held[p.Name] = at
			}
		}
	})
	g.Expect(held).To(HaveLen(2), "each worker held for its update")
	at := pulled()
	for pod, node := range nodeOf {
		g.Expect(at).To(HaveKey(node), "node %s reported %s pulled", node, next)
		g.Expect(held[pod]).NotTo(BeTemporally("<", at[node]), "pod %s held at %s, before its node %s had the image (%s)", pod, held[pod], node, at[node])
		t.Logf("%s: image on node %s at %s, held at %s", pod, node, at[node].Format(time.TimeOnly), held[pod].Format(time.TimeOnly))
	}
	for _, p := range workers {
		var pulledAtRestart []string
		for _, msg := range eventMessages(g, &p, "Pulled") {
			if strings.Contains(msg, fmt.Sprintf("pulled image %q", next)) {
				pulledAtRestart = append(pulledAtRestart, msg)
			}
		}
		g.Expect(pulledAtRestart).To(BeEmpty(), "pod %s: the kubelet pulled the new image at the restart", p.Name)
	}
	g.Expect(eventMessages(g, rc, raycluster.EventAwaitingImage)).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		c := rayTasks(t, head, "summary")
		g.Expect(c.Completed).To(Equal(2), "%+v", c)
		g.Expect(c.Killed).To(BeZero(), "%+v", c)
		g.Expect(c.LostSeconds).To(BeZero(), "%+v", c)
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(uids(allWorkers(g, rc))).To(Equal(uids(workers)), "updated in place")
}

// watchPulls records, from a watch of the NodeImages started now, when each node first reported name:tag
// pulled (its kruise-daemon's completion time).
func watchPulls(t *testing.T, name, tag string) func() map[string]time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, &kruisev1alpha1.NodeImageList{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); w.Stop() })
	var mu sync.Mutex
	at := map[string]time.Time{}
	go func() {
		for e := range w.ResultChan() {
			ni, ok := e.Object.(*kruisev1alpha1.NodeImage)
			if !ok {
				continue
			}
			for _, s := range ni.Status.ImageStatuses[name].Tags {
				mu.Lock()
				if _, seen := at[ni.Name]; !seen && s.Tag == tag && s.Phase == kruisev1alpha1.ImagePhaseSucceeded && s.CompletionTime != nil {
					at[ni.Name] = s.CompletionTime.Time
				}
				mu.Unlock()
			}
		}
	}()
	return func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(at)
	}
}
