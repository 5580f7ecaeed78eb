// Command notecheck is the independent side of twinflow's signed-note interoperability test
// (packages/twinflow-cli/tests/test_go_interop.py). It drives golang.org/x/mod/sumdb/note, the Go
// reference implementation of C2SP signed notes, and nothing else.
//
// Usage:
//
//	notecheck verify VKEY...         read a signed note on stdin; open it with the verifier keys;
//	                                 print {"text", "sigs", "unverified"} as JSON
//	notecheck sign SKEY...           read a note text on stdin; print it signed by every signer key
//	notecheck cosign SKEY VKEY...    read a signed note on stdin; open it with the verifier keys and
//	                                 print it with SKEY's signature added
//	notecheck keygen NAME            print a new signer key and its verifier key, one per line
//	notecheck keys -                 read one base64-encoded verifier key text per line on stdin;
//	                                 print, per key, "ok NAME+HASH" if NewVerifier reads it, else "error"
//	notecheck spaces -               print, in hex, every code point unicode.IsSpace accepts
//	notecheck batch VKEY...          read one base64-encoded note per line on stdin; print, per
//	                                 note, "ok NAME+HASH..." if it opens with the keys, else "error"
//	notecheck cosigned VKEY CKEY...  read a cosigned checkpoint on stdin; open it with the log's
//	                                 verifier key and C2SP cosignature/v1 witness keys (CKEY:
//	                                 name+hash+base64(0x04||key)); print {"text", "sigs",
//	                                 "unverified", "times"} as JSON. x/mod/sumdb/note knows only
//	                                 key type 0x01, so the cosignature/v1 verifier is written here,
//	                                 from the C2SP text, on Go's crypto/ed25519 and note.Open.
//
// Any error is printed on stderr and exits with status 1; bad usage exits with status 2.
package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/mod/sumdb/note"
)

type sig struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

type opened struct {
	Text       string `json:"text"`
	Sigs       []sig  `json:"sigs"`
	Unverified []sig  `json:"unverified"`
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "notecheck:", err)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: notecheck verify VKEY... | sign SKEY... | cosign SKEY VKEY... | batch VKEY... | keys - | spaces - | keygen NAME")
	os.Exit(2)
}

func open(msg []byte, vkeys []string) *note.Note {
	var verifiers []note.Verifier
	for _, vkey := range vkeys {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			fail(fmt.Errorf("verifier key %q: %w", vkey, err))
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		fail(err)
	}
	return n
}

func signers(skeys []string) []note.Signer {
	var out []note.Signer
	for _, skey := range skeys {
		s, err := note.NewSigner(skey)
		if err != nil {
			fail(fmt.Errorf("signer key: %w", err))
		}
		out = append(out, s)
	}
	return out
}

func sigList(in []note.Signature) []sig {
	out := []sig{}
	for _, s := range in {
		out = append(out, sig{Name: s.Name, Hash: fmt.Sprintf("%08x", s.Hash)})
	}
	return out
}

// cosigV1 is a note.Verifier for C2SP tlog-cosignature Ed25519 cosignature/v1 lines.
type cosigV1 struct {
	name  string
	hash  uint32
	key   ed25519.PublicKey
	times map[string]uint64
}

func newCosigV1(vkey string, times map[string]uint64) *cosigV1 {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		fail(fmt.Errorf("cosigner key %q: not name+hash+key", vkey))
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		fail(fmt.Errorf("cosigner key %q: not base64(0x04 || 32-byte key)", vkey))
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	hash := binary.BigEndian.Uint32(h[:4])
	given, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || uint32(given) != hash {
		fail(fmt.Errorf("cosigner key %q: the hash is not SHA-256(name, newline, 0x04, key)[:4]", vkey))
	}
	return &cosigV1{name: parts[0], hash: hash, key: ed25519.PublicKey(raw[1:]), times: times}
}

func (c *cosigV1) Name() string    { return c.name }
func (c *cosigV1) KeyHash() uint32 { return c.hash }
func (c *cosigV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	if t == 0 || t > 1<<63-1 {
		return false
	}
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	if !ed25519.Verify(c.key, signed, sig[8:]) {
		return false
	}
	c.times[fmt.Sprintf("%s+%08x", c.name, c.hash)] = t
	return true
}

type cosignedNote struct {
	opened
	Times map[string]uint64 `json:"times"`
}

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "verify":
		msg, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		n := open(msg, args)
		out, err := json.Marshal(opened{Text: n.Text, Sigs: sigList(n.Sigs), Unverified: sigList(n.UnverifiedSigs)})
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(append(out, '\n'))
	case "sign":
		text, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		msg, err := note.Sign(&note.Note{Text: string(text)}, signers(args)...)
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(msg)
	case "cosign":
		if len(args) < 2 {
			usage()
		}
		msg, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		n := open(msg, args[1:])
		signed, err := note.Sign(n, signers(args[:1])...)
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(signed)
	case "batch":
		var verifiers []note.Verifier
		for _, vkey := range args {
			v, err := note.NewVerifier(vkey)
			if err != nil {
				fail(fmt.Errorf("verifier key %q: %w", vkey, err))
			}
			verifiers = append(verifiers, v)
		}
		known := note.VerifierList(verifiers...)
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 1<<20), 1<<22)
		out := bufio.NewWriter(os.Stdout)
		for in.Scan() {
			msg, err := base64.StdEncoding.DecodeString(in.Text())
			if err != nil {
				fail(err)
			}
			n, err := note.Open(msg, known)
			if err != nil {
				fmt.Fprintln(out, "error")
				continue
			}
			var names []string
			for _, s := range n.Sigs {
				names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
			}
			fmt.Fprintln(out, strings.TrimSpace("ok "+strings.Join(names, " ")))
		}
		if err := in.Err(); err != nil {
			fail(err)
		}
		out.Flush()
	case "keys":
		in := bufio.NewScanner(os.Stdin)
		out := bufio.NewWriter(os.Stdout)
		for in.Scan() {
			vkey, err := base64.StdEncoding.DecodeString(in.Text())
			if err != nil {
				fail(err)
			}
			v, err := note.NewVerifier(string(vkey))
			if err != nil {
				fmt.Fprintln(out, "error")
				continue
			}
			fmt.Fprintf(out, "ok %s+%08x\n", v.Name(), v.KeyHash())
		}
		if err := in.Err(); err != nil {
			fail(err)
		}
		out.Flush()
	case "cosigned":
		msg, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		log, err := note.NewVerifier(args[0])
		if err != nil {
			fail(fmt.Errorf("verifier key %q: %w", args[0], err))
		}
		times := map[string]uint64{}
		verifiers := []note.Verifier{log}
		for _, ckey := range args[1:] {
			verifiers = append(verifiers, newCosigV1(ckey, times))
		}
		n, err := note.Open(msg, note.VerifierList(verifiers...))
		if err != nil {
			fail(err)
		}
		out, err := json.Marshal(cosignedNote{
			opened: opened{Text: n.Text, Sigs: sigList(n.Sigs), Unverified: sigList(n.UnverifiedSigs)},
			Times:  times,
		})
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(append(out, '\n'))
	case "spaces":
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.IsSpace(r) {
				fmt.Printf("%x\n", r)
			}
		}
	case "keygen":
		skey, vkey, err := note.GenerateKey(rand.Reader, args[0])
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s\n%s\n", skey, vkey)
	default:
		usage()
	}
}
