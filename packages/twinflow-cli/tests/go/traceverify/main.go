// Command traceverify is a second, independent verifier of twinflow's trace format, written in
// Go from the format's documentation (the trace line format, RFC 8785, RFC 9162, C2SP
// signed-note, tlog-checkpoint and tlog-proof, DSSE) with the standard library and
// golang.org/x/mod alone. It speaks the conformance-vector contract of twinflow-trace:
//
//	traceverify trace TRACE
//	traceverify checkpoint NOTE VKEY TRACE
//	traceverify inclusion PROOF VKEY
//	traceverify attestation ENVELOPE VKEY CASE_TRACE PROOF
//
// and prints one JSON object on stdout: {"ok": true, ...} or {"ok": false, "problem": ...}.
// Run every vector with: twinflow-trace conformance -- ./traceverify
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

var (
	prefix      = []byte(`{"digest":"`)
	infix       = []byte(`","event":`)
	redactedEnd = []byte(`","redacted":true}` + "\n")
	hex64       = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func say(v map[string]any) {
	out, _ := json.Marshal(v)
	fmt.Println(string(out))
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "traceverify:", err)
	os.Exit(2)
}

func read(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		die(err)
	}
	return data
}

// lines splits a trace into its lines, each with its newline (the last may lack one).
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

type event struct {
	digest string
	seq    int64
	prev   string
	kind   string
	body   *value
}

// parseLine checks one complete line on its own: the event, or the problem's kind.
func parseLine(raw []byte) (*event, string) {
	start := len(prefix) + 64
	if !bytes.HasPrefix(raw, prefix) || len(raw) < start+len(infix)+2 ||
		!bytes.Equal(raw[start:start+len(infix)], infix) || !bytes.HasSuffix(raw, []byte("}\n")) {
		return nil, "edited"
	}
	body := raw[start+len(infix) : len(raw)-2]
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	if digest != string(raw[len(prefix):start]) {
		return nil, "edited"
	}
	v, reason := parseCanonical(body)
	if reason != "" {
		return nil, reason
	}
	if v.kind != 'o' || len(v.keys) != 4 || v.get("at") == nil || v.get("body") == nil ||
		v.get("prev") == nil || v.get("seq") == nil {
		return nil, "not_event"
	}
	seq, prev, at, b := v.get("seq"), v.get("prev"), v.get("at"), v.get("body")
	if seq.kind != 'n' || !seq.isInt || seq.num < 0 {
		return nil, "not_event"
	}
	if prev.kind != 's' || !hex64.MatchString(prev.str) || at.kind != 's' {
		return nil, "not_event"
	}
	kind := b.get("kind")
	if b.kind != 'o' || kind == nil || kind.kind != 's' {
		return nil, "not_event"
	}
	return &event{digest, int64(seq.num), prev.str, kind.str, b}, ""
}

func redactedDigest(raw []byte) string {
	if len(raw) == len(prefix)+64+len(redactedEnd) && bytes.HasPrefix(raw, prefix) &&
		bytes.HasSuffix(raw, redactedEnd) && hex64.Match(raw[len(prefix):len(prefix)+64]) {
		return string(raw[len(prefix) : len(prefix)+64])
	}
	return ""
}

type report struct {
	problem  string
	seq      int64
	leaves   []tlog.Hash
	redacted []int64
}

func parsedAt(raw []byte) *event {
	if !bytes.HasSuffix(raw, []byte("\n")) {
		return nil
	}
	e, _ := parseLine(raw)
	return e
}

// classify names what is wrong at line index, whose seq or prev is off.
func classify(all [][]byte, index int64, e *event, expectedPrev string) (string, int64) {
	digestAt := func(n int64) string {
		raw := all[n]
		if len(raw) < len(prefix)+64 {
			return ""
		}
		return string(raw[len(prefix) : len(prefix)+64])
	}
	switch {
	case e.seq == index:
		if index+1 < int64(len(all)) {
			if next := parsedAt(all[index+1]); next != nil && next.seq == index && next.prev == expectedPrev {
				return "inserted", index
			}
		}
		return "edited", index
	case e.seq > index:
		for _, later := range all[index+1:] {
			if after := parsedAt(later); after != nil && after.seq == index {
				return "reordered", index
			}
		}
		return "removed", index
	}
	if digestAt(e.seq) == e.digest {
		return "inserted", index
	}
	if e.seq == index-1 {
		prior := genesis
		if index >= 2 {
			prior = digestAt(index - 2)
		}
		if e.prev != prior {
			return "inserted", index
		}
		return "inserted", index - 1
	}
	return "inserted", index
}

