// Command tlogcheck is the independent side of twinflow's proof interoperability test
// (packages/twinflow-cli/tests/test_go_tlog_interop.py). It reads twinflow's proof files with its
// own small parser, opens their checkpoints with golang.org/x/mod/sumdb/note and checks their hashes
// with golang.org/x/mod/sumdb/tlog, the Go reference implementation of RFC 6962 proofs.
//
// Usage:
//
//	tlogcheck inclusion VKEY PROOF DIGEST     check a C2SP tlog-proof for the event whose hex digest
//	                                          is DIGEST (leaf hash tlog.RecordHash(digest)); print
//	                                          "ok ORIGIN SIZE INDEX"
//	tlogcheck consistency VKEY PROOF OLDNOTE  check a consistency proof (a tlog-witness
//	                                          add-checkpoint body) against the earlier note; print
//	                                          "ok ORIGIN OLDSIZE SIZE"
//	tlogcheck prove record|tree T N           read one hex event digest a line on stdin; print the
//	                                          tree hash of the first T, then tlog's record proof of
//	                                          leaf N (or tree proof from size N), base64, one a line
//
// Any error is printed on stderr and exits with status 1; bad usage exits with status 2.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tlogcheck:", err)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tlogcheck inclusion VKEY PROOF DIGEST | consistency VKEY PROOF OLDNOTE | prove record|tree T N")
	os.Exit(2)
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func hashOf(text string) tlog.Hash {
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(raw) != tlog.HashSize {
		fail(fmt.Errorf("not a base64 SHA-256 hash: %q", text))
	}
	var h tlog.Hash
	copy(h[:], raw)
	return h
}

func openCheckpoint(msg []byte, vkey string) checkpoint {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		fail(err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		fail(err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		fail(errors.New("the checkpoint has too few lines"))
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail(err)
	}
	return checkpoint{lines[0], size, hashOf(lines[2])}
}

// split returns a proof file's own lines and the checkpoint note after its first blank line.
func split(path string) ([]string, []byte) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	i := bytes.Index(data, []byte("\n\n"))
	if i < 0 {
		fail(errors.New("no blank line before the checkpoint"))
	}
	return strings.Split(string(data[:i]), "\n"), data[i+2:]
}

func hashes(lines []string) []tlog.Hash {
	out := []tlog.Hash{}
	for _, line := range lines {
		out = append(out, hashOf(line))
	}
	return out
}

func number(text string) int64 {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		fail(err)
	}
	return n
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "inclusion":
		if len(os.Args) != 5 {
			usage()
		}
		lines, msg := split(os.Args[3])
		if lines[0] != "c2sp.org/tlog-proof@v1" {
			fail(errors.New("not a tlog-proof"))
		}
		rest := lines[1:]
		if len(rest) > 0 && strings.HasPrefix(rest[0], "extra ") {
			rest = rest[1:]
		}
		if len(rest) == 0 || !strings.HasPrefix(rest[0], "index ") {
			fail(errors.New("no index line"))
		}
		index := number(strings.TrimPrefix(rest[0], "index "))
		cp := openCheckpoint(msg, os.Args[2])
		digest, err := hex.DecodeString(os.Args[4])
		if err != nil {
			fail(err)
		}
		proof := tlog.RecordProof(hashes(rest[1:]))
		if err := tlog.CheckRecord(proof, cp.size, cp.root, index, tlog.RecordHash(digest)); err != nil {
			fail(err)
		}
		fmt.Printf("ok %s %d %d\n", cp.origin, cp.size, index)
	case "consistency":
		if len(os.Args) != 5 {
			usage()
		}
		lines, msg := split(os.Args[3])
		if !strings.HasPrefix(lines[0], "old ") {
			fail(errors.New("not a consistency proof"))
		}
		oldSize := number(strings.TrimPrefix(lines[0], "old "))
		cp := openCheckpoint(msg, os.Args[2])
		oldMsg, err := os.ReadFile(os.Args[4])
		if err != nil {
			fail(err)
		}
		old := openCheckpoint(oldMsg, os.Args[2])
		if old.size != oldSize || old.origin != cp.origin {
			fail(errors.New("the old checkpoint is not the one the proof starts from"))
		}
		proof := tlog.TreeProof(hashes(lines[1:]))
		if err := tlog.CheckTree(proof, cp.size, cp.root, old.size, old.root); err != nil {
			fail(err)
		}
		fmt.Printf("ok %s %d %d\n", cp.origin, old.size, cp.size)
	case "prove":
		if len(os.Args) != 5 {
			usage()
		}
		t, n := number(os.Args[3]), number(os.Args[4])
		var stored []tlog.Hash
		reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(indexes))
			for i, x := range indexes {
				out[i] = stored[x]
			}
			return out, nil
		})
		scanner := bufio.NewScanner(os.Stdin)
		for leaf := int64(0); scanner.Scan(); leaf++ {
			digest, err := hex.DecodeString(scanner.Text())
			if err != nil {
				fail(err)
			}
			more, err := tlog.StoredHashes(leaf, digest, reader)
			if err != nil {
				fail(err)
			}
			stored = append(stored, more...)
		}
		root, err := tlog.TreeHash(t, reader)
		if err != nil {
			fail(err)
		}
		var proof []tlog.Hash
		switch os.Args[2] {
		case "record":
			proof, err = tlog.ProveRecord(t, n, reader)
		case "tree":
			proof, err = tlog.ProveTree(t, n, reader)
		default:
			usage()
		}
		if err != nil {
			fail(err)
		}
		fmt.Println(base64.StdEncoding.EncodeToString(root[:]))
		for _, h := range proof {
			fmt.Println(base64.StdEncoding.EncodeToString(h[:]))
		}
	default:
		usage()
	}
}
