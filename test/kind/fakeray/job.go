package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// jobCommand runs `ray job submit|status|logs` against the dashboard at --address (or RAY_ADDRESS), as Ray's job CLI
// does through the Job API.
func jobCommand(sub string, args []string) int {
	f := parseFlags(args)
	address := strings.TrimRight(f.get("address", os.Getenv("RAY_ADDRESS")), "/")
	if address == "" {
		return fail(fmt.Errorf("ray job %s needs --address", sub))
	}
	c := jobClient{address: address, http: &http.Client{Timeout: 10 * time.Second}}
	switch sub {
	case "submit":
		entrypoint := strings.Join(f.rest, " ")
		if entrypoint == "" {
			return fail(fmt.Errorf("ray job submit needs an entrypoint after --"))
		}
		req := map[string]any{"entrypoint": entrypoint}
		if id := f.get("submission-id", ""); id != "" {
			req["submission_id"] = id
		}
		if m := f.get("metadata-json", ""); m != "" {
			var metadata map[string]string
			if err := json.Unmarshal([]byte(m), &metadata); err != nil {
				return fail(fmt.Errorf("--metadata-json: %w", err))
			}
			req["metadata"] = metadata
		}
		var reply struct {
			SubmissionID string `json:"submission_id"`
		}
		if err := c.do(http.MethodPost, "/api/jobs/", req, &reply); err != nil {
			return fail(err)
		}
		fmt.Printf("Job '%s' submitted successfully\n", reply.SubmissionID)
		if f.values["no-wait"] == "true" {
			return 0
		}
		return c.follow(reply.SubmissionID)
	case "status":
		id := first(f.positional)
		var d map[string]any
		if err := c.do(http.MethodGet, "/api/jobs/"+id, nil, &d); err != nil {
			return fail(err)
		}
		fmt.Printf("Status for job '%s': %v\n", id, d["status"])
		return 0
	case "logs":
		id := first(f.positional)
		if f.values["follow"] == "true" || f.values["f"] == "true" {
			return c.follow(id)
		}
		var logs struct {
			Logs string `json:"logs"`
		}
		if err := c.do(http.MethodGet, "/api/jobs/"+id+"/logs", nil, &logs); err != nil {
			return fail(err)
		}
		fmt.Print(logs.Logs)
		return 0
	}
	return fail(fmt.Errorf("unknown job command %q", sub))
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

type jobClient struct {
	address string
	http    *http.Client
}

// do sends a request with a JSON body (when in is not nil) and decodes a 200 reply into out.
func (c jobClient) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.address+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

// follow prints the job's logs as they grow until it ends; like Ray's `ray job logs --follow` it exits 0 once
// the job is terminal, whatever its status.
func (c jobClient) follow(id string) int {
	printed := 0
	for {
		var d struct {
			Status string `json:"status"`
		}
		statusErr := c.do(http.MethodGet, "/api/jobs/"+id, nil, &d)
		var logs struct {
			Logs string `json:"logs"`
		}
		if err := c.do(http.MethodGet, "/api/jobs/"+id+"/logs", nil, &logs); err == nil && len(logs.Logs) > printed {
			fmt.Print(logs.Logs[printed:])
			printed = len(logs.Logs)
		}
		if statusErr != nil {
			return fail(statusErr)
		}
		if terminal(d.Status) {
			return 0
		}
		time.Sleep(time.Second)
	}
}