func verify(data []byte) report {
	r := report{}
	all := lines(data)
	expectedPrev, lastKind := genesis, ""
	for i, raw := range all {
		index := int64(i)
		if d := redactedDigest(raw); d != "" {
			sum, _ := hex.DecodeString(d)
			r.leaves = append(r.leaves, tlog.RecordHash(sum))
			r.redacted = append(r.redacted, index)
			expectedPrev, lastKind = d, "redacted"
			continue
		}
		if !bytes.HasSuffix(raw, []byte("\n")) {
			r.problem, r.seq = "truncated", index
			return r
		}
		e, why := parseLine(raw)
		if why != "" {
			r.problem, r.seq = why, index
			return r
		}
		if e.seq != index || e.prev != expectedPrev {
			r.problem, r.seq = classify(all, index, e, expectedPrev)
			return r
		}
		if index == 0 && e.kind == "run_started" {
			if f := e.body.get("format"); f != nil && !(f.kind == 'n' && f.isInt && f.num == 1) {
				r.problem, r.seq = "format", 0
				return r
			}
		}
		sum, _ := hex.DecodeString(e.digest)
		r.leaves = append(r.leaves, tlog.RecordHash(sum))
		expectedPrev, lastKind = e.digest, e.kind
	}
	if lastKind != "run_finished" && lastKind != "run_failed" {
		r.problem, r.seq = "removed", int64(len(r.leaves))
	}
	return r
}

// root is the RFC 9162 Merkle tree hash over leaf hashes.
func root(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(root(leaves[:k]), root(leaves[k:]))
}

func checkTrace(path string) {
	r := verify(read(path))
	if r.problem != "" {
		say(map[string]any{"ok": false, "problem": r.problem, "seq": r.seq})
		return
	}
	redacted := r.redacted
	if redacted == nil {
		redacted = []int64{}
	}
	h := root(r.leaves)
	say(map[string]any{"ok": true, "size": len(r.leaves), "root": hex.EncodeToString(h[:]), "redacted": redacted})
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// openCheckpoint opens a C2SP checkpoint note signed by vkey (nil: unsigned body only).
func openCheckpoint(msg []byte, vkey []byte) (checkpoint, bool) {
	text := string(msg)
	if vkey != nil {
		v, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
		if err != nil {
			die(err)
		}
		n, err := note.Open(msg, note.VerifierList(v))
		if err != nil {
			return checkpoint{}, false
		}
		text = n.Text
	}
	parts := strings.Split(text, "\n")
	if len(parts) < 4 {
		die(fmt.Errorf("not a checkpoint"))
	}
	size, err := strconv.ParseInt(parts[1], 10, 64)
	raw, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil || len(raw) != tlog.HashSize {
		die(fmt.Errorf("not a checkpoint"))
	}
	var h tlog.Hash
	copy(h[:], raw)
	return checkpoint{parts[0], size, h}, true
}

func checkCheckpoint(notePath, keyPath, tracePath string) {
	cp, ok := openCheckpoint(read(notePath), read(keyPath))
	if !ok {
		say(map[string]any{"ok": false, "problem": "signature"})
		return
	}
	r := verify(read(tracePath))
	if int64(len(r.leaves)) < cp.size || cp.size == 0 || root(r.leaves[:cp.size]) != cp.root {
		say(map[string]any{"ok": false, "problem": "checkpoint"})
		return
	}
	say(map[string]any{"ok": true, "size": cp.size})
}

type tlogProof struct {
	extra  []byte
	index  int64
	hashes []tlog.Hash
	note   []byte
}

func parseProof(data []byte) tlogProof {
	i := bytes.Index(data, []byte("\n\n"))
	if i < 0 {
		die(fmt.Errorf("not a tlog-proof"))
	}
	own := strings.Split(string(data[:i]), "\n")
	if own[0] != "c2sp.org/tlog-proof@v1" {
		die(fmt.Errorf("not a tlog-proof"))
	}
	p := tlogProof{note: data[i+2:]}
	rest := own[1:]
	if len(rest) > 0 && strings.HasPrefix(rest[0], "extra ") {
		p.extra, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(rest[0], "extra "))
		rest = rest[1:]
	}
	if len(rest) == 0 || !strings.HasPrefix(rest[0], "index ") {
		die(fmt.Errorf("no index line"))
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(rest[0], "index "), 10, 64)
	if err != nil {
		die(err)
	}
	p.index = index
	for _, line := range rest[1:] {
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(raw) != tlog.HashSize {
			die(fmt.Errorf("not a hash: %q", line))
		}
		var h tlog.Hash
		copy(h[:], raw)
		p.hashes = append(p.hashes, h)
	}
	return p
}

func checkInclusion(proofPath, keyPath string) {
	p := parseProof(read(proofPath))
	cp, ok := openCheckpoint(p.note, read(keyPath))
	if !ok {
		say(map[string]any{"ok": false, "problem": "signature"})
		return
	}
	if tlog.CheckRecord(p.hashes, cp.size, cp.root, p.index, tlog.RecordHash(p.extra)) != nil {
		say(map[string]any{"ok": false, "problem": "proof"})
		return
	}
	say(map[string]any{"ok": true, "index": p.index})
}

