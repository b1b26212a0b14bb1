// Command benchpeer: the benchmark's Go peers of `webhook serve`, stdlib only.
//
// -mode webhook is a minimal Go admission webhook: it applies the same edge checks as ours
// (JSON content type, 7 MiB body cap, 400 for a body that is not JSON), decodes the whole
// AdmissionReview into generic maps (as orjson.loads does), and rewrites GPU-memory limits
// (the resources in -profiles, e.g. aliyun.com/gpu-mem: 2) to nvidia.com/gpu: 1 on the
// smallest profile that holds that much, answering the same JSON Patch, warning and audit
// annotations as lwgpu for the seed pod. It is not lwgpu's decision (no policies per
// namespace, requests, annotations, affinity or denials): it is what a small hand-written Go
// webhook does for that pod, the bar "half a Go webhook's throughput" is measured against.
//
// -mode fixed answers every request with the same 200 JSON: the TLS + HTTP bound of the
// machine, with no JSON work at all.
//
// Both serve TLS 1.2+ with keep-alive on 127.0.0.1 and answer GET /healthz, over HTTP/1.1
// only unless -http2: kube-apiserver calls a webhook behind a Service with HTTP/1.1
// (k8s.io/apiserver pkg/util/webhook/client.go, HookClient: NextProtos http/1.1, issue 75791)
// and offers HTTP/2 only to a URL on loopback, which a webhook in a cluster never has. lwgpu
// (gunicorn) speaks HTTP/1.1 whatever the client offers.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const maxBody = 7 << 20 // lwgpu's MAX_BODY_BYTES

// profile is one class as the bench exports it from the policy lwgpu serves.
type profile struct {
	Name         string            `json:"name"`
	MemoryMiB    int64             `json:"memoryMiB"`
	NodeSelector map[string]string `json:"nodeSelector"`
	Selector     string            `json:"selectorText"`
}

// config is the -profiles file: classes in ascending memory, bytes per unit of each resource,
// and the policy's name (for the audit annotations).
type config struct {
	Profiles  []profile        `json:"profiles"`
	Resources map[string]int64 `json:"resources"`
	Policy    string           `json:"policy"`
}

type op struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	Value interface{} `json:"value,omitempty"`
}

func pointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

func status(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]interface{}{
		"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "message": message,
	})
	w.Write(body)
}

