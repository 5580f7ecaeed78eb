package main

// A strict JSON reader that names why bytes are not RFC 8785 canonical JSON, written from
// RFC 8259 and RFC 8785 alone (no twinflow code): not_utf8, too_deep, not_json, duplicate_key,
// non_finite, whitespace, number_form, escape_form, key_order.

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

const maxDepth = 64

type value struct {
	kind      byte // 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null
	str       string
	num       float64
	isInt     bool // an integer literal within +-(2**53-1): a JSON integer
	badNumber bool // no IEEE-754 double (out of range)
	badString bool // a lone surrogate: no UTF-8 form
	keys      []string
	vals      []*value
	items     []*value
}

type jsonError struct{ reason string }

func (e *jsonError) Error() string { return e.reason }

type parser struct {
	data []byte
	pos  int
}

func (p *parser) fail(reason string) { panic(&jsonError{reason}) }

func (p *parser) ws() {
	for p.pos < len(p.data) && strings.IndexByte(" \t\r\n", p.data[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *parser) literal(word string) bool {
	if bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *parser) value() *value {
	p.ws()
	if p.pos >= len(p.data) {
		p.fail("not_json")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		p.pos++
		v := &value{kind: 'a'}
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return v
		}
		for {
			v.items = append(v.items, p.value())
			p.ws()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.data) && p.data[p.pos] == ']' {
				p.pos++
				return v
			}
			p.fail("not_json")
		}
	case c == '"':
		s, bad := p.string()
		return &value{kind: 's', str: s, badString: bad}
	case p.literal("true"):
		return &value{kind: 't'}
	case p.literal("false"):
		return &value{kind: 'f'}
	case p.literal("null"):
		return &value{kind: 'z'}
	case p.literal("NaN"), p.literal("Infinity"), p.literal("-Infinity"):
		p.fail("non_finite")
	}
	return p.number()
}

func (p *parser) object() *value {
	p.pos++
	v := &value{kind: 'o'}
	seen := map[string]bool{}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v
	}
	for {
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			p.fail("not_json")
		}
		key, _ := p.string()
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			p.fail("not_json")
		}
		p.pos++
		item := p.value()
		v.keys = append(v.keys, key)
		v.vals = append(v.vals, item)
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			// Duplicates are named once the object is read (as a pairs hook would).
			for _, k := range v.keys {
				if seen[k] {
					p.fail("duplicate_key")
				}
				seen[k] = true
			}
			return v
		}
		p.fail("not_json")
	}
}

func (p *parser) hex4() rune {
	if p.pos+4 > len(p.data) {
		p.fail("not_json")
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		p.fail("not_json")
	}
	p.pos += 4
	return rune(n)
}

// string reads a string token; bad reports a lone surrogate.
func (p *parser) string() (string, bool) {
	p.pos++
	var out []rune
	bad := false
	for {
		if p.pos >= len(p.data) {
			p.fail("not_json")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(out), bad
		case c < 0x20:
			p.fail("not_json")
		case c == '\\':
			p.pos++
			if p.pos >= len(p.data) {
				p.fail("not_json")
			}
			e := p.data[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				out = append(out, rune(e))
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := p.hex4()
				if utf16.IsSurrogate(r) {
					if r < 0xdc00 && p.pos+6 <= len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
						save := p.pos
						p.pos += 2
						r2 := p.hex4()
						if joined := utf16.DecodeRune(r, r2); joined != utf8.RuneError {
							out = append(out, joined)
							continue
						}
						p.pos = save
					}
					bad = true
					out = append(out, utf8.RuneError)
					continue
				}
				out = append(out, r)
			default:
				p.fail("not_json")
			}
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			out = append(out, r)
			p.pos += size
		}
	}
}

