package rayservice

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// maxRecordedConfig is the largest serveConfigV2 recorded in full on its cluster (annotations share 256 KiB);
// a larger one is recorded by its hash alone.
const maxRecordedConfig = 64 << 10

// appliedRecord is the JSON of constants.AnnotationServeApplied.
type appliedRecord struct {
	ConfigHash     string `json:"configHash"`
	Config         string `json:"config,omitempty"`
	TargetCapacity *int32 `json:"targetCapacity,omitempty"`
}

// configHash is the hash a serveConfigV2 is recorded and compared by.
func configHash(config string) string {
	sum := sha256.Sum256([]byte(config))
	return hex.EncodeToString(sum[:])
}

// hash is the hash of s's config: Hash when only that is known.
func (s Served) hash() string {
	if s.Config == "" && s.Hash != "" {
		return s.Hash
	}
	return configHash(s.Config)
}

// appliedOf is what rc's Serve last accepted from kray, as recorded on rc; false when nothing is (never
// applied, or applied by a kray that did not record it).
func appliedOf(rc *rayv1.RayCluster) (Served, bool) {
	raw, ok := rc.Annotations[constants.AnnotationServeApplied]
	if !ok {
		return Served{}, false
	}
	var rec appliedRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.ConfigHash == "" {
		return Served{}, false
	}
	s := Served{Config: rec.Config, Capacity: rec.TargetCapacity, Hash: rec.ConfigHash}
	if rec.Config != "" && configHash(rec.Config) != rec.ConfigHash {
		return Served{}, false // edited by hand: trust neither part
	}
	return s, true
}

// appliedAnnotation is the value of constants.AnnotationServeApplied that records served.
func appliedAnnotation(served Served) string {
	rec := appliedRecord{ConfigHash: served.hash(), TargetCapacity: served.Capacity}
	if len(served.Config) <= maxRecordedConfig {
		rec.Config = served.Config
	}
	data, err := json.Marshal(rec)
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	return string(data)
}

// appliedConfigs reads what each of clusters' Serve last accepted, by cluster name.
func appliedConfigs(clusters map[string]*rayv1.RayCluster) map[string]Served {
	out := map[string]Served{}
	for name, rc := range clusters {
		if s, ok := appliedOf(rc); ok {
			out[name] = s
		}
	}
	return out
}
