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
//
// Any error is printed on stderr and exits with status 1; bad usage exits with status 2.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
