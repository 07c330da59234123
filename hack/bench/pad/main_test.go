package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"testing"
)

// The same seed writes the same bytes, another seed others, and gzip does not shrink them.
func TestWriteIsRepeatableAndIncompressible(t *testing.T) {
	out := func(size int64, seed string) []byte {
		var b bytes.Buffer
		if err := write(bufio.NewWriter(&b), size, seed); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, again, other := out(3<<20+5, "2.46.0"), out(3<<20+5, "2.46.0"), out(3<<20+5, "2.52.0")
	if len(a) != 3<<20+5 {
		t.Fatalf("wrote %d bytes", len(a))
	}
	if !bytes.Equal(a, again) {
		t.Error("the same seed wrote different bytes")
	}
	if bytes.Equal(a, other) {
		t.Error("another seed wrote the same bytes")
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(a)
	_ = zw.Close()
	if z.Len() < len(a) {
		t.Errorf("gzip shrank %d bytes to %d", len(a), z.Len())
	}
}
