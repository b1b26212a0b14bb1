// Command kubelet-atomic-writer updates a volume directory with kubelet's own AtomicWriter
// (k8s.io/kubernetes/pkg/volume/util, AtomicWriter.Write), the code kubelet runs when a
// mounted Secret or ConfigMap changes: a new hidden ..<timestamp> directory, the ..data
// symlink swapped in one rename, user-visible names linked through it. lwgpu's tests and the
// cluster's kubelet stand-in (tools/cluster/kubelet.py) use it instead of an imitation.
//
// Usage: kubelet-atomic-writer TARGET_DIR < PAYLOAD
// where PAYLOAD is JSON {"file name": {"Data": "<base64>", "Mode": 420}, ...}, the JSON form
// of map[string]util.FileProjection.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kubernetes/pkg/volume/util"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-atomic-writer TARGET_DIR < PAYLOAD.json")
		os.Exit(2)
	}
	var payload map[string]util.FileProjection
	if err := json.NewDecoder(os.Stdin).Decode(&payload); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-atomic-writer: payload: %v\n", err)
		os.Exit(2)
	}
	writer, err := util.NewAtomicWriter(os.Args[1], "lwgpu-test")
	if err == nil {
		err = writer.Write(payload, nil)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-atomic-writer: %v\n", err)
		os.Exit(1)
	}
}
