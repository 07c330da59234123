// Command pad writes -bytes bytes of pseudo-random data seeded by -seed to stdout: the same bytes for the same
// seed, which gzip cannot shrink. The kind upgrade benchmark pads its Ray images with them to a realistic size,
// and a rebuilt image keeps its layer's digest, so the registry keeps the blob it has.
package main

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
)

func main() {
	size := flag.Int64("bytes", 1<<30, "how many bytes to write")
	seed := flag.String("seed", "", "the seed; the same seed writes the same bytes")
	flag.Parse()
	if err := write(bufio.NewWriterSize(os.Stdout, 1<<20), *size, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "pad:", err)
		os.Exit(1)
	}
}

// write writes size bytes of the ChaCha8 stream keyed by the SHA-256 of seed to w, and flushes it.
func write(w *bufio.Writer, size int64, seed string) error {
	src := rand.NewChaCha8(sha256.Sum256([]byte(seed)))
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := src.Read(buf[:n]); err != nil {
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		size -= n
	}
	return w.Flush()
}
