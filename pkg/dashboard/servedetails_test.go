package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// streamServe serves GET Serve details as head, then n filler bytes, then tail, without holding them in
// memory, so a test measures only what the client allocates.
func streamServe(t *testing.T, head string, filler byte, n int, tail string) ServeAPI {
	t.Helper()
	chunk := bytes.Repeat([]byte{filler}, 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, head)
		for left := n; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, tail)
	}))
	t.Cleanup(srv.Close)
	return HTTPDialer{HTTP: srv.Client()}.Serve(srv.URL, "")
}

// allocated returns how many bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A head that answers with one huge value kray does not read costs kray the memory of a small answer: the
// bound is on memory, not only on the bytes read.
func TestServeApplicationsMemoryIsBounded(t *testing.T) {
	const filler = 48 << 20
	want := &ServeDetails{Applications: map[string]ServeApplication{"a": {Status: "RUNNING"}}}
	for name, api := range map[string]ServeAPI{
		"a huge string": streamServe(t, `{"applications":{"a":{"status":"RUNNING"}},"padding":"`, 'x', filler, `"}`),
		"a huge number": streamServe(t, `{"applications":{"a":{"status":"RUNNING"}},"padding":1`, '0', filler, `}`),
		"a huge array":  streamServe(t, `{"applications":{"a":{"status":"RUNNING"}},"padding":[`, ' ', filler, `]}`),
		"a huge message": streamServe(t, `{"applications":{"a":{"status":"RUNNING","message":"`, 'x', filler,
			`"}}}`),
	} {
		var got *ServeDetails
		var err error
		bytes := allocated(func() { got, err = api.Applications(context.Background()) })
		if bytes > 4<<20 {
			t.Errorf("%s: reading the answer allocated %d MiB", name, bytes>>20)
		}
		if name == "a huge message" && err == nil {
			if msg := got.Applications["a"].Message; len(msg) != maxServeMessage || !strings.HasSuffix(msg, truncatedSuffix) {
				t.Errorf("%s: message of %d bytes ending %q", name, len(msg), msg[max(0, len(msg)-20):])
			}
			got.Applications["a"] = ServeApplication{Status: "RUNNING"}
		}
		if err != nil || !cmp.Equal(want, got) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
}

// What is kept of an answer is bounded whatever its shape: too many entries or names too long are errors
// saying which bound was met.
func TestDecodeServeDetailsBounds(t *testing.T) {
	many := func(n int, entry string) string {
		var b strings.Builder
		b.WriteString(`{"applications":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, entry, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	for name, tc := range map[string]struct{ body, err string }{
		"applications": {many(maxServeEntries+1, `"a%d":{}`), "more than 10000 applications, deployments and proxies"},
		"deployments": {many(maxServeEntries, `"a%d":{"deployments":{"d":{}}}`),
			"more than 10000 applications, deployments and proxies"},
		"proxies": {strings.Replace(many(maxServeEntries, `"a%d":{}`), `{"applications"`, `{"proxies":{"p":{}},"applications"`, 1),
			"more than 10000 applications, deployments and proxies"},
		"a long name": {`{"applications":{"` + strings.Repeat("n", maxServeName+1) + `":{}}}`, "a name longer than 1024 bytes"},
		"kept bytes":  {many(2000, `"a%d":{"message":"`+strings.Repeat("m", 3000)+`"}`), "more than 4194304 bytes of names"},
		"nested":      {`{"x":` + strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2) + `}`, "nested deeper than 64"},
	} {
		_, err := decodeServeDetails(strings.NewReader(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.err)
		}
	}
	// A long name in a value kray skips (a deployment's user_config) is no error.
	if _, err := decodeServeDetails(strings.NewReader(`{"x":{"` + strings.Repeat("n", 2*maxServeName) + `":1}}`)); err != nil {
		t.Errorf("a long key skipped: %v", err)
	}
}

// serveDetailsCases are answers whose decoding must equal encoding/json's, valid or not.
var serveDetailsCases = []string{
	`{"applications":{"a":{"status":"RUNNING","message":"ok","deployments":{"d":{"status":"HEALTHY","message":""}}}},"target_capacity":50}`,
	`{"applications":{"a":{"status":"RUNNING"}},"applications":{"b":{"status":"DEPLOYING"}}}`,
	`{"applications":{"a":{"status":"RUNNING"}},"applications":null}`,
	`{"applications":{"a":{"status":"RUNNING"},"a":{"message":"second"}}}`,
	`{"APPLICATIONS":{"a":{"Status":"RUNNING","DEPLOYMENTS":{"d":null}}},"Target_Capacity":-1.5e1}`,
	`{"applications":{"a":{"status":null,"message":"m","deployments":null}},"target_capacity":null}`,
	`{"proxies":{"n1":{"node_id":"n1","node_ip":"10.0.0.1","node_instance_id":"pod-a","actor_id":"x","status":"HEALTHY","log_file_path":"/l"},"n2":{"status":"DRAINING"}}}`,
	`{"Proxies":{"n1":null,"n2":{"NODE_IP":"10.0.0.2","node_ip":"10.0.0.3"}},"proxies":null}`,
	`{"proxies":{"n1":{"status":"HEALTHY"},"n1":{"node_ip":"10.0.0.1"}}}`,
	`{"proxies":{"n1":{"status":1}}}`,
	`{"proxies":[]}`,
	`null`,
	` {"x":[1,-0.5,2e10,true,false,null,"s",{"y":[]},[]]} `,
	`{"applications":{"\u00e9\ud83d\ude00\ud800x\"\\\/\b\f\n\r\t":{"status":"caf\u00e9"}}}`,
	"{\"applications\":{\"a\":{\"message\":\"bad \xff\xfe\x80 utf8 \xe2\x82 and \xe2\x82\xac\"}}}",
	`{"applications":{"a":{"status":5}}}`,
	`{"applications":[]}`,
	`{"target_capacity":"50"}`,
	`{"target_capacity":1e400}`,
	`{"x":01}`,
	`{"x":1.}`,
	`{"x":-}`,
	`{"x":.5}`,
	`{"x":1e}`,
	`{"x":tru}`,
	`{"x":"a` + "\n" + `"}`,
	`{"x":"\x"}`,
	`{"x":"\u12"}`,
	`{"x":1,}`,
	`{"x":[1,]}`,
	`{"x" 1}`,
	`{"x":1} {}`,
	`{"x":1`,
	`{"x":"`,
	`[]`,
	`5`,
	``,
}

// decodeLikeJSON is what encoding/json decodes of an answer, or its error.
func decodeLikeJSON(data []byte) (*ServeDetails, error) {
	details := &ServeDetails{}
	if err := json.Unmarshal(data, details); err != nil {
		return nil, err
	}
	return details, nil
}

// checkLikeJSON fails t when decodeServeDetails and encoding/json disagree on data: both must refuse it, or
// both decode the same details; decodeServeDetails may refuse more only for its own bounds.
func checkLikeJSON(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := decodeLikeJSON(data)
	got, err := decodeServeDetails(bytes.NewReader(data))
	switch {
	case err != nil && wantErr == nil && strings.Contains(err.Error(), "the most kray keeps"), err != nil && strings.Contains(err.Error(), "nested deeper"):
	case (err == nil) != (wantErr == nil):
		t.Errorf("%q: error %v, encoding/json's %v", data, err, wantErr)
	case err == nil && !cmp.Equal(want, got):
		if strings.Contains(fmt.Sprint(got), truncatedSuffix) {
			return
		}
		t.Errorf("%q: (-encoding/json +kray)\n%s", data, cmp.Diff(want, got))
	}
}

func TestDecodeServeDetailsLikeJSON(t *testing.T) {
	for _, c := range serveDetailsCases {
		checkLikeJSON(t, []byte(c))
	}
	checkLikeJSON(t, []byte(largeServeAnswer(100)))
}

func FuzzDecodeServeDetails(f *testing.F) {
	for _, c := range serveDetailsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkLikeJSON(t, data)
	})
}