// units reads a plain integer quantity (2 or "2"), as the seed pod spells it.
func units(value interface{}) (int64, bool) {
	switch v := value.(type) {
	case float64:
		return int64(v), v == float64(int64(v))
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// rewrite returns the patch, warnings and audit annotations for one pod.
func (c *config) rewrite(pod map[string]interface{}) ([]op, []string, map[string]string) {
	var ops []op
	var warnings []string
	spec, _ := pod["spec"].(map[string]interface{})
	containers, _ := spec["containers"].([]interface{})
	var chosen *profile
	var asked string
	for i, raw := range containers {
		container, _ := raw.(map[string]interface{})
		resources, _ := container["resources"].(map[string]interface{})
		limits, _ := resources["limits"].(map[string]interface{})
		requests, _ := resources["requests"].(map[string]interface{})
		for name, unit := range c.Resources {
			n, ok := units(limits[name])
			if !ok {
				continue
			}
			mib := n * unit >> 20
			for p := range c.Profiles {
				if c.Profiles[p].MemoryMiB >= mib {
					chosen = &c.Profiles[p]
					break
				}
			}
			if chosen == nil {
				continue
			}
			// The apiserver defaults requests to limits for extended resources: the pod it
			// sends asks in both, and both are rewritten (removals first, as lwgpu orders them).
			base := fmt.Sprintf("/spec/containers/%d/resources/", i)
			kinds := []string{"limits"}
			if _, has := requests[name]; has {
				kinds = append(kinds, "requests")
			}
			for _, kind := range kinds {
				ops = append(ops, op{Op: "remove", Path: base + kind + "/" + pointer(name)})
			}
			for _, kind := range kinds {
				ops = append(ops, op{Op: "add", Path: base + kind + "/" + pointer("nvidia.com/gpu"), Value: "1"})
			}
			asked = fmt.Sprintf("%s=%v", name, limits[name])
			warnings = append(warnings, fmt.Sprintf("lwgpu: %s (%dMi) -> nvidia.com/gpu=1 on %s (%s)",
				asked, mib, chosen.Name, chosen.Selector))
		}
	}
	if chosen == nil {
		return nil, nil, nil
	}
	if _, has := spec["nodeSelector"]; has {
		for k, v := range chosen.NodeSelector {
			ops = append(ops, op{Op: "add", Path: "/spec/nodeSelector/" + pointer(k), Value: v})
		}
	} else {
		ops = append(ops, op{Op: "add", Path: "/spec/nodeSelector", Value: chosen.NodeSelector})
	}
	notes := map[string]string{"lwgpu.io/profile": chosen.Name, "lwgpu.io/rewritten-from": asked}
	metadata, _ := pod["metadata"].(map[string]interface{})
	if _, has := metadata["annotations"]; has {
		for k, v := range notes {
			ops = append(ops, op{Op: "add", Path: "/metadata/annotations/" + pointer(k), Value: v})
		}
	} else {
		ops = append(ops, op{Op: "add", Path: "/metadata/annotations", Value: notes})
	}
	audit := map[string]string{
		"decision": "mutated", "class": chosen.Name, "policy": c.Policy, "asked": asked,
	}
	return ops, warnings, audit
}

func (c *config) review(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		status(w, http.StatusMethodNotAllowed, r.Method+" is not allowed")
		return
	}
	if kind, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); kind != "application/json" {
		status(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	if r.ContentLength > maxBody {
		status(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	var review map[string]interface{}
	if err := json.Unmarshal(data, &review); err != nil {
		status(w, http.StatusBadRequest, "request body is not valid JSON: "+err.Error())
		return
	}
	request, _ := review["request"].(map[string]interface{})
	uid, _ := request["uid"].(string)
	if uid == "" {
		status(w, http.StatusBadRequest, "request.uid is missing")
		return
	}
	answer := map[string]interface{}{"uid": uid, "allowed": true}
	if pod, ok := request["object"].(map[string]interface{}); ok {
		if ops, warnings, audit := c.rewrite(pod); ops != nil {
			patch, _ := json.Marshal(ops)
			answer["patchType"] = "JSONPatch"
			answer["patch"] = patch // []byte marshals as base64, as the API wants
			answer["warnings"] = warnings
			answer["auditAnnotations"] = audit
		}
	}
	body, _ := json.Marshal(map[string]interface{}{
		"apiVersion": review["apiVersion"], "kind": review["kind"], "response": answer,
	})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func main() {
	mode := flag.String("mode", "webhook", "webhook or fixed")
	port := flag.Int("port", 8443, "TCP port on 127.0.0.1")
	cert := flag.String("tls-cert", "", "PEM certificate")
	key := flag.String("tls-key", "", "PEM private key")
	profiles := flag.String("profiles", "", "JSON file of profiles and resources (webhook mode)")
	http2 := flag.Bool("http2", false, "offer HTTP/2 over ALPN as well as HTTP/1.1")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	})
	switch *mode {
	case "webhook":
		var c config
		data, err := os.ReadFile(*profiles)
		if err == nil {
			err = json.Unmarshal(data, &c)
		}
		if err != nil {
			log.Fatalf("cannot read -profiles %q: %v", *profiles, err)
		}
		mux.HandleFunc("/mutate", c.review)
		mux.HandleFunc("/validate", c.review)
	case "fixed":
		fixed := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}`)
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(fixed)
		})
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
	server := &http.Server{
		Addr:        fmt.Sprintf("127.0.0.1:%d", *port),
		Handler:     mux,
		IdleTimeout: 120 * time.Second, // lwgpu's KEEPALIVE_SECONDS
	}
	if !*http2 {
		// A non-nil, empty map is net/http's documented way to switch HTTP/2 off.
		server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
