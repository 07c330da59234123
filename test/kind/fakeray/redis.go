package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The GCS's fault tolerance: with RAY_REDIS_ADDRESS set, Ray's GCS keeps its tables in Redis under the
// cluster's storage namespace (RAY_external_storage_namespace), so that a GCS started again has the same
// cluster ID and the nodes that were alive, and the raylets reconnect to it. The fake keeps what it needs of
// that: the cluster ID and the node table, in two keys of the namespace, spoken to a real redis-server.
const (
	envRedisAddress    = "RAY_REDIS_ADDRESS"
	envRedisPassword   = "REDIS_PASSWORD"
	envStorageNS       = "RAY_external_storage_namespace"
	redisClusterIDKey  = "@cluster_id"
	redisNodeTableKey  = "@nodes"
	redisCallTimeout   = 5 * time.Second
	redisMaxReplyBytes = 1 << 20
)

// redisStore is a cluster's storage in Redis: the address, password and namespace its GCS was given.
type redisStore struct {
	address, password, namespace string
}

// redisFromEnv is the store the environment names, nil without RAY_REDIS_ADDRESS (no fault tolerance).
func redisFromEnv() *redisStore {
	raw := strings.Split(os.Getenv(envRedisAddress), ",")[0]
	if raw == "" {
		return nil
	}
	s := &redisStore{address: raw, password: os.Getenv(envRedisPassword), namespace: os.Getenv(envStorageNS)}
	if strings.Contains(raw, "://") {
		if u, err := url.Parse(raw); err == nil {
			s.address = u.Host
			if p, ok := u.User.Password(); ok && s.password == "" {
				s.password = p
			}
		}
	}
	if _, _, err := net.SplitHostPort(s.address); err != nil {
		s.address = net.JoinHostPort(s.address, "6379")
	}
	return s
}

// do runs one Redis command and returns its reply: a string, an int64, nil, or a []any of those.
func (s *redisStore) do(ctx context.Context, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.address)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	r := bufio.NewReader(conn)
	if s.password != "" {
		if _, err := roundTrip(conn, r, "AUTH", s.password); err != nil {
			return nil, err
		}
	}
	return roundTrip(conn, r, args...)
}

// roundTrip writes one command in Redis's protocol (an array of bulk strings) and reads its reply.
func roundTrip(conn net.Conn, r *bufio.Reader, args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readReply(r)
}

// readReply reads one reply of Redis's protocol.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		if n > redisMaxReplyBytes {
			return nil, fmt.Errorf("redis: a reply of %d bytes", n)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, 0, n)
		for range n {
			v, err := readReply(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

// clusterID returns the cluster ID kept in Redis, keeping newID there when there is none (the cluster's
// first GCS), as Ray's GCS does at start.
func (s *redisStore) clusterID(ctx context.Context, newID []byte) ([]byte, error) {
	if _, err := s.do(ctx, "SET", s.namespace+redisClusterIDKey, string(newID), "NX"); err != nil {
		return nil, err
	}
	v, err := s.do(ctx, "GET", s.namespace+redisClusterIDKey)
	if err != nil {
		return nil, err
	}
	id, ok := v.(string)
	if !ok || id == "" {
		return nil, errors.New("redis: no cluster ID kept")
	}
	return []byte(id), nil
}

// nodes returns the nodes kept alive in Redis.
func (s *redisStore) nodes(ctx context.Context) ([]*gcsNode, error) {
	v, err := s.do(ctx, "HGETALL", s.namespace+redisNodeTableKey)
	if err != nil {
		return nil, err
	}
	fields, _ := v.([]any)
	var out []*gcsNode
	for i := 0; i+1 < len(fields); i += 2 {
		if raw, ok := fields[i+1].(string); ok {
			out = append(out, decodeNode([]byte(raw)))
		}
	}
	return out, nil
}

// keepNode keeps a live node in Redis, or drops a dead one.
func (s *redisStore) keepNode(ctx context.Context, n *gcsNode, alive bool) error {
	if alive {
		_, err := s.do(ctx, "HSET", s.namespace+redisNodeTableKey, string(n.id), string(encodeNode(n)))
		return err
	}
	_, err := s.do(ctx, "HDEL", s.namespace+redisNodeTableKey, string(n.id))
	return err
}

// cleanup deletes the namespace's keys: Ray's cleanup_redis_storage, which KubeRay's Redis cleanup Job runs.
func (s *redisStore) cleanup(ctx context.Context) error {
	_, err := s.do(ctx, "DEL", s.namespace+redisClusterIDKey, s.namespace+redisNodeTableKey)
	return err
}

// python runs the one Python program kray's pods start in a Ray image: the Redis cleanup Job's call of Ray's
// cleanup_redis_storage (python -c SCRIPT), which deletes the cluster's storage namespace and exits 0.
func python(args []string) int {
	if len(args) < 2 || args[0] != "-c" || !strings.Contains(args[1], "cleanup_redis_storage") {
		fmt.Fprintln(os.Stderr, "python: the fake Ray image runs only Ray's cleanup_redis_storage")
		return 2
	}
	s := redisFromEnv()
	if s == nil {
		return fail(errors.New("cleanup_redis_storage: no RAY_REDIS_ADDRESS"))
	}
	if err := s.cleanup(context.Background()); err != nil {
		return fail(err)
	}
	fmt.Printf("Deleted the GCS data of namespace %q from Redis at %s.\n", s.namespace, s.address)
	return 0
}
