// Command fakeray is the `ray` of the kind e2e suite's Ray image: the commands kray's pods run, answered as Ray
// answers them, without Ray.
//
//	ray start --head [--port=6379] [--dashboard-port=8265] [--dashboard-agent-listen-port=52365] [--node-manager-port=6380] [--block]
//	ray start --address=HOST:PORT [--dashboard-agent-listen-port=52365] [--node-manager-port=6380] [--block]
//	ray health-check --address HOST:PORT
//	ray job submit --address URL [--submission-id ID] [--no-wait] [options] -- ENTRYPOINT...
//	ray job status --address URL ID
//	ray job logs --address URL [--follow] ID
//	ray list nodes [--address HOST:PORT]
//	ray tasks submit --count N --seconds S [--address URL]
//	ray tasks summary [--address URL]
//	ray stop
//	ray kuberay-autoscaler --cluster-name NAME --cluster-namespace NS
//
// `ray start --head` serves the GCS port (gRPC: the health check, the node table raylets register in, and the
// autoscaler state service kray calls to list and drain nodes), the dashboard (GET /api/gcs_healthz, the Job
// API under /api/jobs/) and the dashboard agent's /api/local_raylet_healthz and /api/healthz. Every node's
// `ray start` runs a raylet that registers with the GCS under a new node ID (the head's too), and a worker's
// first waits for its head's GCS. Tasks of a set length (`ray tasks submit`) take one CPU each of a node that
// is not draining (`--num-cpus`), a task whose node dies is killed and runs again while it has retries, and the
// head counts tasks completed, killed and task-seconds lost (`ray tasks summary`). As in Ray: a node kray
// drains is DRAINING and takes no task, its raylet exits once idle (at once, or when its last task ends) with
// status 0, which `ray start --block` expects, so the container runs on with no raylet and its agent's raylet
// health fails; the GCS lists the node DEAD after the live ones, and a container
// restarted later registers a new node under the same pod name. A raylet whose GCS does not answer for
// RAY_gcs_rpc_server_reconnect_timeout_s (60) exits with 1, and `ray start` with it. The head's dashboard also
// serves Serve's REST API, and every node a Serve proxy that answers its health check only where Serve runs
// replicas (serve.go). With RAY_REDIS_ADDRESS (GCS fault tolerance) the head's GCS keeps its cluster ID and live
// nodes in that Redis and starts again from them, so the raylets of the GCS before reconnect (redis.go); the
// binary run as `python -c` is Ray's cleanup_redis_storage of KubeRay's Redis cleanup Job. Both block until SIGTERM, with
// --block or without (a container whose command returns would restart), and end as a process the signal
// killed. A job's entrypoint really runs,
// with /bin/sh -c in the head container, and its status and logs are what it did. `ray kuberay-autoscaler`, the
// autoscaler sidecar's command, runs until SIGTERM and decides nothing, so autoscaling clusters become ready.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if filepath.Base(os.Args[0]) == "python" {
		os.Exit(python(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: ray start|health-check|job|stop ...")
		return 2
	}
	if err := checkTLS(); err != nil {
		fmt.Fprintln(os.Stderr, "ray:", err)
		return 1
	}
	switch args[0] {
	case "start":
		return start(parseFlags(args[1:]))
	case "health-check":
		return healthCheck(parseFlags(args[1:]))
	case "job":
		if len(args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: ray job submit|status|logs ...")
			return 2
		}
		return jobCommand(args[1], args[2:])
	case "list":
		if len(args) < 2 || args[1] != "nodes" {
			fmt.Fprintln(os.Stderr, "usage: ray list nodes [--address HOST:PORT]")
			return 2
		}
		return listNodes(parseFlags(args[2:]))
	case "tasks":
		if len(args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: ray tasks submit|summary ...")
			return 2
		}
		return tasksCommand(args[1], args[2:])
	case "stop":
		return 0
	case "kuberay-autoscaler":
		return idle()
	case "--version", "version":
		fmt.Println("ray, version fake (kray kind e2e)")
		return 0
	}
	fmt.Fprintf(os.Stderr, "ray: unknown command %q\n", args[0])
	return 2
}

// flags are the parsed options of a command: --key=value, --key value for keys that take one, and bare
// --switches (value "true"); positional arguments and everything after "--" are kept in order.
type flags struct {
	values     map[string]string
	positional []string
	rest       []string
}

// switches are the options that take no value.
var switches = map[string]bool{
	"head": true, "block": true, "no-wait": true, "follow": true, "f": true, "verbose": true, "disable-usage-stats": true,
	"include-dashboard": false,
}

func parseFlags(args []string) flags {
	f := flags{values: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			f.rest = append(f.rest, args[i+1:]...)
			return f
		case strings.HasPrefix(a, "-"):
			key := strings.TrimLeft(a, "-")
			if k, v, ok := strings.Cut(key, "="); ok {
				f.values[k] = v
				continue
			}
			if switches[key] || i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				f.values[key] = "true"
				continue
			}
			f.values[key] = args[i+1]
			i++
		default:
			f.positional = append(f.positional, a)
		}
	}
	return f
}

func (f flags) get(key, def string) string {
	if v, ok := f.values[key]; ok && v != "" {
		return v
	}
	return def
}