func (p *parser) number() *value {
	start := p.pos
	if p.pos < len(p.data) && p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		p.fail("not_json")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		p.fail("not_json")
	}
	integer := true
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		integer = false
		if digits() == 0 {
			p.fail("not_json")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		integer = false
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			p.fail("not_json")
		}
	}
	text := string(p.data[start:p.pos])
	f, err := strconv.ParseFloat(text, 64)
	v := &value{kind: 'n', num: f}
	if err != nil || math.IsInf(f, 0) {
		v.badNumber = true
	}
	v.isInt = integer && !v.badNumber && math.Abs(f) <= 9007199254740991
	return v
}

// depth is the deepest nesting of arrays and objects outside strings.
func depth(data []byte) int {
	d, most, in := 0, 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if in {
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case '[', '{':
			d++
			if d > most {
				most = d
			}
		case ']', '}':
			d--
		}
	}
	return most
}

// blank replaces every string token's contents with nothing (`""`).
func blank(data []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if in {
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
				out = append(out, '"')
			}
			continue
		}
		out = append(out, c)
		if c == '"' {
			in = true
		}
	}
	return out
}

// esNumber formats a finite double as ECMAScript's Number.prototype.toString.
func esNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde+XX, the shortest round-trip digits
	mant, expText, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expText)
	n := exp + 1
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	if n-1 > 0 {
		return sign + out + "e+" + strconv.Itoa(n-1)
	}
	return sign + out + "e-" + strconv.Itoa(1-n)
}

func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteString(strconv.FormatInt(int64(r)>>4, 16))
				b.WriteString(strconv.FormatInt(int64(r)&15, 16))
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func utf16Less(a, b string) bool {
	x, y := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return len(x) < len(y)
}

// encode writes v canonically (keys sorted when sorted is true); the reason when it has no form.
func encode(v *value, b *bytes.Buffer, sorted bool) string {
	switch v.kind {
	case 'o':
		order := make([]int, len(v.keys))
		for i := range order {
			order[i] = i
		}
		if sorted {
			sort.SliceStable(order, func(i, j int) bool { return utf16Less(v.keys[order[i]], v.keys[order[j]]) })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteByte(',')
			}
			writeString(b, v.keys[i])
			b.WriteByte(':')
			if why := encode(v.vals[i], b, sorted); why != "" {
				return why
			}
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for n, item := range v.items {
			if n > 0 {
				b.WriteByte(',')
			}
			if why := encode(item, b, sorted); why != "" {
				return why
			}
		}
		b.WriteByte(']')
	case 's':
		if v.badString {
			return "escape_form"
		}
		writeString(b, v.str)
	case 'n':
		if v.badNumber {
			return "number_form"
		}
		b.WriteString(esNumber(v.num))
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case 'z':
		b.WriteString("null")
	}
	return ""
}

// parseCanonical reads data as canonical JSON: the value, or the reason it is not.
func parseCanonical(data []byte) (v *value, reason string) {
	if !utf8.Valid(data) {
		return nil, "not_utf8"
	}
	if depth(data) > maxDepth {
		return nil, "too_deep"
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*jsonError)
			if !ok {
				panic(r)
			}
			v, reason = nil, e.reason
		}
	}()
	p := &parser{data: data}
	v = p.value()
	p.ws()
	if p.pos != len(data) {
		return nil, "not_json"
	}
	var again bytes.Buffer
	if encode(v, &again, true) == "" && bytes.Equal(again.Bytes(), data) {
		return v, ""
	}
	if bytes.ContainsAny(blank(data), " \t\r\n") {
		return nil, "whitespace"
	}
	var inOrder bytes.Buffer
	if why := encode(v, &inOrder, false); why != "" {
		return nil, why
	}
	if !bytes.Equal(inOrder.Bytes(), data) {
		if !bytes.Equal(blank(inOrder.Bytes()), blank(data)) {
			return nil, "number_form"
		}
		return nil, "escape_form"
	}
	return nil, "key_order"
}

func (v *value) get(key string) *value {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}
