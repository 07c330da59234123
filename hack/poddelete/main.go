// Command poddelete removes the local cluster's deleted pods from kwok's nodes as a kubelet does: by UID,
// with grace period 0 (test/poddelete). hack/cluster.sh runs it beside kwok, whose stages leave deletion to it.
//
// Usage: poddelete --kubeconfig=FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kray-project/kray/test/poddelete"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig of the cluster whose kwok nodes' pods to remove")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "poddelete:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// A burst of deletions (a 1,000-pod cluster deleted at once) is never held back by client-side limits.
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return poddelete.Run(ctx, cs)
}
