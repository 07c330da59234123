package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// pathTasks is the head dashboard's task API, the fake's own (Ray has no count of task-seconds lost): GET
// answers the task table's counts (taskCounts), POST {"count": N, "seconds": S} submits N tasks of S seconds.
const pathTasks = "/api/fake/tasks"

// taskRequest is the body of a POST to pathTasks.
type taskRequest struct {
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
}

// serveTasks answers pathTasks from t.
func serveTasks(t *taskTable, w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, t.snapshot())
	case http.MethodPost:
		var req taskRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Count < 1 || req.Seconds <= 0 {
			http.Error(w, `the body must be {"count": N, "seconds": S} with N >= 1 and S > 0`, http.StatusBadRequest)
			return
		}
		t.submit(req.Count, time.Duration(req.Seconds*float64(time.Second)))
		writeJSON(w, http.StatusOK, t.snapshot())
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

// tasksCommand runs `ray tasks submit --count N --seconds S` and `ray tasks summary`, against the dashboard at
// --address (default http://127.0.0.1:8265), and prints the counts as JSON.
func tasksCommand(sub string, args []string) int {
	f := parseFlags(args)
	url := f.get("address", "http://127.0.0.1:"+defaultDashboardPort) + pathTasks
	var resp *http.Response
	var err error
	switch sub {
	case "summary":
		resp, err = http.Get(url)
	case "submit":
		count, cerr := strconv.Atoi(f.get("count", "1"))
		seconds, serr := strconv.ParseFloat(f.get("seconds", ""), 64)
		if cerr != nil || serr != nil {
			fmt.Fprintln(os.Stderr, "usage: ray tasks submit --count N --seconds S [--address URL]")
			return 2
		}
		body, _ := json.Marshal(taskRequest{Count: count, Seconds: seconds})
		resp, err = http.Post(url, "application/json", bytes.NewReader(body))
	default:
		fmt.Fprintln(os.Stderr, "usage: ray tasks submit|summary ...")
		return 2
	}
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(out)))
	}
	fmt.Println(string(bytes.TrimSpace(out)))
	return 0
}