type envelope struct {
	Payload     string `json:"payload"`
	PayloadType string `json:"payloadType"`
	Signatures  []struct {
		KeyID string `json:"keyid"`
		Sig   string `json:"sig"`
	} `json:"signatures"`
}

type caseResult struct {
	Key     string `json:"key"`
	Status  string `json:"status"`
	Size    int64  `json:"size"`
	RootHex string `json:"rootHex"`
}

type statement struct {
	Type          string `json:"_type"`
	PredicateType string `json:"predicateType"`
	Predicate     struct {
		SampleSize int64 `json:"sampleSize"`
		Cases      struct {
			Size    int64        `json:"size"`
			RootHex string       `json:"rootHex"`
			Results []caseResult `json:"results"`
		} `json:"cases"`
	} `json:"predicate"`
}

func pae(kind string, body []byte) []byte {
	return []byte(fmt.Sprintf("DSSEv1 %d %s %d %s", len(kind), kind, len(body), body))
}

func checkAttestation(envPath, keyPath, tracePath, proofPath string) {
	malformed := map[string]any{"ok": false, "problem": "malformed"}
	var env envelope
	if json.Unmarshal(read(envPath), &env) != nil || env.PayloadType != "application/vnd.in-toto+json" {
		say(malformed)
		return
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		say(malformed)
		return
	}
	v, err := note.NewVerifier(strings.TrimSpace(string(read(keyPath))))
	if err != nil {
		die(err)
	}
	keyid := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
	signed := false
	for _, s := range env.Signatures {
		if s.KeyID != keyid {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil || !v.Verify(pae(env.PayloadType, payload), sig) {
			say(map[string]any{"ok": false, "problem": "signature"})
			return
		}
		signed = true
	}
	if !signed {
		say(map[string]any{"ok": false, "problem": "signature"})
		return
	}
	var st statement
	if json.Unmarshal(payload, &st) != nil || st.Type != "https://in-toto.io/Statement/v1" ||
		st.PredicateType != "https://twinflow.dev/attestation/eval/v1" {
		say(malformed)
		return
	}
	cases := st.Predicate.Cases
	var leaves []tlog.Hash
	for _, c := range cases.Results {
		raw, err := hex.DecodeString(c.RootHex)
		if err != nil || len(raw) != 32 {
			say(malformed)
			return
		}
		leaves = append(leaves, tlog.RecordHash(raw))
	}
	if len(leaves) == 0 || int64(len(leaves)) != cases.Size || cases.Size != st.Predicate.SampleSize {
		say(malformed)
		return
	}
	if h := root(leaves); hex.EncodeToString(h[:]) != cases.RootHex {
		say(malformed)
		return
	}
	mismatch := map[string]any{"ok": false, "problem": "mismatch"}
	r := verify(read(tracePath))
	if r.problem != "" && !(r.problem == "removed" && r.seq == int64(len(r.leaves))) {
		say(mismatch)
		return
	}
	traceRoot := root(r.leaves)
	p := parseProof(read(proofPath))
	cp, _ := openCheckpoint(p.note, nil)
	if tlog.CheckRecord(p.hashes, cp.size, cp.root, p.index, tlog.RecordHash(traceRoot[:])) != nil {
		say(mismatch)
		return
	}
	if cp.origin != "twinflow.dev/eval-cases" || cp.size != cases.Size || hex.EncodeToString(cp.root[:]) != cases.RootHex {
		say(mismatch)
		return
	}
	c := cases.Results[p.index]
	if c.Size != int64(len(r.leaves)) || c.RootHex != hex.EncodeToString(traceRoot[:]) {
		say(mismatch)
		return
	}
	say(map[string]any{"ok": true, "key": c.Key})
}

func main() {
	if len(os.Args) < 2 {
		die(fmt.Errorf("usage: traceverify trace|checkpoint|inclusion|attestation FILE..."))
	}
	args := os.Args[2:]
	want := map[string]int{"trace": 1, "checkpoint": 3, "inclusion": 2, "attestation": 4}
	if n, ok := want[os.Args[1]]; !ok || n != len(args) {
		die(fmt.Errorf("usage: traceverify trace|checkpoint|inclusion|attestation FILE..."))
	}
	switch os.Args[1] {
	case "trace":
		checkTrace(args[0])
	case "checkpoint":
		checkCheckpoint(args[0], args[1], args[2])
	case "inclusion":
		checkInclusion(args[0], args[1])
	case "attestation":
		checkAttestation(args[0], args[1], args[2], args[3])
	}
}
